"""A committable in task output is durable (its content, its entry and every directory made for it) before
`commit_staged` returns, that is before any commit record can name it; the fsyncs go at once (issue 45)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.jobs import EVENT_SCHEMA, write_job

from gobblin_py import durable
from gobblin_py.api import MultiWorkUnit, WorkUnit
from gobblin_py.builtin.sources.files.split import FileSplit
from gobblin_py.config import load_job
from gobblin_py.runtime.task.attempt import run_task
from gobblin_py.runtime.task.committables import commit_staged
from gobblin_py.runtime.task.results import TaskStatus
from gobblin_py.runtime.task.spec import TaskSpec


def test_the_file_and_every_new_directory_are_fsynced_before_it_returns(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[Path] = []
    real = durable._fsync_path

    def spy(path: Path) -> None:
        real(path)
        synced.append(Path(path).relative_to(tmp_path))

    monkeypatch.setattr(durable, "_fsync_path", spy)
    staged = tmp_path / "staging" / "part-0.avro"
    staged.parent.mkdir()
    staged.write_bytes(b"records")
    (tmp_path / "out").mkdir()
    dest = tmp_path / "out" / "run" / "wu" / "a1" / "ds" / "part-0.avro"
    f = commit_staged(staged, dest, "ds/part-0.avro", 3)
    assert dest.read_bytes() == b"records" and not staged.exists() and f.size == 7
    assert set(synced) == {Path(p) for p in ("out/run/wu/a1/ds/part-0.avro", "out/run/wu/a1/ds", "out/run/wu/a1",
                                             "out/run/wu", "out/run", "out")}


def test_fsync_all_raises_the_first_error(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"x")
    with pytest.raises(FileNotFoundError, match="gone"):
        durable.fsync_all([tmp_path / "a", tmp_path / "gone", tmp_path])


def _two_unit_task(tmp: Path) -> TaskSpec:
    """A task of two WorkUnits (a MultiWorkUnit, as a slot's tables are), each reading one JSON-lines file of its own
    dataset into Avro."""
    units = []
    for name in ("a", "b"):
        data = tmp / "data" / name / "f.jsonl"
        data.parent.mkdir(parents=True)
        data.write_text("".join(json.dumps({"id": i, "ts": 1767225600000 + i, "user": "u", "kind": "k"}) + "\n"
                                for i in range(3)))
        units.append(WorkUnit(id=f"wu-{name}", dataset=name, watermark_key="f.jsonl", low_watermark=None,
                              expected_high_watermark=data.stat().st_size,
                              split=FileSplit(file=str(data), end=data.stat().st_size).packed()))
    job = {"job": {"name": "t", "work_dir": str(tmp / "work")}, "source": {"class": "files", "path": str(tmp / "data")},
           "converters": [{"class": "json_to_avro", "schema": str(EVENT_SCHEMA)}], "writer": {"class": "avro"},
           "publisher": {"final_dir": str(tmp / "out")}}
    return TaskSpec(job=load_job(write_job(tmp, job)), run_id="r1", unit=MultiWorkUnit(id="m", workunits=tuple(units)))


def test_a_task_fsyncs_its_work_units_files_together_before_it_returns(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The files of every WorkUnit of a task, their directories and the directories made for them are fsynced once the
    last WorkUnit ran (one round), and before `run_task` hands any result on."""
    output = tmp_path / "work" / "task-output"
    synced: dict[Path, int] = {}  # each path fsynced in task output: the task-output files there when it was
    real = durable._fsync_path

    def spy(path: Path) -> None:
        real(path)
        if Path(path).is_relative_to(output):
            synced[Path(path)] = len(list(output.rglob("*.avro")))

    monkeypatch.setattr(durable, "_fsync_path", spy)
    results = run_task(_two_unit_task(tmp_path))
    assert [r.status for r in results] == [TaskStatus.SUCCEEDED, TaskStatus.SUCCEEDED]
    files = [Path(f.path) for r in results for f in r.files]
    assert len(files) == 2 and all(f.is_relative_to(output) for f in files)
    for f in files:  # the file, its directory, and the attempt directory made for it
        assert {f, f.parent, f.parent.parent} <= set(synced), f"{f} not durable when run_task returned"
    assert set(synced.values()) == {2}, f"fsynced before the task's last WorkUnit ran: {synced}"


def test_a_work_unit_whose_files_cannot_be_fsynced_fails_naming_the_file(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The task's round of fsyncs fails: each WorkUnit's files are fsynced on their own, and the one that fails is a
    failed result naming its file, never a result a commit record could name; the other is published."""
    real = durable._fsync_path

    def failing(path: Path) -> None:
        if Path(path).suffix == ".avro" and "wu-b" in str(path):
            raise OSError(5, "Input/output error", str(path))
        real(path)

    monkeypatch.setattr(durable, "_fsync_path", failing)
    a, b = run_task(_two_unit_task(tmp_path))
    assert a.status is TaskStatus.SUCCEEDED and len(a.files) == 1
    assert b.status is TaskStatus.FAILED and not b.files
    assert "wu-b" in (b.error or "") and "could not be made durable" in (b.error or "") and ".avro" in (b.error or "")
