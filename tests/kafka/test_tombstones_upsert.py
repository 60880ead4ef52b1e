"""A compacted-topic style Kafka topic kept as an Iceberg table by the message key (`tombstones: delete`): the last
value of each key is its row, and a tombstone (a null value) deletes the key's row, on a real broker; the table read
back by pyiceberg and by DuckDB over the files its manifests list, and compared key by key with the topic's last
values."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from support.confluent_avro import V1, run
from support.confluent_avro import datum as _datum
from support.kafka_broker import create_topic
from support.kafka_tombstones import tombstone_job, tombstone_runs

from gobblin_py.builtin.sources.kafka.metadata import with_metadata
from gobblin_py.builtin.sources.kafka.settings import KafkaSettings
from gobblin_py.testing.outputs import read_error_files

pytest.importorskip("pyiceberg")
duckdb = pytest.importorskip("duckdb")
pytestmark = pytest.mark.kafka


def _job(tmp: Path, bootstrap: str, topic: str) -> dict[str, Any]:
    return tombstone_job(tmp, bootstrap, topic, {"class": "iceberg", "table": "db.orders", "warehouse": str(tmp / "warehouse")})


def _table(tmp: Path) -> dict[str, dict[str, Any]]:
    """The table by key, as pyiceberg reads it; DuckDB reads the same rows from the live files."""
    from pyiceberg.catalog import load_catalog

    catalog = load_catalog("gobblin_py", type="sql", uri=f"sqlite:///{tmp / 'work' / 'iceberg' / 'catalog.db'}")
    table = catalog.load_table("db.orders")
    rows = table.scan().to_arrow().sort_by("_kafka_key").to_pylist()
    files = [task.file.file_path.removeprefix("file://") for task in table.scan().plan_files()]
    seen = duckdb.sql(f"SELECT _kafka_key, id, customer FROM read_parquet({files!r}) ORDER BY _kafka_key").fetchall()
    assert seen == [(r["_kafka_key"], r["id"], r["customer"]) for r in rows]
    return {r["_kafka_key"]: r for r in rows}


def test_each_key_holds_its_last_value_and_a_tombstone_deletes_it(tmp_path: Path, broker, topic: str) -> None:
    tombstone_runs(tmp_path, broker.bootstrap, topic, _job(tmp_path, broker.bootstrap, topic), _table)
    assert not read_error_files(tmp_path / "warehouse" / "_errors")


def test_a_tombstone_without_a_key_is_a_bad_record_and_the_others_are_applied(tmp_path: Path, broker, topic: str) -> None:
    from confluent_kafka import Producer  # kafka-python sends no message without both key and value

    create_topic(broker.bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": False})
    for key, value in [(b"a", _datum({"id": 1, "customer": "x", "amount": 1.0})), (None, None),
                       (b"b", _datum({"id": 2, "customer": "y", "amount": 2.0})), (b"a", None)]:
        producer.produce(topic, key=key, value=value, partition=0)
        assert producer.flush(10) == 0  # one record a batch: the broker's end offset is exact
    result = run(tmp_path, _job(tmp_path, broker.bootstrap, topic))
    assert result.succeeded, result.error
    assert list(_table(tmp_path)) == ["b"]  # a: written, then deleted
    (error,) = read_error_files(tmp_path / "warehouse" / "_errors")
    assert error["location"] == f"{topic}/0@1" and "without a key" in error["reason"]


def test_tombstones_delete_makes_the_value_fields_nullable_and_adds_the_marker() -> None:
    s = KafkaSettings(bootstrap_servers="b:9092", topics=["t"], deserializer="confluent_avro",
                      schema_registry={"url": "http://127.0.0.1:1"}, metadata_columns=["key"], tombstones="delete")
    fields = {f["name"]: f for f in with_metadata(s, V1)["fields"]}
    assert fields["id"]["type"] == ["null", "int"] and fields["id"]["default"] is None
    assert fields["_kafka_deleted"] == {"name": "_kafka_deleted", "type": "boolean", "default": False}


@pytest.mark.parametrize("settings", [{"deserializer": "json", "metadata_columns": []},
                                      {"deserializer": "avro", "avro_schema": "x.avsc", "metadata_columns": ["offset"]}])
def test_tombstones_delete_without_a_key_column_or_a_schema_is_refused(tmp_path: Path, settings: dict[str, Any]) -> None:
    (tmp_path / "x.avsc").write_text(json.dumps(V1))
    if "avro_schema" in settings:
        settings = {**settings, "avro_schema": str(tmp_path / "x.avsc")}
    with pytest.raises(ValidationError, match="tombstones: delete needs metadata_columns with key"):
        KafkaSettings(bootstrap_servers="b:9092", topics=["t"], tombstones="delete", **settings)
