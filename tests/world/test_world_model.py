"""The model-based test in CI: each world's histories for fixed seeds and a bounded number of steps (the long soak
with random seeds is `scripts/soak_world.py`). A history interleaves runs (in the driver and on real local Spark),
SIGKILLs at commit points and at random times, recoveries, abandons, compactions, concurrent runs, `state reset` and
changes to the world (see tests/support/world*.py), and checks after every step that an independent reader sees
no id more often than owed, and at the end every id as often as owed. Each history takes its world's rare or slow
rules at fixed steps (`include`); the test fails if one of them stops doing anything."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.world import History

pytestmark = pytest.mark.crash
pytest.importorskip("avro")

STEPS = 14


def run_all(histories: list[History], tmp: Path) -> list[str]:
    """Each history in a directory of its own; every step of all of them."""
    log: list[str] = []
    for history in histories:
        world = history.run(tmp / f"{history.kind}-{history.seed}")
        assert world.expected, "the history produced records"
        log += world.log
    return log


def drew(log: list[str], *rules: str) -> None:
    """The histories took each of `rules` at least once."""
    missing = [rule for rule in rules if not any(rule in line for line in log)]
    assert not missing, f"no history drew {missing}: pick other seeds"


@pytest.mark.spark
def test_files_histories_publish_every_id_as_often_as_owed(tmp_path: Path) -> None:
    from support.world_files import FilesHistory

    log = run_all([FilesHistory(1, STEPS, include=("run_on_spark", "state_reset", "maintain")),
                   FilesHistory(2, STEPS, include=("disk_full", "dangling_symlink", "rotate", "delete_file", "rotate"))],
                  tmp_path)
    drew(log, "run on Spark", "state reset", "disk full", "dangling symlink", "deleted", "rotated", "state reset after rotation",
         "maintain removed the partitions")


@pytest.mark.kafka
def test_kafka_histories_publish_every_id_as_often_as_owed(tmp_path: Path, broker) -> None:
    from support.world_kafka import KafkaHistory

    log = run_all([KafkaHistory(1, STEPS, broker.bootstrap, include=("recreate_topic", "state_reset")),
                   KafkaHistory(2, STEPS, broker.bootstrap, include=("continuous_killed", "concurrent_runs"))], tmp_path)
    drew(log, "topic re-created", "state reset", "continuous run", "concurrent runs")


def test_iceberg_histories_publish_every_id_as_often_as_owed(tmp_path: Path) -> None:
    pytest.importorskip("pyiceberg")
    pytest.importorskip("duckdb")
    from support.world_iceberg import IcebergHistory

    log = run_all([IcebergHistory(1, STEPS, include=("run_job", "rename_column", "maintain", "add_column")),
                   IcebergHistory(2, STEPS, include=("run_job", "add_column", "maintain", "rename_column")),
                   IcebergHistory(3, STEPS, include=("run_job", "drop_table", "run_job", "drop_table"))], tmp_path)
    drew(log, "renamed", "column note added", "maintain expired", "dropped and purged", "state reset after drop",
         "maintain removed the partitions")
