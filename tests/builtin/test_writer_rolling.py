"""`writer.roll`: the avro and jsonl writers start a new file of a partition by record count or by size, with
deterministic names (a roll index after the task's stem), every record in exactly one file."""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

import fastavro
import pytest
from pydantic import ValidationError
from support.jobs import example_job, write_job

from gobblin_py.api import OutputFile, WriterTarget
from gobblin_py.builtin.writers.avro import AvroWriter
from gobblin_py.builtin.writers.jsonl import JsonLinesWriter
from gobblin_py.errors import RecordError
from gobblin_py.runtime.task.committables import commit_writer
from gobblin_py.testing.crash import cli
from gobblin_py.testing.outputs import read_avro_dir

SCHEMA: dict[str, Any] = {
    "type": "record", "name": "Event", "namespace": "test",
    "fields": [{"name": "id", "type": "long"}, {"name": "ts", "type": "long"}, {"name": "payload", "type": "string"}],
}
DAY1 = int(dt.datetime(2026, 1, 1, tzinfo=dt.UTC).timestamp() * 1000)
DAY2 = DAY1 + 86_400_000


def _records(n: int, payload: int = 20) -> list[dict[str, Any]]:
    """Records whose payload compresses about as real text does (hex digests, not repeats)."""
    return [{"id": i, "ts": DAY1 if i % 3 else DAY2, "payload": hashlib.sha256(str(i).encode()).hexdigest()[:payload]}
            for i in range(n)]


def _write(writer: Any, records: list[dict[str, Any]], root: Path, schema: Any = SCHEMA) -> list[OutputFile]:
    target = WriterTarget(staging_dir=root / "staging", task_output_dir=root / "out", rel_dir="clicks", file_stem="wu-1")
    writer.open(schema, target)
    for r in records:
        try:
            writer.write(r)
        except RecordError:
            pass
    return commit_writer(writer, target)


def _avro(**settings: Any) -> AvroWriter:
    return AvroWriter(AvroWriter.Settings.model_validate(settings))


def _read_avro(path: str) -> list[dict[str, Any]]:
    with open(path, "rb") as f:
        return list(fastavro.reader(f))


PARTITION = {"column": "ts", "granularity": "DAY"}


def test_avro_rolls_by_records_per_partition_with_a_roll_index_in_the_name(tmp_path: Path) -> None:
    records = _records(10)
    files = _write(_avro(partition=PARTITION, roll={"max_records": 3}), records, tmp_path)
    assert {f.rel_path: f.records for f in files} == {
        "clicks/2026/01/01/wu-1.avro": 3, "clicks/2026/01/01/wu-1.r1.avro": 3,         "clicks/2026/01/02/wu-1.avro": 3, "clicks/2026/01/02/wu-1.r1.avro": 1}
    seen = [r for f in files for r in _read_avro(f.path)]
    assert sorted(r["id"] for r in seen) == list(range(10))  # every record once
    for f in files:
        assert len(_read_avro(f.path)) == f.records <= 3


def test_avro_rolls_by_compressed_bytes_near_the_limit(tmp_path: Path) -> None:
    records = _records(20_000, payload=64)
    files = _write(_avro(codec="deflate", roll={"max_bytes": "64KB"}), records, tmp_path)
    sizes = [Path(f.path).stat().st_size for f in files]
    assert len(files) > 3
    assert all(s < 64_000 + 8_192 for s in sizes)  # past the limit by at most one small block
    assert all(s > 64_000 * 0.8 for s in sizes[:-1])  # not cut short: compressed, yet filled to about the limit
    assert sorted(r["id"] for f in files for r in _read_avro(f.path)) == list(range(20_000))
    assert [f.rel_path for f in files][:3] == ["clicks/wu-1.avro", "clicks/wu-1.r1.avro", "clicks/wu-1.r2.avro"]


def test_rolling_is_deterministic_so_a_retry_lands_on_the_same_names_and_bytes(tmp_path: Path) -> None:
    records = _records(5_000)
    one = _write(_avro(partition=PARTITION, roll={"max_records": 700, "max_bytes": "20KB"}), records, tmp_path / "a")
    two = _write(_avro(partition=PARTITION, roll={"max_records": 700, "max_bytes": "20KB"}), records, tmp_path / "b")
    assert [(f.rel_path, f.records, f.size, f.checksum) for f in one] == [(f.rel_path, f.records, f.size, f.checksum) for f in two]


