"""`deserializer: confluent_avro` on the columnar path (the extractor decodes a poll's values into Arrow a field at a
time, `sources/kafka/columnar.py`) against the same job record by record (`job.columnar: false`), on a real broker
with both clients and a schema registry: a partition of clean values takes the columnar path whole, and its files
are byte for byte the row path's; a partition with an undecodable value, a tombstone, a key that is not UTF-8 and a
run of values of an older version of the subject has its other batches columnar, and both paths write the same
files, the same bad records with their offsets, the same counters and watermarks."""

from __future__ import annotations

import datetime as dt
import math
import re
import struct
from pathlib import Path
from typing import Any

import pytest
from support.confluent_avro import job_for, serialize, serializer
from support.jobs import write_job
from support.kafka_broker import create_topic, produce
from support.schema_registry import LocalSchemaRegistry

from gobblin_py.builtin.sources.kafka.split import KafkaSplit
from gobblin_py.config import load_job
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import JobRunner
from gobblin_py.testing.outputs import read_error_files

pytestmark = pytest.mark.kafka

NEW = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "customer", "type": "string"},
    {"name": "amount", "type": "double"},
    {"name": "qty", "type": "int"},
    {"name": "paid", "type": "boolean"},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "score", "type": "float"},
    {"name": "channel", "type": {"type": "enum", "name": "Channel", "symbols": ["WEB", "APP", "POS"]}},
    {"name": "blob", "type": "bytes"},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "discount", "type": ["null", "double"], "default": None},
]}
OLD = {**NEW, "fields": NEW["fields"][:10]}  # version 1: before note and discount (both with defaults)
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def order(i: int, old: bool = False) -> dict[str, Any]:
    record = {"id": i, "customer": ("", "zoë", "客户", f"c{i % 97}")[i % 4], "amount": (math.nan, -0.0, 1e300, i / 8)[i % 4],
              "qty": (-(2**31), 2**31 - 1, 0, i)[i % 4], "paid": i % 3 == 0,
              "ts": START_MS + (i % 3) * 86_400_000 + i, "day": dt.date(2026, 1, 1) + dt.timedelta(days=i % 40),
              "score": i / 3, "channel": ("WEB", "APP", "POS")[i % 3], "blob": bytes([i % 256]) * (i % 5)}
    if not old:
        record.update(note=None if i % 2 else f"n-{i}", discount=None if i % 5 else i / 100)
    return record


def _files(output: Path) -> dict[str, bytes]:
    return {str(p.relative_to(output)): p.read_bytes() for p in sorted(output.rglob("*"))
            if p.is_file() and p.suffix in (".parquet", ".avro") and "_errors" not in p.parts}


def _rows(data: dict[str, bytes], writer: str) -> dict[str, list[dict[str, Any]]]:
    import io

    import fastavro
    import pyarrow.parquet as pq

    if writer == "avro":
        return {name: list(fastavro.reader(io.BytesIO(b))) for name, b in data.items()}
    return {name: pq.read_table(io.BytesIO(b)).to_pylist() for name, b in data.items()}


@pytest.mark.parametrize(("client", "writer", "metadata"), [
    ("confluent", "parquet", True), ("kafka-python", "parquet", False), ("confluent", "avro", False)])
