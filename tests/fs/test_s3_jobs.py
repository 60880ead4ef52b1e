"""Whole jobs publishing to S3 (moto on 127.0.0.1) on the shared local Spark session."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.jobs import EXAMPLE_DATA, example_job, write_job

from gobblin_py.commit.store import CommitStepStore
from gobblin_py.config import load_job
from gobblin_py.runtime.executors.spark import SharedSparkExecutor
from gobblin_py.runtime.runner import DatasetStatus, JobRunner
from gobblin_py.state.store import StateStore
from gobblin_py.testing.crash import snapshot

pytestmark = [pytest.mark.s3, pytest.mark.spark]


def _job(tmp: Path, s3, final: str, **job_extra) -> dict:
    return example_job(tmp, job={"name": "t", "work_dir": str(tmp / "work"), "max_task_retries": 1,
                                 "filesystems": s3.options, **job_extra},
                       publisher={"final_dir": final})


def _run(tmp: Path, spark, job: dict):
    spec = load_job(write_job(tmp, job))
    return JobRunner(spec, SharedSparkExecutor(spec, spark)).run()


@pytest.fixture(scope="module")
def local_reference(tmp_path_factory, spark) -> dict:
    """The example job published to local disk: what S3 must end up holding."""
    tmp = tmp_path_factory.mktemp("local")
    assert _run(tmp, spark, example_job(tmp)).succeeded
    return snapshot(tmp / "output")


@pytest.mark.parametrize(("task_output", "commits"), [("local", "driver"), ("s3", "driver"), ("s3", "executors")])
def test_example_job_publishes_to_s3_exactly_as_to_local_disk(tmp_path, spark, s3, local_reference, task_output, commits):
    bucket = s3.new_bucket()
    extra = {"task_output_dir": f"s3://{bucket}/_tasks"} if task_output == "s3" else {}
    if commits == "executors":  # the S3 options travel with the commit groups to Spark's workers
        extra["commit_on_executors_from"] = 1
    result = _run(tmp_path, spark, _job(tmp_path, s3, f"s3://{bucket}/events", **extra))
    assert result.succeeded, result.error
    assert snapshot(s3.download(f"{bucket}/events", tmp_path / "published")) == local_reference
    assert s3.keys(f"{bucket}/_tasks") == [], "task output is removed once published"
    assert not list((tmp_path / "work" / "task-output").rglob("*.avro"))

    again = _run(tmp_path, spark, _job(tmp_path, s3, f"s3://{bucket}/events", **extra))
    assert again.succeeded and {d.status for d in again.datasets} == {DatasetStatus.NO_NEW_DATA}
    assert snapshot(s3.download(f"{bucket}/events", tmp_path / "published")) == local_reference


def test_a_missing_bucket_keeps_the_commit_pending_until_it_exists(tmp_path, spark, s3, local_reference):
    bucket = f"later-{tmp_path.name[-8:].lower().replace('_', '-')}"
    job = _job(tmp_path, s3, f"s3://{bucket}/events", commit_retry_backoff=0)  # the next run retries at once
    first = _run(tmp_path, spark, job)
    assert not first.succeeded
    failed = {d.dataset: d for d in first.datasets}
    assert failed["clicks"].status is DatasetStatus.COMMIT_FAILED and f"s3://{bucket}/events" in failed["clicks"].message
    assert StateStore(tmp_path / "work", "t").watermarks() == {}, "no watermark moves while its data is unpublished"
    assert sorted(CommitStepStore(tmp_path / "work").datasets("t")) == ["clicks", "orders"]

    s3.client().mkdir(bucket)
    second = _run(tmp_path, spark, job)
    assert second.succeeded, second.error
    assert sorted(r.dataset for r in second.recovery.datasets) == ["clicks", "orders"]
    assert snapshot(s3.download(f"{bucket}/events", tmp_path / "published")) == local_reference
    assert CommitStepStore(tmp_path / "work").datasets("t") == []


def test_files_source_reads_its_input_from_s3(tmp_path, spark, s3, local_reference):
    bucket = s3.new_bucket()
    s3.client().put(str(EXAMPLE_DATA) + "/", f"{bucket}/in/", recursive=True)
    job = example_job(tmp_path, job={"name": "t", "work_dir": str(tmp_path / "work"), "filesystems": s3.options},
                      source={"class": "files", "path": f"s3://{bucket}/in"})
    result = _run(tmp_path, spark, job)
    assert result.succeeded, result.error
    assert snapshot(tmp_path / "output") == local_reference
    watermarks = StateStore(tmp_path / "work", "t").watermarks()
    assert sorted(watermarks["orders"]) == sorted(p.name for p in (EXAMPLE_DATA / "orders").iterdir())
    assert _run(tmp_path, spark, job).tasks == [], "files already ingested are not read again"


def test_an_unreachable_store_fails_planning_naming_the_url(tmp_path, spark):
    job = example_job(tmp_path, job={"name": "t", "work_dir": str(tmp_path / "work"),
                                     "filesystems": {"s3": {"endpoint_url": "http://127.0.0.1:9", "key": "k", "secret": "s"}}},
                      source={"class": "files", "path": "s3://nowhere/in"})
    result = _run(tmp_path, spark, job)
    assert not result.succeeded
    assert "s3://nowhere/in" in result.error and "Could not connect" in result.error