def test_a_refused_record_never_leaves_an_empty_rolled_file(tmp_path: Path) -> None:
    records = _records(4) + [{"id": "bad", "ts": DAY1, "payload": "x"}]  # the 5th would open a new file, and is refused
    files = _write(_avro(roll={"max_records": 2}), records, tmp_path)
    assert [(f.rel_path, f.records) for f in files] == [("clicks/wu-1.avro", 2), ("clicks/wu-1.r1.avro", 2)]
    assert sorted(p.name for p in (tmp_path / "out" / "clicks").iterdir()) == ["wu-1.avro", "wu-1.r1.avro"]
    assert not list((tmp_path / "staging").rglob("*.avro"))


def test_jsonl_rolls_by_records_and_by_bytes(tmp_path: Path) -> None:
    writer = JsonLinesWriter(JsonLinesWriter.Settings.model_validate({"partition": PARTITION, "roll": {"max_records": 4}}))
    files = _write(writer, _records(10), tmp_path / "records", schema=None)
    assert {f.rel_path: f.records for f in files} == {
        "clicks/2026/01/01/wu-1.jsonl": 4, "clicks/2026/01/01/wu-1.r1.jsonl": 2, "clicks/2026/01/02/wu-1.jsonl": 4}
    lines = [json.loads(line) for f in files for line in Path(f.path).read_text().splitlines()]
    assert sorted(r["id"] for r in lines) == list(range(10))

    writer = JsonLinesWriter(JsonLinesWriter.Settings.model_validate({"roll": {"max_bytes": 10_000}}))
    files = _write(writer, _records(2_000, payload=64), tmp_path / "bytes", schema=None)
    sizes = [Path(f.path).stat().st_size for f in files]
    assert len(files) > 5 and all(10_000 <= s < 10_200 for s in sizes[:-1])  # ends on the first line past the limit


def test_gzip_jsonl_rolls_on_compressed_bytes(tmp_path: Path) -> None:
    writer = JsonLinesWriter(JsonLinesWriter.Settings.model_validate({"compression": "gzip", "roll": {"max_bytes": "100KB"}}))
    records = [{"id": i, "noise": f"{(i * 2654435761) % 4294967296:x}" * 8} for i in range(40_000)]
    files = _write(writer, records, tmp_path, schema=None)
    assert len(files) > 2
    assert all(Path(f.path).stat().st_size < 100_000 + 70_000 for f in files)
    got = [json.loads(line) for f in files for line in gzip.decompress(Path(f.path).read_bytes()).splitlines()]
    assert [r["id"] for r in got] == list(range(40_000))


@pytest.mark.parametrize("roll", [{}, {"max_records": 0}, {"max_bytes": "ten"}, {"max_bytes": "0MB"}, {"max_files": 2}])
def test_bad_roll_settings_are_refused(roll: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        AvroWriter.Settings.model_validate({"roll": roll})


def test_roll_sizes_take_units() -> None:
    settings = AvroWriter.Settings.model_validate({"roll": {"max_bytes": "256MB"}})
    assert settings.roll is not None and settings.roll.max_bytes == 256_000_000
    assert JsonLinesWriter.Settings.model_validate({"roll": {"max_bytes": "1MiB"}}).roll.max_bytes == 1 << 20


def test_a_job_file_sets_rolling_and_a_run_publishes_every_rolled_file(tmp_path: Path) -> None:
    job = example_job(tmp_path)
    job["writer"]["roll"] = {"max_records": 150}
    write_job(tmp_path, job)
    done = cli(["run", "job.yaml", "--in-process", "-q"], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    names = sorted(p.name for p in (tmp_path / "output").rglob("*.avro"))
    assert any(".r1.avro" in n for n in names) and any(".r2.avro" in n for n in names)
    rows = read_avro_dir(tmp_path / "output")
    assert len(rows) == len({(r["_file"].split("/")[0], r["id"]) for r in rows}) == 2998  # every record once
    by_file: dict[str, int] = {}
    for r in rows:
        by_file[r["_file"]] = by_file.get(r["_file"], 0) + 1
    assert max(by_file.values()) == 150
