"""Kafka (JSON) → json_to_avro → avro, the embedded default's job, on the columnar path (Arrow batches encoded by
`avro_arrow`) against the same job record by record (`job.columnar: false`), on a real broker with both clients:
a clean partition's files are byte for byte the row path's; a partition with odd values has the same records in
the same files, the same bad records in the error files, the same counters and watermarks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fastavro
import orjson
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

ODD = [b'{"id":"900001","ts":1767225600000,"user":"u","kind":"k"}',          # text → long: converted
       b'{"id":900002,"ts":1767225600000,"kind":"k"}',                       # no user: a bad record
       b'{"id":900003,"ts":1767225600000,"user":"u","kind":"k","extra":1}',  # dropped and counted
       b'{"id": 900004,', b"[1, 2]"]


def _files(output: Path) -> dict[str, bytes]:
    return {str(p.relative_to(output)): p.read_bytes() for p in sorted(output.rglob("*.avro")) if "_errors" not in p.parts}


def _records(data: bytes) -> list[dict[str, Any]]:
    import io

    return list(fastavro.reader(io.BytesIO(data)))


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_the_columnar_avro_path_writes_what_the_row_path_writes(tmp_path: Path, broker, topic: str, client: str) -> None:
    create_topic(broker.bootstrap, topic, 2)
    clean_events = events(700)
    clean = [orjson.dumps(e) for e in clean_events]
    mixed = [orjson.dumps(e) for e in events(300)]
    for i, value in enumerate(ODD):
        mixed.insert(41 * (i + 1), value)
    produce(broker.bootstrap, topic, {0: clean, 1: mixed})
    results = {}
    for columnar in (True, False):
        tmp = tmp_path / ("columnar" if columnar else "rows")
        tmp.mkdir()
        job = kafka_job(tmp, broker.bootstrap, [topic], client=client)
        job["job"]["columnar"] = columnar
        job["writer"] = {"class": "avro", "sync_interval": 2048,
                         "partition": {"column": "ts", "granularity": "DAY", "pattern": "yyyy/MM/dd"}}
        results[columnar] = JobRunner(load_job(write_job(tmp, job)), InProcessExecutor()).run()
        assert results[columnar].succeeded
    fast, slow = _files(tmp_path / "columnar" / "output"), _files(tmp_path / "rows" / "output")
    assert fast.keys() == slow.keys() and fast
    for name in fast:
        assert _records(fast[name]) == _records(slow[name]), name
    by_partition = {KafkaSplit.of(t.workunit).partition: t for t in results[True].tasks}
    clean_ids = {e["id"] for e in clean_events}
    clean_files = [n for n in fast if all(r["id"] in clean_ids for r in _records(fast[n]))]
    assert len(clean_files) == 3  # partition 0's events over 3 days
    assert all(fast[n] == slow[n] for n in clean_files)  # written from batches: byte for byte the row path's files
    assert by_partition[0].records_columnar == 700  # every batch of the clean partition whole …
    assert by_partition[1].records_columnar < by_partition[1].records_extracted  # … a batch with odd ones by record
    assert all(t.records_columnar == 0 for t in results[False].tasks)

    def errors(root: Path) -> list[tuple[str, str]]:
        return sorted((e["location"], e["reason"]) for e in read_error_files(root))
    assert errors(tmp_path / "columnar" / "output") == errors(tmp_path / "rows" / "output")
    assert len(errors(tmp_path / "columnar" / "output")) == 3
    assert results[True].datasets[0].counters == results[False].datasets[0].counters
    assert [t.actual_high_watermark for t in results[True].tasks] == [t.actual_high_watermark for t in results[False].tasks]
