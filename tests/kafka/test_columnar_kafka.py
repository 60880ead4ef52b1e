"""Kafka (JSON) → json_to_avro → parquet on the columnar path against the same job record by record
(`job.columnar: false`), on a real broker with both clients: the same rows in the same partition files, the
same bad records in the error files, the same counters and watermarks."""

from __future__ import annotations

import gc
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq
import pytest
from support.jobs import write_job
from support.kafka_broker import create_topic, produce
from support.kafka_jobs import events, kafka_job

from gobblin_py.builtin.sources.kafka.split import KafkaSplit
from gobblin_py.config import load_job
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import JobRunner
from gobblin_py.testing.outputs import read_error_files

pytestmark = pytest.mark.kafka

ODD = [
    {"id": "900001", "ts": 1767225600000, "user": "u", "kind": "k"},        # text → long: converted
    {"id": 900002, "ts": "2026-01-02T03:04:05Z", "user": "u", "kind": "k"},  # ISO time: converted
    {"id": 900003, "ts": 1767225600000, "user": "u", "kind": "k", "extra": 1},  # dropped and counted
    {"id": 900004, "ts": 1767225600000, "kind": "k"},                        # no user: a bad record
    {"id": 900005, "ts": 1767225600000, "user": "u", "kind": "k", "country": ""},  # blank → null
]
RAW_ODD = [b'{"id": 900006,', b"[1, 2]", b'{"id":900007,"ts":1767225600000,"user":"u","kind":"k","amount":NaN}',
           b'{\n "id": 900008, "ts": 1767225600000, "user": "u", "kind": "k"\n}']


def _job(tmp: Path, bootstrap: str, topic: str, client: str, columnar: bool) -> dict[str, Any]:
    job = kafka_job(tmp, bootstrap, [topic], client=client)
    job["job"]["columnar"] = columnar
    job["writer"] = {"class": "parquet", "row_group_records": 100,
                     "partition": {"column": "ts", "granularity": "DAY", "pattern": "yyyy/MM/dd"}}
    return job


def _rows(output: Path) -> dict[str, list[dict[str, Any]]]:
    """Each output file's rows by its path under the partition directories (the name carries the range)."""
    return {str(p.relative_to(output)): pq.read_table(p).to_pylist() for p in sorted(output.rglob("*.parquet"))}


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_the_columnar_path_writes_what_the_row_path_writes(tmp_path: Path, broker, topic: str, client: str) -> None:
    create_topic(broker.bootstrap, topic, 2)
    clean = [orjson.dumps(e) for e in events(600)]
    mixed = [orjson.dumps(e) for e in events(300)]
    for i, value in enumerate([*map(orjson.dumps, ODD), *RAW_ODD]):
        mixed.insert(37 * (i + 1), value)
    produce(broker.bootstrap, topic, {0: clean, 1: mixed})

    results = {}
    threshold = gc.get_threshold()
    for columnar in (True, False):
        tmp = tmp_path / ("columnar" if columnar else "rows")
        tmp.mkdir()
        results[columnar] = JobRunner(load_job(write_job(tmp, _job(tmp, broker.bootstrap, topic, client, columnar))),
                                      InProcessExecutor()).run()
    fast, slow = results[True], results[False]
    assert fast.succeeded and slow.succeeded
    assert gc.get_threshold() == threshold  # raised while each range was read (see `fewer_collections`), put back after

    fast_rows, slow_rows = _rows(tmp_path / "columnar" / "output"), _rows(tmp_path / "rows" / "output")
    assert fast_rows == slow_rows
    ids = Counter(r["id"] for rows in fast_rows.values() for r in rows)
    assert len(ids) == 600 + 300 + 5 and set(ids.values()) == {1}  # 4 odd JSON values converted, and the pretty one
    assert {900001, 900002, 900003, 900005, 900008} <= set(ids)
    assert next(r for rows in fast_rows.values() for r in rows if r["id"] == 900005)["country"] is None

    def errors(root: Path) -> list[tuple[str, str]]:
        return sorted((e["location"], e["reason"]) for e in read_error_files(root))
    assert errors(tmp_path / "columnar" / "output") == errors(tmp_path / "rows" / "output")
    assert len(errors(tmp_path / "columnar" / "output")) == 4  # no user, cut off, an array, NaN
    assert fast.datasets[0].counters == slow.datasets[0].counters
    assert fast.datasets[0].counters["unknown_fields_dropped"]["count"] == 1

    by_partition = {KafkaSplit.of(t.workunit).partition: t for t in fast.tasks}
    assert by_partition[0].records_columnar == 600  # a clean partition: every batch whole
    assert by_partition[0].records_extracted == 600
    assert by_partition[1].records_columnar < by_partition[1].records_extracted
    assert all(t.records_columnar == 0 for t in slow.tasks)
    assert [t.actual_high_watermark for t in fast.tasks] == [t.actual_high_watermark for t in slow.tasks]
