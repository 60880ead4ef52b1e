"""The model-based test of a keyed Kafka topic kept as an Iceberg table by key (tests/support/world_upsert.py), for
fixed seeds and a bounded number of steps (its long soak: `scripts/soak_world.py --world upsert`): after every step
no key is in the table twice and the table reads as the topic after one offset per partition, never an earlier one;
at the end each key holds its last value, a tombstoned key none. In a file of its own, so that pytest-xdist runs it
beside test_world_model.py."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = [pytest.mark.crash, pytest.mark.kafka]
pytest.importorskip("pyiceberg")
pytest.importorskip("duckdb")

STEPS = 14


def test_upsert_histories_keep_each_key_at_a_value_it_had_and_end_at_its_last(tmp_path: Path, broker) -> None:
    from support.world_upsert import UpsertHistory, UpsertWorld

    log: list[str] = []
    for history in [UpsertHistory(1, STEPS, broker.bootstrap, include=("state_reset", "abandon", "compact")),
                    UpsertHistory(2, STEPS, broker.bootstrap, include=("continuous_killed", "concurrent_runs",
                                                                       "run_killed_at_point"))]:
        world = history.run(tmp_path / str(history.seed))
        assert isinstance(world, UpsertWorld) and all(world.messages.values()), "the history produced to both partitions"
        log += world.log
    rules = ("state reset", "abandon", "compact", "continuous run", "concurrent runs", "run killed")
    missing = [rule for rule in rules if not any(rule in line for line in log)]
    assert not missing, f"no history drew {missing}: pick other seeds"
