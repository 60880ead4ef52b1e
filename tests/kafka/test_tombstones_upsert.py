"""A compacted-topic style Kafka topic kept as an Iceberg table by the message key (`tombstones: delete`): the last
value of each key is its row, and a tombstone (a null value) deletes the key's row, on a real broker; the table read
back by pyiceberg and by DuckDB over the files its manifests list, and compared key by key with the topic's last
values."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from gobblin_py.builtin.sources.kafka.metadata import with_metadata
from gobblin_py.builtin.sources.kafka.settings import KafkaSettings
from gobblin_py.testing.outputs import read_error_files

from support.confluent_avro import V1, run
from support.kafka_broker import create_topic, produce
from support.kafka_jobs import kafka_job

pytest.importorskip("pyiceberg")
duckdb = pytest.importorskip("duckdb")
pytestmark = pytest.mark.kafka


def _datum(record: dict[str, Any]) -> bytes:
    import fastavro

    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(V1), record)
    return buf.getvalue()


def _job(tmp: Path, bootstrap: str, topic: str) -> dict[str, Any]:
    (tmp / "order.avsc").write_text(json.dumps(V1))
    job = kafka_job(tmp, bootstrap, [topic], deserializer="avro", avro_schema=str(tmp / "order.avsc"),
                    metadata_columns=["key", "offset"], tombstones="delete")
    del job["converters"]
    job["writer"] = {"class": "parquet"}
    job["publisher"] = {"class": "iceberg", "table": "db.orders", "warehouse": str(tmp / "warehouse"), "mode": "upsert",
                        "key": ["_kafka_key"], "order_by": ["_kafka_offset"],
                        "delete_when": {"column": "_kafka_deleted", "equals": [True]}}
    return job


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
    create_topic(broker.bootstrap, topic, 2)
    last: dict[str, dict[str, Any] | None] = {}

    def send(messages: dict[int, list[tuple[str, dict[str, Any] | None]]]) -> None:
        produce(broker.bootstrap, topic, {p: [(k.encode(), None if v is None else _datum(v)) for k, v in ms]
                                          for p, ms in messages.items()})
        for ms in messages.values():
            for k, v in ms:
                last[k] = v

    def order(i: int, version: int) -> dict[str, Any]:
        return {"id": i, "customer": f"c{i}-v{version}", "amount": float(version)}

    # keys k0..k9 on partition 0, k10..k19 on partition 1 (a key's messages share a partition, as Kafka's partitioner
    # keeps them); a key written several times in one run, a tombstone, a key deleted then written again
    send({0: [(f"k{i}", order(i, 1)) for i in range(10)] + [("k3", order(3, 2)), ("k4", None), ("k3", order(3, 3))],
          1: [(f"k{i}", order(i, 1)) for i in range(10, 20)] + [("k12", None), ("k12", order(12, 2)), ("k15", None)]})
    job = _job(tmp_path, broker.bootstrap, topic)
    first = run(tmp_path, job)
    assert first.succeeded, first.error
    want = {k: v for k, v in last.items() if v is not None}
    table = _table(tmp_path)
    assert {k: (r["id"], r["customer"]) for k, r in table.items()} == {k: (v["id"], v["customer"]) for k, v in want.items()}
    assert not any(r["_kafka_deleted"] for r in table.values())

    send({0: [("k0", None), ("k1", order(1, 2)), ("k4", order(4, 2))], 1: [("k19", None), ("k12", None)]})
    second = run(tmp_path, job)
    assert second.succeeded, second.error
    want = {k: v for k, v in last.items() if v is not None}
    table = _table(tmp_path)
    assert {k: (r["id"], r["customer"]) for k, r in table.items()} == {k: (v["id"], v["customer"]) for k, v in want.items()}
    assert "k0" not in table and "k19" not in table and "k12" not in table and table["k4"]["customer"] == "c4-v2"
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
