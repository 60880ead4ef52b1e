"""A compacted-topic style Kafka topic kept as a Delta table by the message key (`tombstones: delete`, `publisher:
{class: delta, mode: upsert}`): the last value of each key is its row and a tombstone deletes it, on a real broker;
the table read back by delta-rs and by DuckDB (over the files its log lists) and compared key by key with the topic's
last values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.kafka_tombstones import tombstone_job, tombstone_runs

from gobblin_py.testing.outputs import read_error_files

deltalake = pytest.importorskip("deltalake")
duckdb = pytest.importorskip("duckdb")
pytestmark = pytest.mark.kafka


def _job(tmp: Path, bootstrap: str, topic: str) -> dict[str, Any]:
    return tombstone_job(tmp, bootstrap, topic, {"class": "delta", "table_uri": str(tmp / "lake" / "orders")})


def _table(tmp: Path) -> dict[str, dict[str, Any]]:
    """The table by key, as delta-rs reads it; DuckDB reads the same rows from the files the log lists."""
    t = deltalake.DeltaTable(str(tmp / "lake" / "orders"))
    rows = t.to_pyarrow_table().sort_by("_kafka_key").to_pylist()
    seen = duckdb.sql(f"SELECT _kafka_key, id, customer FROM read_parquet({t.file_uris()!r}) ORDER BY _kafka_key").fetchall()
    assert seen == [(r["_kafka_key"], r["id"], r["customer"]) for r in rows]
    keys = [r["_kafka_key"] for r in rows]
    assert len(keys) == len(set(keys)), "a key is in the table twice"
    return {r["_kafka_key"]: r for r in rows}


def test_each_key_holds_its_last_value_and_a_tombstone_deletes_it(tmp_path: Path, broker, topic: str) -> None:
    """The Iceberg upsert's scenario (keys written several times in one run, tombstones, a key deleted then written
    again), into Delta: after each of the two runs the table is each key's last value; one MERGE per run."""
    tombstone_runs(tmp_path, broker.bootstrap, topic, _job(tmp_path, broker.bootstrap, topic), _table)
    history = deltalake.DeltaTable(str(tmp_path / "lake" / "orders")).history()
    assert [h["operation"] for h in history if "gobblin-py.upsert" in h] == ["MERGE", "MERGE"]
    assert not read_error_files(tmp_path / "lake" / "_errors")
