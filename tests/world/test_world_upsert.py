"""The model-based test of a keyed Kafka topic kept as an Iceberg table, and as a Delta table, by key
(tests/support/world_upsert.py), for fixed seeds and a bounded number of steps (its long soak: `scripts/soak_world.py
--world upsert` and `--world upsert_delta`): after every step
no key is in the table twice and the table reads as the topic after one offset per partition, never an earlier one;
at the end each key holds its last value, a tombstoned key none. In a file of its own, so that pytest-xdist runs it
beside test_world_model.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.world import drew

pytestmark = [pytest.mark.crash, pytest.mark.kafka]
pytest.importorskip("pyiceberg")
pytest.importorskip("duckdb")

STEPS = 14


@pytest.mark.parametrize("table", ["iceberg", "delta"])
def test_upsert_histories_keep_each_key_at_a_value_it_had_and_end_at_its_last(tmp_path: Path, broker, table: str) -> None:
    """The same histories into an Iceberg table and into a Delta table in upsert mode (one merge per commit)."""
    from support.world_upsert import DeltaUpsertHistory, UpsertHistory, UpsertWorld

    if table == "delta":
        pytest.importorskip("deltalake")
    kind = DeltaUpsertHistory if table == "delta" else UpsertHistory
    log: list[str] = []
    for history in [kind(1, STEPS, broker.bootstrap, include=("state_reset", "abandon", "compact")),
                    kind(3, STEPS, broker.bootstrap, include=("continuous_killed", "concurrent_runs", "abandon"))]:
        world = history.run(tmp_path / str(history.seed))
        assert isinstance(world, UpsertWorld) and all(world.messages.values()), "the history produced to both partitions"
        log += world.log
    # each rule did something: a run killed at a commit point, a state reset that took, ...
    rules = (r"run killed: .* -> -9$", r"state reset: .* -> 0$", "abandon:", "compact:", "continuous run killed",
             "concurrent runs")
    drew(log, rules)
