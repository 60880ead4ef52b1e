"""Whole jobs on the shared local Spark session: commit policies, incremental runs, state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.jobs import example_job, write_job

from gobblin_py.config import load_job
from gobblin_py.runtime.executors.spark import SharedSparkExecutor
from gobblin_py.runtime.runner import DatasetStatus, JobRunner
from gobblin_py.state.store import StateStore
from gobblin_py.testing.outputs import read_avro_dir, read_error_files

pytestmark = pytest.mark.spark

EXPECTED_CLICKS = 2000
EXPECTED_ORDERS = 998


def _run(tmp: Path, spark, job: dict):
    spec = load_job(write_job(tmp, job))
    return JobRunner(spec, SharedSparkExecutor(spec, spark)).run()


def _ids(tmp: Path, dataset: str) -> list[int]:
    return sorted(r["id"] for r in read_avro_dir(tmp / "output" / dataset))


def test_example_job_publishes_every_record_once_then_only_new_files(tmp_path: Path, spark) -> None:
    job = example_job(tmp_path)
    first = _run(tmp_path, spark, job)
    assert first.succeeded, first.error
    clicks, orders = _ids(tmp_path, "clicks"), _ids(tmp_path, "orders")
    assert len(clicks) == len(set(clicks)) == EXPECTED_CLICKS
    assert len(orders) == len(set(orders)) == EXPECTED_ORDERS
    by_day = {r["_file"].rsplit("/", 1)[0] for r in read_avro_dir(tmp_path / "output" / "clicks")}
    assert by_day == {f"2026/01/0{d}" for d in range(1, 6)}
    for rec in read_avro_dir(tmp_path / "output" / "clicks"):
        assert rec["_file"].startswith(rec["ts"].strftime("%Y/%m/%d/"))
    assert len(read_error_files(tmp_path / "output")) == 4
    summary = {d.dataset: d for d in first.datasets}
    assert summary["clicks"].records_written == EXPECTED_CLICKS and summary["clicks"].files_published == 5

    state = StateStore(tmp_path / "work", "t")
    assert sorted(state.watermarks()["orders"]) == sorted(p.name for p in (tmp_path / "data" / "orders").iterdir())

    second = _run(tmp_path, spark, job)
    assert second.succeeded and second.tasks == []
    assert {d.status for d in second.datasets} == {DatasetStatus.NO_NEW_DATA}
    assert len(_ids(tmp_path, "clicks")) == EXPECTED_CLICKS

    new = tmp_path / "data" / "clicks" / "clicks-2026-01-06.jsonl"
    new.write_text("".join(json.dumps({"id": 10_000 + i, "ts": 1767657600000 + i, "user": "u", "kind": "click"}) + "\n" for i in range(7)))
    third = _run(tmp_path, spark, job)
    assert third.succeeded
    assert [t.workunit.watermark_key for t in third.tasks] == ["clicks-2026-01-06.jsonl"]
    clicks = _ids(tmp_path, "clicks")
    assert len(clicks) == len(set(clicks)) == EXPECTED_CLICKS + 7
    assert (tmp_path / "output" / "clicks" / "2026" / "01" / "06").is_dir()
    assert not [p for p in (tmp_path / "work" / "task-output").rglob("*") if p.is_file()], "task output is cleaned after commit"
    assert [r["status"] for r in state.runs()] == ["succeeded"] * 3


@pytest.mark.parametrize("policy", ["full", "successful"])
def test_commit_policy_with_a_failing_task(tmp_path: Path, spark, policy: str) -> None:
    job = example_job(tmp_path, job={"name": "t", "work_dir": str(tmp_path / "work"), "max_task_retries": 1, "commit_policy": policy})
    job["source"]["pack_bytes"] = 0  # a unit a file: one of them fails (a packed unit fails whole: test_files_packed)
    job["converters"].insert(0, {"class": "gobblin_py.testing.faults:FlakyConverter", "fail_attempts": 99,
                                 "only_workunit_containing": "clicks-2026-01-03"})
    result = _run(tmp_path, spark, job)
    assert not result.succeeded
    status = {d.dataset: d.status for d in result.datasets}
    assert status["orders"] is DatasetStatus.COMMITTED
    assert len(_ids(tmp_path, "orders")) == EXPECTED_ORDERS
    wm = StateStore(tmp_path / "work", "t").watermarks()
    if policy == "full":
        assert status["clicks"] is DatasetStatus.NOT_COMMITTED
        assert not (tmp_path / "output" / "clicks").exists()
        assert "clicks" not in wm
    else:
        assert status["clicks"] is DatasetStatus.PARTIAL
        assert len(_ids(tmp_path, "clicks")) == EXPECTED_CLICKS - 400
        assert "clicks-2026-01-03.jsonl" not in wm["clicks"] and len(wm["clicks"]) == 4
    # the failed work unit is retried by the next run once the fault is gone
    job["converters"].pop(0)
    again = _run(tmp_path, spark, job)
    assert again.succeeded, again.error
    clicks = _ids(tmp_path, "clicks")
    assert len(clicks) == len(set(clicks)) == EXPECTED_CLICKS


def test_many_datasets_are_committed_on_the_executors(tmp_path: Path, spark, caplog) -> None:
    """From job.commit_on_executors_from datasets, Spark tasks write and run the commit sequences."""
    data = tmp_path / "data"
    for d in range(70):
        (data / f"ds{d:02d}").mkdir(parents=True)
        (data / f"ds{d:02d}" / "a.jsonl").write_text("".join(json.dumps({"id": d * 10 + i, "ts": 1767225600000 + i, "user": "u", "kind": "k"}) + "\n" for i in range(3)))
    job = example_job(tmp_path, job={"name": "t", "work_dir": str(tmp_path / "work"), "commit_on_executors_from": 64})
    with caplog.at_level("INFO"):
        result = _run(tmp_path, spark, job)
    assert result.succeeded, result.error
    assert "committing 70 datasets on the executors" in caplog.text
    assert {d.status for d in result.datasets} == {DatasetStatus.COMMITTED} and len(result.datasets) == 70
    ids = [r["id"] for r in read_avro_dir(tmp_path / "output")]
    assert sorted(ids) == sorted(d * 10 + i for d in range(70) for i in range(3))
    assert not list((tmp_path / "work" / "commits" / "t").glob("*.json"))
    assert len(StateStore(tmp_path / "work", "t").watermarks()) == 70


def test_many_pending_datasets_are_recovered_on_the_executors(tmp_path: Path, spark, caplog) -> None:
    """From job.commit_on_executors_from pending datasets, the next run replays them as Spark tasks."""
    job = example_job(tmp_path, job={"name": "t", "work_dir": str(tmp_path / "work"), "commit_on_executors_from": 2,
                                     "commit_retry_backoff": 0})  # the next run retries at once
    for dataset in ("clicks", "orders"):  # a file where the dataset's output directory goes: every commit fails
        (tmp_path / "output").mkdir(exist_ok=True)
        (tmp_path / "output" / dataset).write_text("in the way")
    failed = _run(tmp_path, spark, job)
    assert not failed.succeeded
    assert {d.dataset: d.status for d in failed.datasets} == {"clicks": DatasetStatus.COMMIT_FAILED, "orders": DatasetStatus.COMMIT_FAILED}
    for dataset in ("clicks", "orders"):
        (tmp_path / "output" / dataset).unlink()

    with caplog.at_level("INFO"):
        again = _run(tmp_path, spark, job)
    assert again.succeeded, again.error
    assert "recovering 2 datasets on the executors" in caplog.text
    assert [(r.dataset, r.outcome.value) for r in again.recovery.datasets] == [("clicks", "recovered"), ("orders", "recovered")]
    assert {r.run_id for r in again.recovery.datasets} == {failed.run_id}
    assert again.tasks == [] and {d.status for d in again.datasets} == {DatasetStatus.NO_NEW_DATA}
    clicks, orders = _ids(tmp_path, "clicks"), _ids(tmp_path, "orders")
    assert len(clicks) == len(set(clicks)) == EXPECTED_CLICKS
    assert len(orders) == len(set(orders)) == EXPECTED_ORDERS
    assert not list((tmp_path / "work" / "commits" / "t").glob("*.json"))
    assert sorted(StateStore(tmp_path / "work", "t").watermarks()) == ["clicks", "orders"]
