"""A record a writer cannot partition or encode is a RecordError naming it, and leaves every file valid:
the records written before and after it are all readable (by Apache avro where installed), counts exact."""

from __future__ import annotations

import datetime as dt
import gzip
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.writers import write_all

from gobblin_py.api import OutputFile, WriterTarget
from gobblin_py.builtin.writers.avro import AvroWriter
from gobblin_py.builtin.writers.jsonl import JsonLinesWriter
from gobblin_py.builtin.writers.time_partitioner import PartitionSettings, TimePartitioner
from gobblin_py.errors import RecordError
from gobblin_py.runtime.task.error_file import ErrorFile

DAY0 = int(dt.datetime(2026, 1, 1, tzinfo=dt.UTC).timestamp() * 1000)
SCHEMA: dict[str, Any] = {
    "type": "record", "name": "Event", "namespace": "test",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "user", "type": "string"},
        {"name": "tags", "type": {"type": "map", "values": "long"}, "default": {}},
    ],
}
GOOD = [{"id": i, "ts": DAY0 + i, "user": f"u{i}", "tags": {"n": i}} for i in range(1, 4)]
# each fails after part of it was encoded into the writer's block (the first fields are fine)
UNENCODABLE = [
    {"id": 10, "ts": DAY0, "user": "\udc80", "tags": {}},            # a lone surrogate: not UTF-8
    {"id": 11, "ts": DAY0, "user": "x", "tags": {"n": 2**64}},       # a map value beyond long
    {"id": 12, "ts": DAY0, "user": "x", "tags": {"n": "seven"}},     # a map value of the wrong type
    {"id": 2**63, "ts": DAY0, "user": "x", "tags": {}},              # the first field beyond long
]


def read_avro(path: str) -> list[dict[str, Any]]:
    """Every record of the file, read by Apache avro where installed (not the library that wrote it)."""
    try:
        from avro.datafile import DataFileReader
        from avro.io import DatumReader
    except ImportError:
        import fastavro
        with open(path, "rb") as f:
            return [{k: _millis(v) for k, v in rec.items()} for rec in fastavro.reader(f)]
    with open(path, "rb") as f, DataFileReader(f, DatumReader()) as reader:
        return [{k: _millis(v) for k, v in rec.items()} for rec in reader]


def _millis(value: Any) -> Any:
    """Apache avro reads timestamp-millis as a datetime; fastavro (and the records written) hold millis."""
    return round(value.timestamp() * 1000) if isinstance(value, dt.datetime) else value


def _target(root: Path) -> WriterTarget:
    return WriterTarget(staging_dir=root / "staging", task_output_dir=root / "output", rel_dir="ds", file_stem="wu")


def _write_all(writer: Any, schema: Any, records: list[dict[str, Any]], target: WriterTarget) -> tuple[list[OutputFile], list[str]]:
    """Write every record; the reasons of those refused as RecordError; then commit."""
    files, refused = write_all(writer, schema, records, target)
    return files, [str(exc) for exc in refused]


@pytest.mark.parametrize("codec", ["null", "deflate", "snappy", "zstandard"])
@pytest.mark.parametrize("partition", [None, {"column": "ts", "granularity": "DAY"}])
def test_avro_record_failing_mid_encoding_leaves_the_file_valid(tmp_path: Path, codec: str, partition: Any) -> None:
    records = [GOOD[0], UNENCODABLE[0], GOOD[1], UNENCODABLE[1], UNENCODABLE[2], UNENCODABLE[3], GOOD[2]]
    writer = AvroWriter(AvroWriter.Settings.model_validate({"codec": codec, "partition": partition}))
    files, refused = _write_all(writer, SCHEMA, records, _target(tmp_path))
    assert len(refused) == 4
    assert "'user'" in refused[0] and "'tags'" in refused[1] and "'tags'" in refused[2] and "'id'" in refused[3]
    assert all("cannot encode" in r for r in refused)
    [f] = files
    assert f.records == 3
    assert read_avro(f.path) == GOOD


