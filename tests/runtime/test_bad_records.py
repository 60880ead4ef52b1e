"""One bad-record path for the whole task: whatever one record raises, anywhere, goes to the error file
with its location, stage and reason (or fails the task under FAIL); the task's other records are published."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.jobs import EVENT_SCHEMA, write_job

from gobblin_py.api import WorkUnit
from gobblin_py.builtin.sources.files.split import FileSplit
from gobblin_py.config import load_job
from gobblin_py.runtime.task.attempt import run_task
from gobblin_py.runtime.task.results import TaskStatus, WorkUnitResult
from gobblin_py.runtime.task.spec import TaskSpec

DAY0 = 1767225600000  # 2026-01-01T00:00:00Z
FAULTS = "gobblin_py.testing.faults"


def read_avro(path: str) -> list[dict[str, Any]]:
    """Records of an Avro file read by an engine gobblin-py does not use to write (Apache avro), else fastavro."""
    try:
        from avro.datafile import DataFileReader
        from avro.io import DatumReader
    except ImportError:  # the Apache package is optional; fastavro's reader still checks every block
        import fastavro
        with open(path, "rb") as f:
            return list(fastavro.reader(f))
    with open(path, "rb") as f, DataFileReader(f, DatumReader()) as reader:
        return list(reader)


def _ev(i: int, day: int = 0, **kw: Any) -> str:
    return json.dumps({"id": i, "ts": DAY0 + day * 86_400_000 + i, "user": f"u{i}", "kind": "click", **kw})


def _data(tmp: Path, lines: list[str]) -> Path:
    path = tmp / "data" / "ds" / "f.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def _job(tmp: Path, **sections: Any) -> dict[str, Any]:
    job = {
        "job": {"name": "t", "work_dir": str(tmp / "work"), "max_task_retries": 3},
        "source": {"class": "files", "path": str(tmp / "data")},
        "converters": [{"class": "json_to_avro", "schema": str(EVENT_SCHEMA)}],
        "quality": {"task": [{"class": "row_count", "type": "FAIL"}]},  # the writer's count matches what reached it
        "writer": {"class": "avro", "partition": {"column": "ts", "granularity": "DAY"}},
        "publisher": {"final_dir": str(tmp / "out")},
    }
    job.update(sections)
    return job


def _run(tmp: Path, job: dict[str, Any], file: Path) -> WorkUnitResult:
    spec = load_job(write_job(tmp, job))
    wu = WorkUnit(id="wu1", dataset="ds", watermark_key=file.name, low_watermark=None,
                  expected_high_watermark=file.stat().st_size,
                  split=FileSplit(file=str(file), end=file.stat().st_size).packed())
    [result] = run_task(TaskSpec(job=spec, run_id="r1", unit=wu))
    return result


def _errors(result: WorkUnitResult) -> list[dict[str, Any]]:
    return [orjson.loads(line) for f in result.files if f.kind == "errors" for line in Path(f.path).read_bytes().splitlines()]


def _written(result: WorkUnitResult, suffix: str = ".avro") -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for f in result.files:
        if f.kind == "data" and f.rel_path.endswith(suffix):
            rows = read_avro(f.path) if suffix == ".avro" else [orjson.loads(x) for x in Path(f.path).read_bytes().splitlines()]
            assert len(rows) == f.records, f"{f.rel_path}: {len(rows)} records readable, {f.records} claimed"
            out.extend(rows)
    return out


def _fault(field: str, equals: Any, **how: Any) -> dict[str, Any]:
    return {"class": f"{FAULTS}:FaultOnRecordConverter", "field": field, "equals": equals, **how}


JSON_TO_AVRO = {"class": "json_to_avro", "schema": str(EVENT_SCHEMA)}

# (bad input line, job sections, stage in the error file, words the reason must hold)
KINDS: dict[str, tuple[str, dict[str, Any], str, tuple[str, ...]]] = {
    "timestamp 9e18 (partition overflow)": (
        json.dumps({"id": 3, "ts": 9_000_000_000_000_000_000, "user": "u3", "kind": "k"}), {},
        "writer (avro)", ("'ts'", "9000000000000000000")),
    "timestamp -7e13 (partition underflow)": (
        json.dumps({"id": 3, "ts": -70_000_000_000_000, "user": "u3", "kind": "k"}), {},
        "writer (avro)", ("'ts'", "-70000000000000")),
    "id 1e19 (not an Avro long)": (
        '{"id": 10000000000000000000, "ts": %d, "user": "u3", "kind": "k"}' % DAY0, {},
        "converters[0] (json_to_avro)", ("'id'", "10000000000000000000")),
    "a plugin converter's ValueError": (
        _ev(3, user="bad"), {"converters": [_fault("user", "bad", raise_="ValueError"), JSON_TO_AVRO]},
        f"converters[0] ({FAULTS}:FaultOnRecordConverter)", ("ValueError", "injected")),
    "a plugin converter's KeyError": (
        _ev(3, user="bad"), {"converters": [JSON_TO_AVRO, _fault("user", "bad", raise_="KeyError")]},
        f"converters[1] ({FAULTS}:FaultOnRecordConverter)", ("KeyError", "injected")),
    "a plugin converter's TypeError": (
        _ev(3, user="bad"), {"converters": [JSON_TO_AVRO, _fault("user", "bad", raise_="TypeError")]},
        f"converters[1] ({FAULTS}:FaultOnRecordConverter)", ("TypeError", "injected")),
    "a value the Avro writer cannot encode, mid-record": (
        _ev(3, user="bad"), {"converters": [JSON_TO_AVRO, _fault("user", "bad", set_to="\udc80")]},
        "writer (avro)", ("'user'", "encode")),
    "a row policy raising on one record": (
        _ev(3, user="bad"), {"quality": {"row": [{"class": f"{FAULTS}:FaultOnRecordPolicy", "type": "FAIL",
                                                  "field": "user", "equals": "bad", "raise": "KeyError"}],
                                         "task": [{"class": "row_count", "type": "FAIL"}]}},
        f"quality.row[0] ({FAULTS}:FaultOnRecordPolicy)", ("KeyError", "injected")),
    "a fork operator raising on one record": (
        _ev(3, user="bad"), {"fork": {"class": f"{FAULTS}:FaultOnRecordFork", "field": "user", "equals": "bad",
                                      "raise": "ValueError"}},
        f"fork ({FAULTS}:FaultOnRecordFork)", ("ValueError", "injected")),
    "a branch converter's RecordError (after the fork)": (
        _ev(3, user="bad"), {"fork": {"class": "identity", "branches": [
            {"name": "main", "converters": [_fault("user", "bad", raise_="RecordError")]}]}},
        f"fork.main.converters[0] ({FAULTS}:FaultOnRecordConverter)", ("injected",)),
    "a branch converter's ValueError (after the fork)": (
        _ev(3, user="bad"), {"fork": {"class": "identity", "branches": [
            {"name": "main", "converters": [_fault("user", "bad", raise_="ValueError")]}]}},
        f"fork.main.converters[0] ({FAULTS}:FaultOnRecordConverter)", ("ValueError", "injected")),
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_bad_record_of_any_kind_goes_to_the_error_file_and_the_others_are_published(tmp_path: Path, kind: str) -> None:
    line, sections, stage, words = KINDS[kind]
    f = _data(tmp_path, [_ev(1), _ev(2, day=1), line, _ev(4, day=1)])
    r = _run(tmp_path, _job(tmp_path, **sections), f)
    assert r.status is TaskStatus.SUCCEEDED, r.error
    assert r.attempts == 1
    assert sorted(rec["id"] for rec in _written(r)) == [1, 2, 4]
    [entry] = _errors(r)
    assert entry["location"] == f"{f}:3"
    assert entry["stage"] == stage
    assert all(w in entry["reason"] for w in words), entry["reason"]
    assert r.records_extracted == 4 and r.records_written == 3 and r.records_rejected == 1


@pytest.mark.parametrize("kind", ["timestamp 9e18 (partition overflow)", "id 1e19 (not an Avro long)",
                                  "a plugin converter's ValueError", "a branch converter's ValueError (after the fork)"])
def test_under_fail_any_bad_record_fails_the_task_at_once_naming_it(tmp_path: Path, kind: str) -> None:
    line, sections, stage, words = KINDS[kind]
    f = _data(tmp_path, [_ev(1), line])
    quality = {**sections.get("quality", {}), "bad_records": "FAIL"}
    r = _run(tmp_path, _job(tmp_path, **{**sections, "quality": quality}), f)
    assert r.status is TaskStatus.FAILED and r.attempts == 1
    assert f"{f}:2" in r.error and stage in r.error and all(w in r.error for w in words), r.error
    assert r.files == []


@pytest.mark.parametrize(("raised", "attempts"), [("ConfigError", 1), ("OSError", 4), ("MemoryError", 4)])
def test_what_is_not_a_bad_record_fails_the_task_and_only_transient_errors_are_retried(
        tmp_path: Path, raised: str, attempts: int) -> None:
    f = _data(tmp_path, [_ev(1), _ev(2, user="bad")])
    r = _run(tmp_path, _job(tmp_path, converters=[_fault("user", "bad", raise_=raised), JSON_TO_AVRO]), f)
    assert r.status is TaskStatus.FAILED
    assert r.attempts == attempts
    assert raised in r.error and "injected" in r.error
    assert r.files == []


def test_one_dataset_with_every_kind_of_bad_record(tmp_path: Path) -> None:
    """The end-to-end proof: good records of a file all published (two branches), each bad one in the error file."""
    lines = [
        _ev(1),                                                                   # 1 good
        "{torn",                                                                  # 2 unreadable
        json.dumps({"id": 3, "ts": 9_000_000_000_000_000_000, "user": "u3", "kind": "k"}),   # 3 ts overflow (main only)
        json.dumps({"id": 4, "ts": -70_000_000_000_000, "user": "u4", "kind": "k"}),         # 4 ts underflow (main only)
        '{"id": 10000000000000000000, "ts": %d, "user": "u5", "kind": "k"}' % DAY0,          # 5 not an Avro long
        '{"id": 100000000000000000000, "ts": %d, "user": "u6", "kind": "k"}' % DAY0,         # 6 beyond 64 bits
        _ev(7, day=1),                                                            # 7 good
        _ev(8, user="conv"),                                                      # 8 plugin converter ValueError
        _ev(9, user="enc"),                                                       # 9 unencodable in both writers
        _ev(10, amount="x"),                                                      # 10 json_to_avro type mismatch
        _ev(11, user="row"),                                                      # 11 row policy raises KeyError
        _ev(12, user="branch"),                                                   # 12 branch converter TypeError (copy only)
        _ev(13, user=""),                                                         # 13 a required field empty
        _ev(14, day=2),                                                           # 14 good
    ]
    f = _data(tmp_path, lines)
    job = _job(
        tmp_path,
        converters=[_fault("user", "conv", raise_="ValueError"), JSON_TO_AVRO, _fault("user", "enc", set_to="\udc80")],
        quality={"row": [{"class": "required_fields", "type": "ERR_FILE", "fields": ["user"]},
                         {"class": f"{FAULTS}:FaultOnRecordPolicy", "type": "FAIL", "field": "user", "equals": "row",
                          "raise": "KeyError"}],
                 "task": [{"class": "row_count", "type": "FAIL"}]},
        fork={"class": "identity", "branches": [
            {"name": "main"},
            {"name": "copy", "writer": {"class": "jsonl"}, "converters": [_fault("user", "branch", raise_="TypeError")]},
        ]},
    )
    r = _run(tmp_path, job, f)

    assert r.status is TaskStatus.SUCCEEDED, r.error
    assert r.attempts == 1
    assert sorted(rec["id"] for rec in _written(r, ".avro")) == [1, 7, 12, 14]
    assert sorted(rec["id"] for rec in _written(r, ".jsonl")) == [1, 3, 4, 7, 14]
    entries = sorted(_errors(r), key=lambda e: (int(e["location"].rsplit(":", 1)[1]), e["stage"]))
    got = [(int(e["location"].rsplit(":", 1)[1]), e["stage"]) for e in entries]
    assert got == [
        (2, "extractor"),
        (3, "fork.main.writer (avro)"),
        (4, "fork.main.writer (avro)"),
        (5, "converters[1] (json_to_avro)"),
        (6, "converters[1] (json_to_avro)"),
        (8, f"converters[0] ({FAULTS}:FaultOnRecordConverter)"),
        (9, "fork.copy.writer (jsonl)"),
        (9, "fork.main.writer (avro)"),
        (10, "converters[1] (json_to_avro)"),
        (11, f"quality.row[1] ({FAULTS}:FaultOnRecordPolicy)"),
        (12, f"fork.copy.converters[0] ({FAULTS}:FaultOnRecordConverter)"),
        (13, "quality.row[0] (required_fields)"),
    ]
    assert all(e["location"].startswith(f"{f}:") and e["reason"] for e in entries)
    by_line = {int(e["location"].rsplit(":", 1)[1]): e for e in entries}
    assert "'ts'" in by_line[3]["reason"] and "9000000000000000000" in by_line[3]["reason"]
    assert "'id'" in by_line[5]["reason"] and "10000000000000000000" in by_line[5]["reason"]
    assert by_line[5]["record"]["id"] == 10000000000000000000  # the record as the failing stage received it
    assert "ValueError" in by_line[8]["reason"] and "KeyError" in by_line[11]["reason"]
    assert r.records_extracted == 13 and r.records_written == 9


def test_an_unknown_field_is_counted_and_dropped_or_a_bad_record_under_fail(tmp_path: Path) -> None:
    f = _data(tmp_path, [_ev(1, debug=True), _ev(2), _ev(3, debug=False, trace="x")])
    r = _run(tmp_path, _job(tmp_path), f)
    assert r.status is TaskStatus.SUCCEEDED and sorted(x["id"] for x in _written(r)) == [1, 2, 3]
    counter = r.counters["unknown_fields_dropped"]
    assert (counter.count, counter.examples) == (3, ["debug", "trace"])
    assert r.to_json()["counters"] == {"unknown_fields_dropped": {"count": 3, "examples": ["debug", "trace"]}}

    strict = _job(tmp_path, converters=[{**JSON_TO_AVRO, "on_unknown_fields": "fail"}])
    r = _run(tmp_path, strict, f)
    assert r.status is TaskStatus.SUCCEEDED and [x["id"] for x in _written(r)] == [2]
    assert [(e["location"], e["stage"]) for e in _errors(r)] == [(f"{f}:1", "converters[0] (json_to_avro)"),
                                                                 (f"{f}:3", "converters[0] (json_to_avro)")]
    assert "not in the schema: debug, trace" in _errors(r)[1]["reason"]
