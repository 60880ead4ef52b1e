"""`gobblin-py schedule`: fires a job on its cron schedule, one run at a time, and stops cleanly on SIGTERM."""

from __future__ import annotations

import datetime as dt
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from support.jobs import example_job, write_job

from gobblin_py.cron import Cron, CronError
from gobblin_py.state.store import StateStore


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
        _out, err = proc.communicate(timeout=60)
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


def _scrape(url: str) -> dict[tuple[str, str | None, str | None], float]:
    """`(sample name, dataset, status)` → value, as Prometheus reads the page."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url, timeout=10) as page:
        text = page.read().decode()
    return {(s.name, s.labels.get("dataset"), s.labels.get("status")): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_schedule_serves_the_runs_metrics_over_http(tmp_path: Path) -> None:
    job = write_job(tmp_path, example_job(tmp_path, job={"name": "t", "work_dir": str(tmp_path / "work"), "schedule": "*/5 * * * * ?"}))
    started = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "gobblin_py.cli.main", "schedule", str(job), "--in-process", "--metrics-port", "0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True).start()  # type: ignore[arg-type]

    def wait_for(what: str, check: Callable[[], object], timeout: float = 90) -> object:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and proc.poll() is None:
            found = check()
            if found:
                return found
            time.sleep(0.1)
        raise AssertionError(f"no {what} (exit {proc.poll()}):\n" + "".join(lines))

    def runs(n: int) -> Callable[[], dict | None]:
        def check() -> dict | None:
            m = _scrape(url)
            done = m.get(("gobblin_py_scheduled_runs_total", None, "succeeded"), 0)
            assert done <= n, f"missed the scrape after run {n}: the runs are 5 s apart"
            return m if done == n else None
        return check

    try:
        match = wait_for("metrics URL in the log", lambda: next((re.search(r"at (http://127\.0\.0\.1:\d+/metrics)", line)
                                                                for line in lines if "serving the runs' metrics" in line), None))
        url = match.group(1)  # type: ignore[attr-defined]
        before = _scrape(url)  # nothing has run yet: the job is listed with its next fire time
        assert before[("gobblin_py_next_run_timestamp_seconds", None, None)] > started
        assert ("gobblin_py_dataset_records_written", "clicks", None) not in before

        first = wait_for("first run in the metrics", runs(1))
        assert first[("gobblin_py_run_succeeded", None, None)] == 1
        assert first[("gobblin_py_dataset_records_written", "clicks", None)] == 2000
        assert first[("gobblin_py_dataset_records_rejected", "orders", None)] == 2
        assert first[("gobblin_py_dataset_files_published", "orders", None)] == 5
        assert first[("gobblin_py_dataset_bytes_written", "clicks", None)] > 0
        assert first[("gobblin_py_dataset_commit_failed", "clicks", None)] == 0
        assert first[("gobblin_py_scheduled_run_duration_seconds_count", None, None)] == 1
        assert first[("gobblin_py_scheduled_run_duration_seconds_sum", None, None)] > 0
        assert first[("gobblin_py_scheduled_run_exit_code", None, None)] == 0
        assert first[("gobblin_py_last_success_timestamp_seconds", None, None)] >= started
        committed = first[("gobblin_py_dataset_last_commit_timestamp_seconds", "clicks", None)]
        assert committed >= started

        second = wait_for("second run in the metrics", runs(2))  # no new data: counts are the last run's, commit time stays
        assert second[("gobblin_py_dataset_records_written", "clicks", None)] == 0
        assert second[("gobblin_py_dataset_last_commit_timestamp_seconds", "clicks", None)] == committed
        assert second[("gobblin_py_scheduled_run_duration_seconds_count", None, None)] == 2
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    assert proc.returncode == 0, "".join(lines)
    with pytest.raises(OSError):
        _scrape(url)  # the server stopped with the scheduler


def test_a_metrics_port_in_use_is_one_error_line(tmp_path: Path) -> None:
    job = write_job(tmp_path, example_job(tmp_path, job={"name": "t", "work_dir": str(tmp_path / "work"), "schedule": "0 0 * * * ?"}))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "gobblin_py.cli.main", "schedule", str(job), "--metrics-port", str(port)],
                                capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert f"error: --metrics-port {port}: cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr


def test_schedule_metrics_count_a_run_that_wrote_no_result_as_crashed_and_keep_jobs_apart(tmp_path: Path) -> None:
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from gobblin_py.cli.prometheus import ScheduleMetrics
    from gobblin_py.scheduling.scheduler import RunEnded, ScheduledJob

    soon = dt.datetime.now() + dt.timedelta(minutes=5)
    jobs = [ScheduledJob(tmp_path / f"{n}.yaml", n, tmp_path / "work", Cron.parse("0 * * * * ?"), soon) for n in ("a", "b")]
    metrics = ScheduleMetrics(jobs)
    metrics.run_ended(RunEnded(jobs[0], 4, 2.5, None))
    metrics.run_ended(RunEnded(jobs[1], 0, 1.0, {"job": "b", "status": "succeeded", "duration_s": 0.75, "datasets": [
        {"dataset": "d", "status": "committed", "records_extracted": 3, "records_written": 3, "records_rejected": 0, "files_published": 1}],
        "tasks": [{"dataset": "d", "branches": {"main": {"bytes_written": 120}}}]}))
    registry = CollectorRegistry()
    registry.register(metrics)
    text = generate_latest(registry).decode()
    assert text.count("# TYPE gobblin_py_run_succeeded gauge") == 1  # one family, a sample per job
    samples = {(s.name, s.labels.get("job"), s.labels.get("status")): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    assert samples[("gobblin_py_scheduled_runs_total", "a", "crashed")] == 1
    assert samples[("gobblin_py_scheduled_run_exit_code", "a", None)] == 4
    assert samples[("gobblin_py_run_succeeded", "a", None)] == 0
    assert samples[("gobblin_py_run_duration_seconds", "a", None)] == 2.5  # no result: the wall time
    assert samples[("gobblin_py_scheduled_runs_total", "b", "succeeded")] == 1
    assert samples[("gobblin_py_run_succeeded", "b", None)] == 1
    assert samples[("gobblin_py_dataset_bytes_written", "b", None)] == 120
    assert samples[("gobblin_py_scheduled_run_duration_seconds_sum", "b", None)] == 0.75
    assert samples[("gobblin_py_next_run_timestamp_seconds", "a", None)] == pytest.approx(soon.timestamp())
