"""The task flow of one WorkUnit, in process: conversion, checks, error file, fork branches, retries."""

from __future__ import annotations

import json
from pathlib import Path

import fastavro
import orjson
import pytest
from support.jobs import EVENT_SCHEMA, write_job

from gobblin_py.api import WorkUnit
from gobblin_py.builtin.sources.files.split import FileSplit
from gobblin_py.config import load_job
from gobblin_py.runtime.task.attempt import run_task
from gobblin_py.runtime.task.results import TaskStatus
from gobblin_py.runtime.task.spec import TaskSpec


def _data(tmp: Path, lines: list[str], dataset: str = "ds", name: str = "f.jsonl") -> Path:
    d = tmp / "data" / dataset
    d.mkdir(parents=True, exist_ok=True)
    p = d / name
    p.write_text("\n".join(lines) + "\n")
    return p


def _job(tmp: Path, **sections) -> dict:
    job = {
        "job": {"name": "t", "work_dir": str(tmp / "work"), "max_task_retries": 2},
        "source": {"class": "files", "path": str(tmp / "data")},
        "converters": [{"class": "json_to_avro", "schema": str(EVENT_SCHEMA)}],
        "writer": {"class": "avro", "partition": {"column": "ts", "granularity": "DAY"}},
        "publisher": {"final_dir": str(tmp / "out")},
    }
    job.update(sections)
    return job


def _run(tmp: Path, job: dict, file: Path) -> object:
    spec = load_job(write_job(tmp, job))
    wu = WorkUnit(id="wu1", dataset=file.parent.name, watermark_key=file.name, low_watermark=None,
                  expected_high_watermark=file.stat().st_size,
                  split=FileSplit(file=str(file), end=file.stat().st_size).packed())
    [result] = run_task(TaskSpec(job=spec, run_id="r1", unit=wu))
    return result


def _ev(i: int, day: int = 0, **kw) -> str:
    rec = {"id": i, "ts": 1767225600000 + day * 86400000 + i, "user": f"u{i}", "kind": "click", **kw}
    return json.dumps(rec)


def _read(paths: list[str]) -> list[dict]:
    out = []
    for p in paths:
        with open(p, "rb") as f:
            out.extend(fastavro.reader(f))
    return out


def test_records_are_converted_partitioned_and_bad_ones_go_to_the_error_file(tmp_path: Path) -> None:
    f = _data(tmp_path, [_ev(1, 0), _ev(2, 1), "{torn", _ev(3, 1, amount="x"), json.dumps({"ts": 5, "user": "a", "kind": "k"})])
    r = _run(tmp_path, _job(tmp_path), f)
    assert r.status is TaskStatus.SUCCEEDED
    data = sorted((x for x in r.files if x.kind == "data"), key=lambda x: x.rel_path)
    assert [x.rel_path for x in data] == ["ds/2026/01/01/wu1.avro", "ds/2026/01/02/wu1.avro"]
    assert sorted(rec["id"] for rec in _read([x.path for x in data])) == [1, 2]
    [errors] = [x for x in r.files if x.kind == "errors"]
    assert errors.rel_path == "ds/_errors/wu1.errors.jsonl" and errors.records == 3
    entries = [orjson.loads(line) for line in Path(errors.path).read_bytes().splitlines()]
    assert [e["location"] for e in entries] == [f"{f}:3", f"{f}:4", f"{f}:5"]
    assert "amount" in entries[1]["reason"] and "'x'" in entries[1]["reason"]
    assert "'id' is missing" in entries[2]["reason"]
    assert r.records_extracted == 4 and r.records_written == 2 and r.records_rejected == 3
    assert r.actual_high_watermark == f.stat().st_size


def test_converters_one_to_zero_one_and_many(tmp_path: Path) -> None:
    f = _data(tmp_path, [json.dumps({"id": 1, "tags": ["a", "b", "c"]}), json.dumps({"id": 2, "tags": []}),
                         json.dumps({"id": 3, "tags": ["x"], "drop": True})])
    job = _job(tmp_path, converters=[
        {"class": "filter", "field": "drop", "op": "eq", "value": True},  # 1:0 for id 3
        {"class": "explode", "field": "tags"},                            # 1:N, and 1:0 for id 2
        {"class": "rename_fields", "mapping": {"tags": "tag"}},           # 1:1
    ], writer={"class": "jsonl"})
    r = _run(tmp_path, job, f)
    assert r.status is TaskStatus.SUCCEEDED, r.error
    [out] = r.files
    rows = [orjson.loads(line) for line in Path(out.path).read_bytes().splitlines()]
    assert rows == [{"id": 1, "tag": "a"}, {"id": 1, "tag": "b"}, {"id": 1, "tag": "c"}]
    assert r.records_extracted == 3 and r.records_written == 3