def test_avro_refused_records_in_many_blocks_keep_every_block_valid(tmp_path: Path) -> None:
    writer = AvroWriter(AvroWriter.Settings.model_validate({"codec": "deflate", "sync_interval": 1024}))
    records = []
    for i in range(2000):
        records.append({"id": i, "ts": DAY0, "user": f"user-{i:05d}", "tags": {"k": i}})
        if i % 97 == 0:
            records.append({**UNENCODABLE[i % 3], "id": i})
    files, refused = _write_all(writer, SCHEMA, records, _target(tmp_path))
    assert len(refused) == 21
    [f] = files
    assert [r["id"] for r in read_avro(f.path)] == list(range(2000)) and f.records == 2000


def test_a_partition_whose_only_record_was_refused_publishes_no_file(tmp_path: Path) -> None:
    writer = AvroWriter(AvroWriter.Settings.model_validate({"partition": {"column": "ts", "granularity": "DAY"}}))
    late = {**UNENCODABLE[0], "ts": DAY0 + 86_400_000}
    files, refused = _write_all(writer, SCHEMA, [GOOD[0], late, GOOD[1]], _target(tmp_path))
    assert len(refused) == 1
    assert [(f.rel_path, f.records) for f in files] == [("ds/2026/01/01/wu.avro", 2)]
    assert not (tmp_path / "staging" / "ds" / "2026" / "01" / "02" / "wu.avro").exists()


@pytest.mark.parametrize("ts", [9_000_000_000_000_000_000, -70_000_000_000_000, 2**80])
def test_a_timestamp_no_calendar_holds_is_a_record_error_naming_field_and_value(ts: int) -> None:
    partitioner = TimePartitioner(PartitionSettings(column="ts"))
    with pytest.raises(RecordError) as info:
        partitioner.partition({"ts": ts})
    assert "'ts'" in str(info.value) and str(ts) in str(info.value) and info.value.field == "ts"


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_jsonl_value_orjson_cannot_encode_is_a_record_error_and_counts_stay_exact(tmp_path: Path, compression: str) -> None:
    writer = JsonLinesWriter(JsonLinesWriter.Settings.model_validate(
        {"compression": compression, "partition": {"column": "ts", "granularity": "DAY"}}))
    bad = [{"id": 2**70, "ts": DAY0}, {"id": 1, "ts": DAY0, "user": "\udc80"},
           {"id": 1, "ts": DAY0 + 86_400_000, "nested": {"deep": 2**65}}]
    files, refused = _write_all(writer, {"type": "json"}, [GOOD[0], *bad, GOOD[1]], _target(tmp_path))
    assert len(refused) == 3 and all("cannot encode as JSON" in r for r in refused)
    [f] = files  # the 2026-01-02 partition got only a refused record: no file
    raw = Path(f.path).read_bytes()
    lines = (gzip.decompress(raw) if compression == "gzip" else raw).splitlines()
    assert [orjson.loads(x) for x in lines] == [GOOD[0], GOOD[1]] and f.records == 2


def test_the_error_file_keeps_a_record_orjson_cannot_encode(tmp_path: Path) -> None:
    errors = ErrorFile(tmp_path / "staging", "ds", "wu")
    errors.write({"id": 2**70, "user": "\udc80", (1, 2): "tuple key"}, "field 'id': too big", "f.jsonl:7", "converters[0] (x)")
    errors.write({"id": 1}, "fine", "f.jsonl:8", "writer (avro)")
    [f] = errors.commit(tmp_path / "output")
    entries = [orjson.loads(line) for line in Path(f.path).read_bytes().splitlines()]
    assert f.records == 2 and [e["location"] for e in entries] == ["f.jsonl:7", "f.jsonl:8"]
    assert entries[0]["stage"] == "converters[0] (x)" and entries[0]["reason"] == "field 'id': too big"
    assert str(2**70) in str(entries[0]["record"])
