"""The files source's packed work units: many small files of a dataset read by one task into one output file, each
file keeping its own watermark key (planning, whole runs in the driver and on Spark)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.jobs import example_job, write_job

from gobblin_py.api import SourceState, WorkUnit
from gobblin_py.builtin.sources.files.source import FilesSource
from gobblin_py.builtin.sources.files.split import FileSplit
from gobblin_py.config import load_job
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.executors.spark import SharedSparkExecutor
from gobblin_py.runtime.runner import DatasetStatus, JobResult, JobRunner
from gobblin_py.state.store import StateStore
from gobblin_py.testing.outputs import read_avro_dir, read_error_files

START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def _line(i: int) -> str:
    return json.dumps({"id": i, "ts": START_MS + i, "user": f"u{i % 7}", "kind": "click", "amount": None, "country": "DE"}) + "\n"


def _files(root: Path, dataset: str, count: int, per: int = 3, first: int = 0) -> list[Path]:
    """`count` JSON-lines files of `per` events each, ids `first * per` on, named f-000.jsonl …"""
    out = []
    for f in range(first, first + count):
        path = root / dataset / f"f-{f:03d}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(_line(f * per + k) for k in range(per)))
        out.append(path)
    return out


def _plan(root: Path, state: dict[str, dict[str, Any]] | None = None, **settings: Any) -> list[WorkUnit]:
    units = FilesSource(FilesSource.Settings.model_validate({"path": str(root), **settings})).get_workunits(SourceState(state or {}))
    assert all(isinstance(u, WorkUnit) for u in units)
    return units  # type: ignore[return-value]


def _keys(units: list[WorkUnit]) -> list[tuple[str, str, Any]]:
    return sorted((u.dataset, k.key, k.high) for u in units for k in u.key_ranges())


def test_small_files_are_packed_by_bytes_and_count_and_each_keeps_its_key(tmp_path: Path) -> None:
    root = tmp_path / "in"
    small = _files(root, "a", 7, first=40)  # ids of three digits: files of one size
    size = small[0].stat().st_size
    assert {p.stat().st_size for p in small} == {size}
    big = root / "a" / "g-big.jsonl"
    big.write_text("".join(_line(100 + i) for i in range(20)))  # over pack_bytes: a unit of its own
    (root / "a" / "h.csv").write_text("id,ts\n1,2\n")  # CSV with a header row: its own unit
    (root / "a" / "i.csv").write_text("id,ts\n3,4\n")
    units = _plan(root, pack_bytes=size * 3, pack_files=2)
    packed = [u for u in units if u.packed_keys]
    assert [len(u.packed_keys) for u in packed] == [2, 2, 2]  # 7 small files: three pairs and one alone
    assert sum(1 for u in units if not u.packed_keys) == 4  # the seventh, the big one, the two CSV files
    assert _keys(units) == sorted([("a", p.name, size) for p in small] + [("a", "g-big.jsonl", big.stat().st_size),
                                                                          ("a", "h.csv", 10), ("a", "i.csv", 10)])
    for u in packed:
        split = FileSplit.of(u)
        assert [Path(f).name for f, _, _ in split.parts()] == [k.key for k in u.key_ranges()]
        assert (u.watermark_key, u.expected_high_watermark) == (u.packed_keys[0].key, u.packed_keys[0].high)
    by_bytes = _plan(root, pack_bytes=size * 3 + 1)  # three small files fit, the fourth does not
    assert [len(u.packed_keys) for u in by_bytes if u.packed_keys] == [3, 3]
    assert [len(u.packed_keys) for u in _plan(root, pack_bytes=size * 3, pack_files=2, csv_columns=["id", "ts"])
            if u.packed_keys] == [2, 2, 2, 2]  # headerless CSV files share one schema: packed too
    assert not any(u.packed_keys for u in _plan(root, pack_bytes=0))
    assert not any(u.packed_keys for u in _plan(root, pack_files=1))


def test_a_packed_units_id_is_the_same_for_the_same_files_and_differs_for_others(tmp_path: Path) -> None:
    root = tmp_path / "in"
    files = _files(root, "a", 4)
    (unit,) = _plan(root)
    assert [u.id for u in _plan(root)] == [unit.id] and unit.id.startswith("f-000_3-")
    files[2].write_text(files[2].read_text() + _line(99))  # another file's size: another name
    assert [u.id for u in _plan(root)] != [unit.id]
    done = {"a": {files[0].name: files[0].stat().st_size}}  # one file committed: the rest are another unit
    (rest,) = _plan(root, done)
    assert [k.key for k in rest.packed_keys] == [f.name for f in files[1:]] and rest.id != unit.id


def test_tailing_packs_new_files_up_to_their_last_whole_line_and_keeps_each_ones_tail_digest(tmp_path: Path) -> None:
    root = tmp_path / "in"
    files = _files(root, "a", 3)
    whole = files[1].stat().st_size
    with files[1].open("a") as f:
        f.write('{"id": 50, "ts"')  # a line still being written
    ingested = {"a": {files[2].name: 10}}
    units = _plan(root, ingested, ingest_appended=True)
    (packed,) = [u for u in units if u.packed_keys]
    assert [(k.key, k.low, k.high) for k in packed.packed_keys] == [
        (files[0].name, None, files[0].stat().st_size), (files[1].name, None, whole)]
    assert sorted(packed.props["state.tails"]) == [files[0].name, files[1].name]
    (appended,) = [u for u in units if not u.packed_keys]  # bytes appended to an ingested file: a unit of their own
    assert (appended.watermark_key, appended.low_watermark) == (files[2].name, 10)


def _job(tmp: Path, **source: Any) -> Path:
    job = example_job(tmp, source={"class": "files", "path": str(tmp / "data"), **source})
    job["quality"] = {"row": [{"class": "required_fields", "type": "ERR_FILE", "fields": ["id", "ts"]}]}
    job["writer"] = {"class": "avro", "codec": "null"}  # not partitioned: one output file a task
    return write_job(tmp, job)


def _run(job: Path) -> JobResult:
    return JobRunner(load_job(job), InProcessExecutor()).run()


def test_a_packed_run_publishes_each_record_once_in_one_file_and_commits_each_files_watermark(tmp_path: Path) -> None:
    files = _files(tmp_path / "data", "events", 40)
    bad = files[7]
    bad.write_text(_line(21) + "not json\n" + _line(22) + _line(23))
    result = _run(_job(tmp_path))
    assert result.succeeded, result.error
    (task,) = result.tasks  # 40 files, one task
    assert len(task.workunit.packed_keys) == 40
    ids = sorted(r["id"] for r in read_avro_dir(tmp_path / "output" / "events"))
    assert ids == list(range(120))
    assert len(list((tmp_path / "output" / "events").rglob("*.avro"))) == 1
    (error,) = read_error_files(tmp_path / "output" / "events")
    assert error["location"] == f"{bad}:2"  # the bad line names its own file and line
    marks = StateStore(tmp_path / "work", "t").watermarks()["events"]
    assert marks == {f.name: f.stat().st_size for f in files}
    assert [d.status for d in _run(_job(tmp_path)).datasets] == [DatasetStatus.NO_NEW_DATA]
    more = _files(tmp_path / "data", "events", 2, first=40)
    again = _run(_job(tmp_path))
    assert again.succeeded and [len(t.workunit.packed_keys) for t in again.tasks] == [2]
    assert sorted(r["id"] for r in read_avro_dir(tmp_path / "output" / "events")) == list(range(126))
    assert StateStore(tmp_path / "work", "t").watermarks()["events"] == {f.name: f.stat().st_size for f in files + more}


def test_a_file_changed_after_a_packed_run_is_named_by_its_own_key(tmp_path: Path) -> None:
    files = _files(tmp_path / "data", "events", 5)
    assert _run(_job(tmp_path)).succeeded
    files[3].write_text(files[3].read_text() + _line(77))
    result = _run(_job(tmp_path))
    (summary,) = result.datasets
    assert summary.input_problems and str(files[3]) in summary.input_problems[0]
    assert f"--to {files[3].name}=" in summary.input_problems[0]


def test_a_failed_packed_unit_advances_none_of_its_files_under_commit_policy_successful(tmp_path: Path) -> None:
    _files(tmp_path / "data", "good", 4)
    bad = _files(tmp_path / "data", "bad", 4, first=10)
    bad[2].write_text(_line(31) + "not json\n")
    job = example_job(tmp_path, source={"class": "files", "path": str(tmp_path / "data")}, job__commit_policy="successful",
                      quality={"bad_records": "FAIL"})
    job["writer"] = {"class": "avro", "codec": "null"}
    result = _run(write_job(tmp_path, job))
    status = {d.dataset: d.status for d in result.datasets}
    assert status == {"good": DatasetStatus.COMMITTED, "bad": DatasetStatus.NOT_COMMITTED}
    marks = StateStore(tmp_path / "work", "t").watermarks()
    assert "bad" not in marks or marks["bad"] == {}  # not even the files before the bad one
    assert len(marks["good"]) == 4


@pytest.mark.spark
def test_a_packed_run_on_spark_executors_publishes_each_record_once(tmp_path: Path, spark: Any) -> None:
    files = _files(tmp_path / "data", "events", 30) + _files(tmp_path / "data", "other", 30, first=30)
    job = load_job(_job(tmp_path, pack_files=8))
    result = JobRunner(job, SharedSparkExecutor(job, spark)).run()
    assert result.succeeded, result.error
    assert sorted(len(t.workunit.packed_keys) for t in result.tasks) == [6, 6, 8, 8, 8, 8, 8, 8]
    ids = sorted(r["id"] for d in ("events", "other") for r in read_avro_dir(tmp_path / "output" / d))
    assert ids == list(range(180))
    marks = StateStore(tmp_path / "work", "t").watermarks()
    assert {k for m in marks.values() for k in m} == {f.name for f in files}


def test_the_columnar_path_over_a_packed_unit_publishes_what_the_row_path_does(tmp_path: Path) -> None:
    out = {}
    for columnar in (True, False):
        tmp = tmp_path / str(columnar)
        files = _files(tmp / "data", "events", 12)
        files[5].write_text(_line(15) + "not json\n" + _line(16) + _line(17))
        job = example_job(tmp, source={"class": "files", "path": str(tmp / "data")}, quality=None,
                          job__columnar=columnar)
        job["writer"] = {"class": "avro", "codec": "null"}
        result = _run(write_job(tmp, job))
        assert result.succeeded, result.error
        (task,) = result.tasks
        assert (task.records_columnar > 0) is columnar and task.records_extracted == 36
        errors = read_error_files(tmp / "output" / "events")
        out[columnar] = (sorted(r["id"] for r in read_avro_dir(tmp / "output" / "events")),
                         [(Path(e["location"]).name, e["reason"][:12]) for e in errors])
    assert out[True] == out[False] and out[True][0] == list(range(36))
    assert out[True][1] == [("f-005.jsonl:2", "not valid JS")]


def test_a_table_publisher_reads_a_file_a_task_and_refuses_packing_asked_for(tmp_path: Path) -> None:
    """Iceberg and Delta know a range read again (after `state reset`) by its output files' names, which a packed unit
    names after the files it happened to pack: with them packing is off by default, and refused (naming the setting)
    when the job file asks for it, instead of a re-read doubling the table's rows."""
    from gobblin_py.errors import ConfigError

    publisher = {"class": "iceberg", "table": "db.{dataset}", "warehouse": str(tmp_path / "warehouse")}
    job = example_job(tmp_path, writer={"class": "parquet"}, publisher=publisher)
    spec = load_job(write_job(tmp_path, job))
    assert spec.source.settings.pack_bytes == 0
    files = load_job(write_job(tmp_path, example_job(tmp_path)))  # the fs publisher: packed
    assert files.source.settings.pack_bytes == 64 * 1024 * 1024
    job["source"]["pack_bytes"] = 1024
    with pytest.raises(ConfigError, match=r"source\.pack_bytes: packs several files into one output file.*pack_bytes: 0"):
        load_job(write_job(tmp_path, job))
    job["source"]["pack_bytes"] = 0
    assert load_job(write_job(tmp_path, job)).source.settings.pack_bytes == 0
