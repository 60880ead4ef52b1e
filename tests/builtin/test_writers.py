"""The avro and jsonl writers alone: write, commit to a task output dir, read back what a user would."""

from __future__ import annotations

import datetime as dt
import gzip
import json
from pathlib import Path
from typing import Any

import crc32c
import fastavro
import pytest
from pydantic import ValidationError

from gobblin_py.api import OutputFile, WriterTarget
from gobblin_py.builtin.writers.avro import AvroWriter
from gobblin_py.builtin.writers.jsonl import JsonLinesWriter
from gobblin_py.errors import ConfigError, RecordError
from gobblin_py.fs import Location
from gobblin_py.runtime.task.committables import commit_writer

SCHEMA: dict[str, Any] = {
    "type": "record", "name": "Event", "namespace": "test",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "user", "type": "string"},
    ],
}


def _ms(*args: int) -> int:
    return int(dt.datetime(*args, tzinfo=dt.UTC).timestamp() * 1000)


RECORDS = [
    {"id": 1, "ts": _ms(2026, 1, 1, 10, 5), "user": "a"},
    {"id": 2, "ts": _ms(2026, 1, 1, 23, 59, 59), "user": "b"},
    {"id": 3, "ts": _ms(2026, 1, 2, 0, 0), "user": "c"},
    {"id": 4, "ts": _ms(2026, 1, 1, 10, 59), "user": "d"},
    {"id": 5, "ts": _ms(2026, 2, 28, 7, 30), "user": "e"},
]


def _target(root: Path, rel_dir: str = "clicks", stem: str = "wu-1") -> WriterTarget:
    return WriterTarget(staging_dir=root / "staging", task_output_dir=root / "output", rel_dir=rel_dir, file_stem=stem)


def _avro(**settings: Any) -> AvroWriter:
    return AvroWriter(AvroWriter.Settings.model_validate(settings))


def _write(writer: Any, schema: Any, records: list[dict[str, Any]], target: WriterTarget) -> list[OutputFile]:
    writer.open(schema, target)
    for record in records:
        writer.write(record)
    return commit_writer(writer, target)


def _crc32c(path: Path) -> str:
    return f"{crc32c.crc32c(path.read_bytes()):08x}"


def _read_avro(path: str | Path) -> list[dict[str, Any]]:
    with open(path, "rb") as f:
        return list(fastavro.reader(f))


def _ids(records: list[dict[str, Any]]) -> list[int]:
    return sorted(r["id"] for r in records)


def _check_output_file(out: OutputFile, target: WriterTarget) -> None:
    path = Path(out.path)
    assert path.is_file()
    assert out.path == Location(target.task_output_dir) / out.rel_path
    assert out.size == path.stat().st_size
    assert out.checksum == _crc32c(path)
    assert out.kind == "data"


# --- avro ---------------------------------------------------------------------------------


def test_avro_day_partitions(tmp_path: Path) -> None:
    target = _target(tmp_path)
    files = _write(_avro(partition={"column": "ts", "granularity": "DAY"}), SCHEMA, RECORDS, target)
    by_rel = {f.rel_path: f for f in files}
    assert set(by_rel) == {"clicks/2026/01/01/wu-1.avro", "clicks/2026/01/02/wu-1.avro", "clicks/2026/02/28/wu-1.avro"}
    assert {rel: f.records for rel, f in by_rel.items()} == {
        "clicks/2026/01/01/wu-1.avro": 3, "clicks/2026/01/02/wu-1.avro": 1, "clicks/2026/02/28/wu-1.avro": 1}
    for f in files:
        _check_output_file(f, target)
    assert _ids(_read_avro(by_rel["clicks/2026/01/01/wu-1.avro"].path)) == [1, 2, 4]
    assert _read_avro(by_rel["clicks/2026/01/02/wu-1.avro"].path) == [RECORDS[2] | {
        "ts": dt.datetime(2026, 1, 2, tzinfo=dt.UTC)}]
    assert not list((tmp_path / "staging").rglob("*.avro"))  # moved out of staging


def test_avro_hour_partitions(tmp_path: Path) -> None:
    target = _target(tmp_path)
    files = _write(_avro(partition={"column": "ts", "granularity": "HOUR", "pattern": "yyyy/MM/dd/HH"}),
                   SCHEMA, RECORDS, target)
    counts = {f.rel_path: f.records for f in files}
    assert counts == {
        "clicks/2026/01/01/10/wu-1.avro": 2,
        "clicks/2026/01/01/23/wu-1.avro": 1,
        "clicks/2026/01/02/00/wu-1.avro": 1,
        "clicks/2026/02/28/07/wu-1.avro": 1,
    }
    for f in files:
        _check_output_file(f, target)
        assert len(_read_avro(f.path)) == f.records
    assert _ids(_read_avro(tmp_path / "output" / "clicks/2026/01/01/10/wu-1.avro")) == [1, 4]