def test_the_columnar_confluent_avro_path_writes_what_the_row_path_writes(
        tmp_path: Path, broker, topic: str, schema_registry: LocalSchemaRegistry, client: str, writer: str,
        metadata: bool) -> None:
    create_topic(broker.bootstrap, topic, 2)
    older = serialize(serializer(schema_registry.url, OLD), topic, [order(i, old=True) for i in range(5000, 5030)])
    newer = serializer(schema_registry.url, NEW)  # version 2, the latest: the output schema
    clean = serialize(newer, topic, [order(i) for i in range(400)])
    mixed = serialize(newer, topic, [order(i) for i in range(1000, 1300)])
    assert {struct.unpack(">I", v[1:5])[0] for v in older} != {struct.unpack(">I", v[1:5])[0] for v in clean}
    cut = mixed[150][:-3]  # the output's own schema id, its payload cut short: a bad record
    keyed: dict[int, list[Any]] = {
        0: [(None if i % 7 == 0 else f"k{i}".encode(), v) for i, v in enumerate(clean)],
        1: [(f"m{i}".encode(), v) for i, v in enumerate(mixed[:150])] + [(b"cut", cut)]
           + [(b"m-tomb", None)] + [(b"\xff\xfe" if metadata else b"x", mixed[151])]  # a tombstone; a key not UTF-8
           + [(f"m{i}".encode(), v) for i, v in enumerate(mixed[152:200])] + [(b"old", v) for v in older]
           + [(f"m{i}".encode(), v) for i, v in enumerate(mixed[200:])],
    }
    produce(broker.bootstrap, topic, keyed)
    results = {}
    for columnar in (True, False):
        tmp = tmp_path / ("columnar" if columnar else "rows")
        tmp.mkdir()
        source: dict[str, Any] = {"client": client, "max_poll_records": 64}
        if metadata:
            source["metadata_columns"] = ["key", "topic", "partition", "offset", "timestamp"]
        job = job_for(tmp, broker.bootstrap, topic, {"url": schema_registry.url}, writer, **source)
        job["job"]["columnar"] = columnar
        job["writer"]["partition"] = {"column": "ts", "granularity": "DAY", "pattern": "yyyy/MM/dd"}
        results[columnar] = JobRunner(load_job(write_job(tmp, job)), InProcessExecutor()).run()
        assert results[columnar].succeeded, results[columnar].error
    fast, slow = _files(tmp_path / "columnar" / "output"), _files(tmp_path / "rows" / "output")
    assert fast.keys() == slow.keys() and fast
    fast_rows, slow_rows = _rows(fast, writer), _rows(slow, writer)
    for name in fast:
        assert repr(fast_rows[name]) == repr(slow_rows[name]), name  # repr: NaN equal to NaN, -0.0 told from 0.0
        assert fast[name] == slow[name], name  # the same bytes, however the rows came in
    ids = sorted(r["id"] for rows in fast_rows.values() for r in rows)
    bad = {1150, 1151} if metadata else {1150}  # the cut payload; the key that is not UTF-8
    assert ids == sorted([*range(400), *(i for i in range(1000, 1300) if i not in bad), *range(5000, 5030)])  # once
    by_partition = {KafkaSplit.of(t.workunit).partition: t for t in results[True].tasks}
    assert by_partition[0].records_columnar == by_partition[0].records_extracted == 400  # every batch whole
    assert 0 < by_partition[1].records_columnar < by_partition[1].records_extracted  # the odd batches by record
    assert all(t.records_columnar == 0 for t in results[False].tasks)

    def errors(root: Path) -> list[tuple[str, str]]:
        return sorted((e["location"], re.sub(r" at 0x[0-9a-f]+", "", e["reason"])) for e in read_error_files(root))
    found = errors(tmp_path / "columnar" / "output")
    assert found == errors(tmp_path / "rows" / "output")
    assert [location for location, _ in found] == sorted(f"{topic}/1@{o}" for o in ([150, 151, 152] if metadata else [150, 151]))
    assert results[True].datasets[0].counters == results[False].datasets[0].counters
    assert [t.actual_high_watermark for t in results[True].tasks] == [t.actual_high_watermark for t in results[False].tasks]
    if metadata:
        rows = {r["id"]: r for rows in fast_rows.values() for r in rows}
        assert rows[0]["_kafka_key"] is None and rows[1]["_kafka_key"] == "k1"
        assert (rows[5002]["_kafka_topic"], rows[5002]["_kafka_partition"], rows[5002]["_kafka_offset"]) == (topic, 1, 203)
        assert rows[3]["_kafka_timestamp"] is not None


def test_a_merged_output_schema_keeps_to_the_row_path(tmp_path: Path, broker, topic: str,
                                                      schema_registry: LocalSchemaRegistry) -> None:
    """Under `schema_evolution: evolve` with versions that do not read into the latest one, the output schema is their
    merge, which no producer writes: every batch takes the row path, and every value lands once."""
    create_topic(broker.bootstrap, topic, 1)
    schema_registry.state.set_config(f"{topic}-value", "NONE")
    plain = [f for f in NEW["fields"] if f["name"] in ("id", "customer", "amount", "note")]  # no logical types: see
    first = {**NEW, "fields": [*plain, {"name": "gone", "type": "string"}]}  # evolution.merge_versions
    latest = {**NEW, "fields": plain}
    values = serialize(serializer(schema_registry.url, first), topic,
                       [{"id": i, "customer": "c", "amount": 1.5, "note": None, "gone": "g"} for i in range(20)])
    values += serialize(serializer(schema_registry.url, latest), topic,
                        [{"id": i, "customer": "c", "amount": 2.5, "note": "n"} for i in range(20, 50)])
    produce(broker.bootstrap, topic, {0: values})
    job = job_for(tmp_path, broker.bootstrap, topic, {"url": schema_registry.url}, "parquet", client="confluent",
                  schema_evolution="evolve")
    result = JobRunner(load_job(write_job(tmp_path, job)), InProcessExecutor()).run()
    assert result.succeeded, result.error
    assert [t.records_columnar for t in result.tasks] == [0]
    import pyarrow.parquet as pq

    rows = [r for p in (tmp_path / "output").rglob("*.parquet") for r in pq.read_table(p).to_pylist()]
    assert sorted(r["id"] for r in rows) == list(range(50))
    assert {r["gone"] for r in rows} == {"g", None}