@pytest.mark.parametrize(("ptype", "status", "written", "rejected"), [
    ("ERR_FILE", TaskStatus.SUCCEEDED, 1, 1),
    ("OPTIONAL", TaskStatus.SUCCEEDED, 2, 1),
    ("FAIL", TaskStatus.FAILED, 0, 0),
])
def test_row_policy_types(tmp_path: Path, ptype: str, status: TaskStatus, written: int, rejected: int) -> None:
    f = _data(tmp_path, [_ev(1, country="US"), _ev(2)])
    job = _job(tmp_path, quality={"row": [{"class": "required_fields", "type": ptype, "fields": ["country"]}]})
    r = _run(tmp_path, job, f)
    assert r.status is status
    assert r.records_written == written
    if status is TaskStatus.FAILED:
        assert "quality.row[0] (required_fields)" in r.error and "country" in r.error and f"{f}:2" in r.error
        assert r.attempts == 1  # a FAIL policy decides the same way every time: not retried
        assert r.files == []
    else:
        assert r.records_rejected == rejected
        assert bool([x for x in r.files if x.kind == "errors"]) is (ptype == "ERR_FILE")


@pytest.mark.parametrize(("ptype", "status"), [("FAIL", TaskStatus.FAILED), ("OPTIONAL", TaskStatus.SUCCEEDED)])
def test_task_policy_types(tmp_path: Path, ptype: str, status: TaskStatus) -> None:
    f = _data(tmp_path, [_ev(1), _ev(2)])
    job = _job(tmp_path, quality={"task": [{"class": "row_count", "type": ptype, "min": 5}]})
    r = _run(tmp_path, job, f)
    assert r.status is status
    if ptype == "FAIL":
        assert "fewer than min 5" in r.error
    else:
        assert any("fewer than min 5" in w for w in r.warnings)


def test_bad_records_fail_policy_fails_the_task(tmp_path: Path) -> None:
    f = _data(tmp_path, [_ev(1), "{torn"])
    job = _job(tmp_path, quality={"bad_records": "FAIL"})
    r = _run(tmp_path, job, f)
    assert r.status is TaskStatus.FAILED and f"{f}:2" in r.error and "not valid JSON" in r.error


def test_two_fork_branches_with_different_writers(tmp_path: Path) -> None:
    f = _data(tmp_path, [_ev(1, kind="click"), _ev(2, kind="order"), _ev(3, kind="view")])
    job = _job(tmp_path, fork={
        "class": "by_field", "field": "kind", "routes": {"avro": ["click", "order"], "json": ["order", "view"]},
        "branches": [
            {"name": "avro"},
            {"name": "json", "writer": {"class": "jsonl"}, "converters": [{"class": "select_fields", "fields": ["id", "kind"]}]},
        ]})
    r = _run(tmp_path, job, f)
    assert r.status is TaskStatus.SUCCEEDED, r.error
    by_rel = {x.rel_path: x for x in r.files}
    assert set(by_rel) == {"ds/avro/2026/01/01/wu1.avro", "ds/json/wu1.jsonl"}
    assert sorted(x["id"] for x in _read([by_rel["ds/avro/2026/01/01/wu1.avro"].path])) == [1, 2]
    rows = [orjson.loads(line) for line in Path(by_rel["ds/json/wu1.jsonl"].path).read_bytes().splitlines()]
    assert rows == [{"id": 2, "kind": "order"}, {"id": 3, "kind": "view"}]
    assert r.branches["avro"].records_written == 2 and r.branches["json"].records_written == 2


def test_a_failed_attempt_is_retried_in_its_own_directory(tmp_path: Path) -> None:
    f = _data(tmp_path, [_ev(1), _ev(2)])
    job = _job(tmp_path, converters=[{"class": "gobblin_py.testing.faults:FlakyConverter", "fail_attempts": 2},
                                     {"class": "json_to_avro", "schema": str(EVENT_SCHEMA)}])
    r = _run(tmp_path, job, f)
    assert r.status is TaskStatus.SUCCEEDED and r.attempts == 3
    assert [w.split(":")[0] for w in r.warnings] == ["attempt 1 failed", "attempt 2 failed"]
    assert all("/a3-" in x.path for x in r.files)
    attempts = list((tmp_path / "work" / "task-output" / "t" / "r1" / "wu1").iterdir())
    assert [a.name[:3] for a in attempts] == ["a3-"]  # failed attempts left nothing behind


def test_retries_exhausted_fails_the_workunit(tmp_path: Path) -> None:
    f = _data(tmp_path, [_ev(1)])
    job = _job(tmp_path, converters=[{"class": "gobblin_py.testing.faults:FlakyConverter", "fail_attempts": 9}],
               writer={"class": "jsonl"})
    r = _run(tmp_path, job, f)
    assert r.status is TaskStatus.FAILED and r.attempts == 3 and "injected failure on attempt 3" in r.error


def test_the_summary_shows_watermarks_in_one_short_line() -> None:
    """A database's keys held a published sub-range each (`done.1 = (…, …] planned at high=…`): ~350 characters."""
    from gobblin_py.runtime.job_result import watermark_summary

    assert watermark_summary({}, {"0": 120, "1": 98}) == "0=120 1=98"
    assert watermark_summary({"a": 1}, {f"f{i}": i for i in range(12)}) == "12 keys (+11)"
    jdbc = {"high": "2026-01-05T10:00:00.123456",
            "done.1": "(2026-01-05T10:00:00.123456, 2026-01-05T11:00:00.000000] planned at high=2026-01-05T10:00:00.123456"}
    assert watermark_summary({}, jdbc) == "high=2026-01-05T10:00:00.123456 (+1 more)"
    ranges = {"high": 125, **{f"done.{i}": f"({i * 125}, {i * 125 + 125}] planned at high=none" for i in (1, 2, 3)}}
    assert watermark_summary({}, ranges) == "high=125 (+3 more)"
