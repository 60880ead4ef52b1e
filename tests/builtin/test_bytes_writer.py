"""The `bytes` writer alone (Gobblin's SimpleDataWriter): each record's bytes as they are, optionally delimited and
length-prefixed; a record without bytes is a bad record naming the field. Files are read back byte for byte."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from support.writers import write_all

from gobblin_py.api import WriterTarget
from gobblin_py.builtin.writers.bytes import BytesWriter
from gobblin_py.plugins import Kind, resolve
from gobblin_py.testing.conformance import check_writer

DAY1 = int(dt.datetime(2026, 1, 1, tzinfo=dt.UTC).timestamp() * 1000)
DAY2 = DAY1 + 86_400_000
VALUES: list[bytes | str] = [b"a,b\n", b"\x00\xff\xfe raw", b"", "caf\u00e9", b"x" * 300]
ENCODED = [v.encode("utf-8") if isinstance(v, str) else v for v in VALUES]


def _writer(**settings: Any) -> BytesWriter:
    return BytesWriter(BytesWriter.Settings.model_validate(settings))


def _target(root: Path) -> WriterTarget:
    return WriterTarget(staging_dir=root / "staging", task_output_dir=root / "out", rel_dir="events", file_stem="wu-1")


def _records(field: str = "value") -> list[dict[str, Any]]:
    return [{field: v, "offset": i} for i, v in enumerate(VALUES)]


def test_the_bytes_are_written_as_they_are_into_a_txt_file(tmp_path: Path) -> None:
    assert resolve(Kind.WRITER, "bytes") is BytesWriter
    files, refused = write_all(_writer(), {"type": "kafka"}, _records(), _target(tmp_path))
    assert refused == []
    assert [(f.rel_path, f.records) for f in files] == [("events/wu-1.txt", 5)]
    assert Path(files[0].path).read_bytes() == b"".join(ENCODED)


def test_delimiter_and_prepend_size_frame_each_record_as_gobblin_does(tmp_path: Path) -> None:
    writer = _writer(field="payload", delimiter="\n", prepend_size=True, extension="log")
    files, _ = write_all(writer, None, _records("payload"), _target(tmp_path))
    assert [f.rel_path for f in files] == ["events/wu-1.log"]
    data = Path(files[0].path).read_bytes()
    framed, at = [], 0
    while at < len(data):  # 8-byte big-endian size of record + delimiter, then that many bytes
        size = int.from_bytes(data[at:at + 8], "big")
        framed.append(data[at + 8:at + 8 + size])
        at += 8 + size
    assert framed == [v + b"\n" for v in ENCODED]
    delimited, _ = write_all(_writer(delimiter="|", extension=""), None, _records(), _target(tmp_path / "d"))
    assert [f.rel_path for f in delimited] == ["events/wu-1"]  # no extension
    assert Path(delimited[0].path).read_bytes() == b"|".join(ENCODED) + b"|"


def test_a_record_without_bytes_is_a_bad_record_naming_the_field(tmp_path: Path) -> None:
    records = [{"value": b"ok1"}, {"key": b"k"}, {"value": None}, {"value": 42}, {"value": {"nested": b"x"}},
               {"value": "\ud800"}, {"value": bytearray(b"ok2")}]
    files, refused = write_all(_writer(delimiter="\n"), None, records, _target(tmp_path))
    assert [str(e) for e in refused] == [
        "field 'value': missing: the bytes writer writes this field's bytes",
        "field 'value': expected bytes or text, got NoneType None",
        "field 'value': expected bytes or text, got int 42",
        "field 'value': expected bytes or text, got dict {'nested': b'x'}",
        "field 'value': text that is not valid UTF-8 (surrogates not allowed)",
    ]
    assert {e.field for e in refused} == {"value"}
    assert [f.records for f in files] == [2]
    assert Path(files[0].path).read_bytes() == b"ok1\nok2\n"  # a refused record leaves no byte behind
    none, refused = write_all(_writer(), None, [{"v": 1}], _target(tmp_path / "none"))
    assert none == [] and len(refused) == 1 and not list((tmp_path / "none").rglob("*.txt"))


@pytest.mark.parametrize("settings, error", [
    ({"delimiter": "\r\n"}, "one ASCII character"),
    ({"delimiter": "\u00e9"}, "one ASCII character"),
    ({"extension": "../txt"}, "String should match pattern"),
    ({"field": ""}, "at least 1 character"),
    ({"compression": "gzip"}, "Extra inputs are not permitted"),
])
def test_bad_settings_are_refused(settings: dict[str, Any], error: str) -> None:
    with pytest.raises(ValidationError, match=error):
        _writer(**settings)


def test_an_empty_delimiter_is_none_as_in_gobblin() -> None:
    assert _writer(delimiter="").settings.delimiter is None


def test_partitioned_and_rolled_files_pass_the_conformance_suite(tmp_path: Path) -> None:
    records = [{"value": f"r{i}".encode(), "ts": DAY1 if i % 3 else DAY2} for i in range(7)]
    settings = {"delimiter": "\n", "partition": {"column": "ts"}, "roll": {"max_records": 2}}
    files = check_writer(BytesWriter, settings, None, records, tmp_path)
    got = {f.rel_path: Path(f.path).read_bytes() for f in files}
    assert got == {"dataset/2026/01/01/conformance-wu-0001.txt": b"r1\nr2\n",
                   "dataset/2026/01/01/conformance-wu-0001.r1.txt": b"r4\nr5\n",
                   "dataset/2026/01/02/conformance-wu-0001.txt": b"r0\nr3\n",
                   "dataset/2026/01/02/conformance-wu-0001.r1.txt": b"r6\n"}
    by_size, _ = write_all(_writer(roll={"max_bytes": 10}), None, _records()[:2] + _records()[4:], _target(tmp_path / "s"))
    assert [(f.rel_path, Path(f.path).read_bytes()) for f in by_size] == [
        ("events/wu-1.txt", b"a,b\n\x00\xff\xfe raw"), ("events/wu-1.r1.txt", b"x" * 300)]
