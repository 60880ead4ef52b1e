"""`gobblin-py schedule`: fires a job on its cron schedule, one run at a time, and stops cleanly on SIGTERM."""

from __future__ import annotations

import datetime as dt
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gobblin_py.cron import Cron, CronError
from gobblin_py.state.store import StateStore

from support.jobs import example_job, write_job


def test_the_scheduler_fires_a_job_every_second_and_stops_on_sigterm(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    write_job(jobs, example_job(tmp_path, job={"name": "t", "work_dir": str(tmp_path / "work"), "schedule": "* * * * * ?"}), "every-second.yaml")
    write_job(jobs, example_job(tmp_path, job={"name": "manual", "work_dir": str(tmp_path / "work2")}), "manual.yaml")
    proc = subprocess.Popen([sys.executable, "-m", "gobblin_py.cli.main", "schedule", str(jobs), "--in-process"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    store = StateStore(tmp_path / "work", "t")
    try:
        deadline = time.monotonic() + 60
        while len(store.runs()) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    runs = store.runs()
    assert len(runs) >= 2 and all(r["status"] == "succeeded" for r in runs)
    for earlier, later in zip(runs, runs[1:]):  # never two runs of one job at once
        end = dt.datetime.fromisoformat(earlier["started"]) + dt.timedelta(seconds=earlier["duration_s"])
        assert end <= dt.datetime.fromisoformat(later["started"]) + dt.timedelta(seconds=1)
    assert "manual.yaml has no job.schedule: not scheduled" in err
    assert "scheduler stopped" in err
    assert not (tmp_path / "work2" / "state").exists()


@pytest.mark.parametrize(("expr", "after", "expected"), [
    ("* * * * * ?", "2026-11-21 10:00:00", "2026-11-21 10:00:01"),
    ("0 0/5 * * * ?", "2026-11-21 10:03:10", "2026-11-21 10:05:00"),
    ("*/15 * * * *", "2026-11-21 10:50:00", "2026-11-21 11:00:00"),
    ("0 0 2 * * MON-FRI", "2026-11-21 10:00:00", "2026-11-23 02:00:00"),
    ("0 30 9 1 JAN ? 2027", "2026-11-21 10:00:00", "2027-01-01 09:30:00"),
])
def test_cron_next_fire(expr: str, after: str, expected: str) -> None:
    assert Cron.parse(expr).next_after(dt.datetime.fromisoformat(after)) == dt.datetime.fromisoformat(expected)


@pytest.mark.parametrize("expr", ["61 * * * * ?", "* * *", "*/0 * * * * ?", "0 0 0 32 * ?"])
def test_bad_cron_expressions_name_the_field(expr: str) -> None:
    with pytest.raises(CronError):
        Cron.parse(expr)
