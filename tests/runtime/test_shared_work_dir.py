"""Two jobs on one work directory: neither deletes, nor blocks, the other's staging, task output or pending commits."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from support.jobs import example_job, write_job

from gobblin_py.testing.crash import SIGKILLED, cli, duplicates, snapshot

RECORDS = 2998  # the example data's good records


def _job(tmp: Path, name: str, work: Path, slow: bool = False) -> Path:
    home = tmp / name
    home.mkdir()
    job = example_job(home, job={"name": name, "work_dir": str(work), "max_task_retries": 0})
    if slow:
        job["converters"].insert(0, {"class": "gobblin_py.testing.faults:SlowConverter", "seconds_per_record": 0.002})
    write_job(home, job)
    return home


def _complete(home: Path) -> None:
    snap = snapshot(home / "output")
    assert sum(snap["records"].values()) == RECORDS and duplicates(snap) == 0


def test_a_pending_commit_survives_another_job_run_in_between(tmp_path: Path) -> None:
    work = tmp_path / "work"
    a, b = _job(tmp_path, "a", work), _job(tmp_path, "b", work)
    assert cli(["run", "job.yaml", "--in-process"], a, crash_at="commit.after_store_write").returncode == SIGKILLED
    other = cli(["run", "job.yaml", "--in-process"], b)
    assert other.returncode == 0, other.stderr
    again = cli(["run", "job.yaml", "--in-process"], a)   # recovers its pending commits from its own task output
    assert again.returncode == 0, again.stdout + again.stderr
    _complete(a)
    _complete(b)


def test_two_jobs_running_at_once_on_one_work_dir_both_commit_everything(tmp_path: Path) -> None:
    work = tmp_path / "work"
    a, b = _job(tmp_path, "a", work, slow=True), _job(tmp_path, "b", work)
    slow = subprocess.Popen([sys.executable, "-m", "gobblin_py.cli.main", "run", "job.yaml", "--in-process"], cwd=a,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not any(p.is_file() for p in (work / "staging").rglob("*")) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert slow.poll() is None, "job a ended before its tasks wrote anything"
        fast = cli(["run", "job.yaml", "--in-process"], b)   # starts, cleans up and commits while a is writing
        assert fast.returncode == 0, fast.stderr
        out, err = slow.communicate(timeout=300)
    finally:
        if slow.poll() is None:
            slow.kill()
            slow.wait()
    assert slow.returncode == 0, out + err
    _complete(a)
    _complete(b)
