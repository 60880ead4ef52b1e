"""Kafka test data and job files: events over several days produced into sealed partitions."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from gobblin_py.testing.outputs import read_avro_dir
from support.jobs import EVENT_SCHEMA
from support.kafka_broker import create_topic, produce

DAY_MS = 86_400_000
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
_ids = itertools.count(1)


def events(n: int, days: int = 3, kind: str = "click") -> list[dict[str, Any]]:
    """`n` events with unique ids, timestamps spread over `days` days from 2026-01-01."""
    out = []
    for i in range(n):
        eid = next(_ids)
        out.append({"id": eid, "ts": START_MS + (i % days) * DAY_MS + eid % 1000, "user": f"u{eid % 97}",
                    "kind": kind, "amount": float(eid % 50), "country": "DE"})
    return out


def produce_events(bootstrap: str, topic: str, per_partition: dict[int, list[dict[str, Any]]]) -> dict[int, int]:
    """Produce JSON events, each partition sealed so that its end offset is exact; end offsets."""
    return produce(bootstrap, topic, {p: [orjson.dumps(e) for e in evs] for p, evs in per_partition.items()})


def new_topic(bootstrap: str, name: str, partitions: int, per_partition: int, days: int = 3) -> dict[int, list[dict[str, Any]]]:
    create_topic(bootstrap, name, partitions)
    data = {p: events(per_partition, days) for p in range(partitions)}
    if per_partition:
        produce_events(bootstrap, name, data)
    return data


def kafka_job(tmp: Path, bootstrap: str, topics: list[str], **source: Any) -> dict[str, Any]:
    """The jobs/kafka-to-avro.yaml job with its paths in `tmp` and short timeouts for tests."""
    return {
        "job": {"name": "k", "work_dir": str(tmp / "work"), "max_task_retries": 1, "commit_parallelism": 1},
        "source": {"class": "kafka", "bootstrap_servers": bootstrap, "topics": topics, "max_workunits": 4,
                   "request_timeout_ms": 5000, "idle_timeout_s": 5, **source},
        "converters": [{"class": "json_to_avro", "schema": str(EVENT_SCHEMA)}],
        "writer": {"class": "avro", "codec": "deflate", "partition": {"column": "ts", "granularity": "DAY", "pattern": "yyyy/MM/dd"}},
        "publisher": {"final_dir": str(tmp / "output")},
        "spark": {"master": "local[2]"},
    }


def output_ids(output: Path, topic: str) -> Counter[int]:
    """How many times each event id is in a topic's output."""
    return Counter(r["id"] for r in read_avro_dir(output / topic))


def read_topic(bootstrap: str, topic: str) -> list[Any]:
    """Every record of `topic`, read to its end (past an end offset a broker reports short)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", fetch_max_wait_ms=100)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out, quiet = [], 0
        while quiet < 3:
            polled = consumer.poll(timeout_ms=300)
            out += [r for records in polled.values() for r in records]
            quiet = 0 if polled else quiet + 1
        return out
    finally:
        consumer.close()
