"""The long-running scheduler: runs each job file that has `job.schedule` on time, one run per job at a time.

Each run is a `gobblin-py run` child process, so a crashing job never takes the scheduler down; it writes
its result (`--metrics-json`) to the scheduler's private temp dir, handed to the `run_listeners` when it
ends (metrics). On SIGTERM or SIGINT the scheduler stops firing, waits up to `grace_s` for the runs in
progress, then kills what is left (safe: the commit log makes a killed run recoverable by its next run).
"""

from __future__ import annotations

import datetime as dt
import logging
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from gobblin_py.config import load_job
from gobblin_py.cron import Cron, CronError
from gobblin_py.errors import ConfigError

log = logging.getLogger(__name__)


@dataclass
class ScheduledJob:
    path: Path
    name: str
    work_dir: Path
    cron: Cron
    next_fire: dt.datetime
    running: subprocess.Popen[bytes] | None = None
    started: float = 0.0  # time.monotonic() of the running child's start
    runs: int = 0
    skipped: int = 0
    exit_codes: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class RunEnded:
    """One scheduled run that finished: its exit code, wall time, and its result (`JobResult.to_json()`), which is
    None when the child wrote none (it crashed or was killed)."""

    job: ScheduledJob
    exit_code: int
    wall_s: float
    result: dict[str, Any] | None


def job_files(paths: list[Path]) -> list[Path]:
    """The job files named, and the *.yaml / *.yml files of the directories named."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out.extend(sorted([*p.glob("*.yaml"), *p.glob("*.yml")]))
        elif p.is_file():
            out.append(p)
        else:
            raise ConfigError(f"{p}: no such job file or directory")
    return out


class Scheduler:
    """Fires scheduled jobs as child processes until stopped."""

    def __init__(self, paths: list[Path], extra_args: list[str] | None = None, grace_s: float = 300.0) -> None:
        self.extra_args = extra_args or []
        self.grace_s = grace_s
        self._stop = threading.Event()
        now = dt.datetime.now()
        self.jobs: list[ScheduledJob] = []
        for path in job_files(paths):
            job = load_job(path)
            if not job.job.schedule:
                log.info("%s has no job.schedule: not scheduled (run it with `gobblin-py run`)", path)
                continue
            cron = Cron.parse(job.job.schedule)
            try:
                first = cron.next_after(now)
            except CronError as exc:
                raise ConfigError(f"{path}: job.schedule: {exc}") from None
            self.jobs.append(ScheduledJob(path, job.name, job.job.work_dir, cron, first))
        names = [j.name for j in self.jobs]
        dupes = {n for n in names if names.count(n) > 1}
        if dupes:
            raise ConfigError(f"job name(s) {', '.join(sorted(dupes))} are scheduled from several files; job names must be unique")
        self.run_listeners: list[Callable[[RunEnded], None]] = []
        self._results: Path | None = None  # while running: a private temp dir for each child's --metrics-json

    def stop(self, *_: object) -> None:
        self._stop.set()

    def run_forever(self) -> int:
        """Fire jobs on time until `stop()` (or SIGTERM/SIGINT); returns the exit code for the scheduler."""
        if not self.jobs:
            log.error("no job with job.schedule among the files given")
            return 2
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self.stop)
            signal.signal(signal.SIGINT, self.stop)
        for j in self.jobs:
            log.info("scheduled %s (%s): next run at %s", j.name, j.cron.text, j.next_fire.isoformat(timespec="seconds"))
        self._results = Path(tempfile.mkdtemp(prefix="gobblin-py-schedule-"))
        try:
            while not self._stop.is_set():
                now = dt.datetime.now()
                for j in self.jobs:
                    self._reap(j)
                    if now >= j.next_fire:
                        self._fire(j, now)
                wake = min(j.next_fire for j in self.jobs)
                self._stop.wait(max(0.05, min(1.0, (wake - dt.datetime.now()).total_seconds())))
            return self._shutdown()
        finally:
            shutil.rmtree(self._results, ignore_errors=True)

    def _result_file(self, j: ScheduledJob) -> Path:
        assert self._results is not None, "only while run_forever() runs"
        return self._results / f"{j.name}.json"

    def _fire(self, j: ScheduledJob, now: dt.datetime) -> None:
        try:
            j.next_fire = j.cron.next_after(now)
        except CronError:  # a year field that has passed: this is the last run
            j.next_fire = dt.datetime.max
            log.info("%s (%s): this is its last firing, its schedule has no later time", j.name, j.cron.text)
        if j.running is not None:
            j.skipped += 1
            log.warning("%s is still running (pid %d): this firing is skipped; next at %s", j.name, j.running.pid,
                        j.next_fire.isoformat(timespec="seconds"))
            return
        self._result_file(j).unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "gobblin_py.cli.main", "run", str(j.path), "--quiet",
               "--metrics-json", str(self._result_file(j)), *self.extra_args]
        j.running = subprocess.Popen(cmd)
        j.started = time.monotonic()
        j.runs += 1
        log.info("started %s run %d (pid %d); next at %s", j.name, j.runs, j.running.pid, j.next_fire.isoformat(timespec="seconds"))

    def _reap(self, j: ScheduledJob) -> None:
        if j.running is not None and j.running.poll() is not None:
            code = j.running.returncode
            j.exit_codes.append(code)
            (log.info if code == 0 else log.error)("%s run %d finished with exit code %d", j.name, j.runs, code)
            j.running = None
            ended = RunEnded(j, code, time.monotonic() - j.started, self._read_result(j))
            for listener in self.run_listeners:
                try:
                    listener(ended)
                except Exception:  # noqa: BLE001 - a listener (metrics) never stops the scheduling
                    log.exception("after %s run %d: a run listener failed", j.name, j.runs)

    def _read_result(self, j: ScheduledJob) -> dict[str, Any] | None:
        try:
            result: dict[str, Any] = orjson.loads(self._result_file(j).read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None  # the child wrote no result: it crashed or was killed
        return result

    def _shutdown(self) -> int:
        running = [j for j in self.jobs if j.running is not None]
        if running:
            log.info("stopping: waiting up to %.0f s for %s", self.grace_s, ", ".join(j.name for j in running))
        deadline = dt.datetime.now() + dt.timedelta(seconds=self.grace_s)
        for j in running:
            assert j.running is not None
            try:
                j.running.wait(timeout=max(0.0, (deadline - dt.datetime.now()).total_seconds()))
            except subprocess.TimeoutExpired:
                log.warning("%s did not finish in time: killed; its next run recovers any pending commit", j.name)
                j.running.kill()
                j.running.wait()
            self._reap(j)
        log.info("scheduler stopped")
        return 0