def test_avro_partition_seconds_and_iso_strings(tmp_path: Path) -> None:
    schema = {"type": "record", "name": "S", "fields": [{"name": "t", "type": ["long", "string"]}]}
    target = _target(tmp_path)
    files = _write(_avro(partition={"column": "t", "unit": "seconds", "pattern": "yyyy-MM-dd"}), schema,
                   [{"t": _ms(2026, 3, 4) // 1000}, {"t": "2026-03-05T12:00:00Z"}], target)
    assert sorted(f.rel_path for f in files) == ["clicks/2026-03-04/wu-1.avro", "clicks/2026-03-05/wu-1.avro"]


def test_avro_unpartitioned(tmp_path: Path) -> None:
    target = _target(tmp_path, rel_dir="orders", stem="orders-1")
    files = _write(_avro(), SCHEMA, RECORDS, target)
    assert [(f.rel_path, f.records) for f in files] == [("orders/orders-1.avro", 5)]
    _check_output_file(files[0], target)
    assert _read_avro(files[0].path)[0]["user"] == "a"


@pytest.mark.parametrize("codec", ["null", "deflate", "snappy", "zstandard"])
def test_avro_codecs_are_readable(tmp_path: Path, codec: str) -> None:
    target = _target(tmp_path)
    files = _write(_avro(codec=codec), SCHEMA, RECORDS, target)
    with open(files[0].path, "rb") as f:
        reader = fastavro.reader(f)
        assert reader.codec == codec
        assert _ids(list(reader)) == [1, 2, 3, 4, 5]
    _check_output_file(files[0], target)


def test_avro_same_records_give_byte_identical_files(tmp_path: Path) -> None:
    first = _write(_avro(), SCHEMA, RECORDS, _target(tmp_path / "one"))
    second = _write(_avro(), SCHEMA, RECORDS, _target(tmp_path / "two"))
    assert first[0].checksum == second[0].checksum
    assert Path(first[0].path).read_bytes() == Path(second[0].path).read_bytes()


def test_avro_bad_partition_value_is_record_error(tmp_path: Path) -> None:
    writer = _avro(partition={"column": "ts"})
    writer.open(SCHEMA, _target(tmp_path))
    with pytest.raises(RecordError, match="'ts'"):
        writer.write({"id": 1, "ts": None, "user": "x"})
    with pytest.raises(RecordError, match="not a timestamp"):
        writer.write({"id": 1, "ts": "soon", "user": "x"})


def test_avro_needs_an_avro_record_schema(tmp_path: Path) -> None:
    """A configuration fault, not retried: every attempt would fail the same way."""
    with pytest.raises(ConfigError, match="json_to_avro"):
        _avro().open({"type": "json"}, _target(tmp_path))


def test_avro_refuses_unknown_codec() -> None:
    with pytest.raises(ValidationError, match="codec"):
        AvroWriter.Settings.model_validate({"codec": "lzo"})


# --- jsonl --------------------------------------------------------------------------------


def _jsonl(**settings: Any) -> JsonLinesWriter:
    return JsonLinesWriter(JsonLinesWriter.Settings.model_validate(settings))


def test_jsonl_plain(tmp_path: Path) -> None:
    target = _target(tmp_path)
    files = _write(_jsonl(), {"type": "json"}, RECORDS, target)
    assert [(f.rel_path, f.records) for f in files] == [("clicks/wu-1.jsonl", 5)]
    _check_output_file(files[0], target)
    lines = Path(files[0].path).read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == RECORDS


def test_jsonl_gzip(tmp_path: Path) -> None:
    target = _target(tmp_path)
    files = _write(_jsonl(compression="gzip"), {"type": "json"}, RECORDS, target)
    assert [(f.rel_path, f.records) for f in files] == [("clicks/wu-1.jsonl.gz", 5)]
    _check_output_file(files[0], target)
    with gzip.open(files[0].path, "rt", encoding="utf-8") as f:
        assert [json.loads(line) for line in f] == RECORDS


def test_jsonl_day_partitions(tmp_path: Path) -> None:
    target = _target(tmp_path)
    files = _write(_jsonl(partition={"column": "ts"}), {"type": "json"}, RECORDS, target)
    assert {f.rel_path: f.records for f in files} == {
        "clicks/2026/01/01/wu-1.jsonl": 3, "clicks/2026/01/02/wu-1.jsonl": 1, "clicks/2026/02/28/wu-1.jsonl": 1}
    for f in files:
        _check_output_file(f, target)
        assert len(Path(f.path).read_text(encoding="utf-8").splitlines()) == f.records


def test_jsonl_non_json_values_are_written_as_text(tmp_path: Path) -> None:
    files = _write(_jsonl(), {"type": "json"}, [{"when": dt.date(2026, 1, 2), "n": 1}], _target(tmp_path))
    assert json.loads(Path(files[0].path).read_text(encoding="utf-8")) == {"when": "2026-01-02", "n": 1}
