"""Exactly-once to an object store under SIGKILL: the real CLI publishing to S3 (moto on 127.0.0.1) is killed
at every commit point, including between a verified copy and the deletion of its source, then run again."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.jobs import EXAMPLE_DATA, example_job, write_job

from gobblin_py.state.store import StateStore
from gobblin_py.testing.crash import SIGKILLED, cli, commit_points, duplicates, each_point, snapshot

pytestmark = [pytest.mark.s3, pytest.mark.crash]

RUN = ["run", "job.yaml", "--in-process"]
STEPS, COPIES = 8, 6  # clicks: 5 data files + 1 error file copied, then watermarks and state


def _setup(tmp: Path, s3, **job_extra) -> tuple[Path, str]:
    """The example job on the clicks data only, publishing to a fresh bucket, one dataset a sequence."""
    shutil.copytree(EXAMPLE_DATA / "clicks", tmp / "data" / "clicks")
    bucket = s3.new_bucket()
    write_job(tmp, example_job(tmp, job={"name": "t", "work_dir": str(tmp / "work"), "commit_parallelism": 1,
                                         "filesystems": s3.options, **job_extra},
                               publisher={"final_dir": f"s3://{bucket}/events"}))
    return tmp, bucket


@pytest.fixture(scope="module")
def reference(tmp_path_factory, s3) -> dict:
    tmp, bucket = _setup(tmp_path_factory.mktemp("ref"), s3)
    done = cli(RUN, tmp)
    assert done.returncode == 0, done.stdout + done.stderr
    return {"snapshot": snapshot(s3.download(f"{bucket}/events", tmp / "published")),
            "watermarks": StateStore(tmp / "work", "t").watermarks()}


@pytest.mark.parametrize("task_output", ["local", "s3"])
def test_kill_at_every_commit_point_then_run_again(tmp_path_factory, s3, reference, task_output):
    assert sum(reference["snapshot"]["records"].values()) == 2000
    points = commit_points(STEPS, copies=COPIES)
    assert f"commit.copy_verified:{COPIES}" in points and f"commit.after_step:{STEPS}" in points
    dirs = [tmp_path_factory.mktemp("p") for _ in points]

    def check(n: int, point: str) -> None:
        extra = {}
        if task_output == "s3":
            extra = {"task_output_dir": f"s3://{s3.new_bucket()}/tasks"}
        tmp, bucket = _setup(dirs[n], s3, **extra)
        crashed = cli(RUN, tmp, crash_at=point)
        assert crashed.returncode == SIGKILLED, f"{point} was never reached: {crashed.stdout}{crashed.stderr}"
        again = cli(RUN, tmp)
        assert again.returncode == 0, f"{point}: {again.stdout}{again.stderr}"
        snap = snapshot(s3.download(f"{bucket}/events", tmp / "published"))
        assert duplicates(snap) == 0, point
        assert snap == reference["snapshot"], point
        assert StateStore(tmp / "work", "t").watermarks() == reference["watermarks"], point
        if extra:
            assert s3.keys(extra["task_output_dir"].removeprefix("s3://")) == [], f"{point}: task output left behind"

    each_point(points, check)
