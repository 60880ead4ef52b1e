"""A keyed Kafka topic with tombstones kept as a table by key (`tombstones: delete`, a publisher in `mode: upsert`):
the scenario the Iceberg and Delta upsert tests share, each reading the table back its own way."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support.confluent_avro import V1, run
from support.confluent_avro import datum as _datum
from support.kafka_broker import create_topic, produce
from support.kafka_jobs import kafka_job


def tombstone_job(tmp: Path, bootstrap: str, topic: str, publisher: dict[str, Any]) -> dict[str, Any]:
    """A job reading `topic` (Avro values of V1, the key and offset as columns, `tombstones: delete`) into Parquet
    files for `publisher`, which gets the upsert settings by `_kafka_key`, ordered by `_kafka_offset`."""
    (tmp / "order.avsc").write_text(json.dumps(V1))
    job = kafka_job(tmp, bootstrap, [topic], deserializer="avro", avro_schema=str(tmp / "order.avsc"),
                    metadata_columns=["key", "offset"], tombstones="delete")
    del job["converters"]
    job["writer"] = {"class": "parquet"}
    job["publisher"] = {**publisher, "mode": "upsert", "key": ["_kafka_key"], "order_by": ["_kafka_offset"],
                        "delete_when": {"column": "_kafka_deleted", "equals": [True]}}
    return job


def tombstone_runs(tmp: Path, bootstrap: str, topic: str, job: dict[str, Any],
                   read: Callable[[Path], dict[str, dict[str, Any]]]) -> None:
    """Two runs of `job` over a keyed topic: after each, the table (by key, as `read` gives it) holds each key's last
    value, and no key whose last message is a tombstone."""
    create_topic(bootstrap, topic, 2)
    last: dict[str, dict[str, Any] | None] = {}

    def send(messages: dict[int, list[tuple[str, dict[str, Any] | None]]]) -> None:
        produce(bootstrap, topic, {p: [(k.encode(), None if v is None else _datum(v)) for k, v in ms]
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
    first = run(tmp, job)
    assert first.succeeded, first.error
    want = {k: v for k, v in last.items() if v is not None}
    table = read(tmp)
    assert {k: (r["id"], r["customer"]) for k, r in table.items()} == {k: (v["id"], v["customer"]) for k, v in want.items()}
    assert not any(r["_kafka_deleted"] for r in table.values())

    send({0: [("k0", None), ("k1", order(1, 2)), ("k4", order(4, 2))], 1: [("k19", None), ("k12", None)]})
    second = run(tmp, job)
    assert second.succeeded, second.error
    want = {k: v for k, v in last.items() if v is not None}
    table = read(tmp)
    assert {k: (r["id"], r["customer"]) for k, r in table.items()} == {k: (v["id"], v["customer"]) for k, v in want.items()}
    assert "k0" not in table and "k19" not in table and "k12" not in table and table["k4"]["customer"] == "c4-v2"
