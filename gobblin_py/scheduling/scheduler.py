"""The long-running scheduler: runs each job file that has `job.schedule` on time, one run per job at a time, and
its compaction on `compaction.schedule` (as `<job>:compact`) and its maintenance on `maintenance.schedule` (as
`<job>:maintain`, deleting as `maintain --yes` does); the job lock keeps each apart from the job's runs.

Warm (the default): the runs share one SparkSession in the scheduler's process, started by the first run that
has tasks, so a job fired every few minutes stops paying Spark's start each time. Each firing re-reads the job
file and runs `JobRunner` in a thread of its own (its own job lock, its own commits, its own Spark job group); a
run that raises anything is logged with the job's name and counted as failed, and the scheduler goes on. A job
whose `spark:` section (master or conf) differs from the session's runs as a child process instead.
Isolated: each run is a `gobblin-py run` child process that writes its result (`--metrics-json`) to the
scheduler's private temp dir. Either way each ended run goes to the `run_listeners` (metrics, the summary).
On SIGTERM or SIGINT the scheduler stops firing, waits up to `grace_s` for the runs in progress, then cancels
or kills what is left (safe: the commit log makes a stopped run recoverable by its next run).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
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

from gobblin_py.compaction.compactor import Compactor
from gobblin_py.compaction.plan import compaction_options
from gobblin_py.config import load_job
from gobblin_py.config.model import JobSpec
from gobblin_py.cron import Cron, CronError
from gobblin_py.errors import ConfigError, GobblinError
from gobblin_py.maintenance.maintainer import Maintainer
from gobblin_py.maintenance.options import maintenance_options
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.executors.session import WarmSession, session_difference, spark_key
from gobblin_py.runtime.executors.spark import SharedSparkExecutor
from gobblin_py.runtime.job_result import JobResult
from gobblin_py.runtime.runner import JobRunner

log = logging.getLogger(__name__)

CANCEL_WAIT_S = 30.0  # after the grace: how long cancelled runs get to record themselves before the session stops


@dataclass
class InThreadRun:
    """A warm run: the thread running it, and what it ended with."""

    thread: threading.Thread
    exit_code: int = 0
    result: JobResult | None = None

    def job_finished(self, result: JobResult) -> None:  # a run observer: the result even of a run that raised
        self.result = result


@dataclass
class ScheduledJob:
    path: Path
    name: str
    work_dir: str | Path
    """Where the job's records live (`job.records_root`)."""
    cron: Cron
    next_fire: dt.datetime
    running: subprocess.Popen[bytes] | None = None  # a run as a child process
    in_thread: InThreadRun | None = None  # a run in the scheduler's process
    started: float = 0.0  # time.monotonic() of the running run's start
    runs: int = 0
    skipped: int = 0
    exit_codes: list[int] = field(default_factory=list)
    as_child: bool | None = None  # warm mode: whether its last run went to a child (its spark: section differs)
    command: str = "run"  # or `compact` (`<job>:compact`, on compaction.schedule), `maintain` (`<job>:maintain`)

    @property
    def busy(self) -> bool:
        return self.running is not None or self.in_thread is not None


@dataclass(frozen=True)
class RunEnded:
    """One scheduled run that finished: its exit code, wall time, and its result (`JobResult.to_json()`), which is
    None when the run left none (it crashed, was killed, or its job file could not be read). `job_result` is the
    JobResult itself for a run in the scheduler's process (a child prints its own summary)."""

    job: ScheduledJob
    exit_code: int
    wall_s: float
    result: dict[str, Any] | None
    job_result: JobResult | None = None


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


class _JobNames(logging.Filter):
    """Prefixes the log lines of a warm run (its thread is `run:<job>`) with the job's name: runs log side by side."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.threadName.startswith("run:") and not getattr(record, "gobblin_job", None):
            record.gobblin_job = record.threadName[4:]
            record.msg = f"[{record.gobblin_job.replace('%', '%%')}] {record.msg}"
        return True


class Scheduler:
    """Fires scheduled jobs until stopped: on a shared Spark session (warm), or as child processes (`isolated`);
    `in_process` runs tasks without Spark (in the scheduler's threads, or passed on to the children)."""

    def __init__(self, paths: list[Path], grace_s: float = 300.0, isolated: bool = False, in_process: bool = False) -> None:
        self.grace_s = grace_s
        self.isolated = isolated
        self.in_process = in_process
        self._stop = threading.Event()
        now = dt.datetime.now()
        self.jobs: list[ScheduledJob] = []
        specs: list[JobSpec] = []
        for path in job_files(paths):
            job = load_job(path)
            if not job.job.schedule and not job.compaction.schedule and not job.maintenance.schedule:
                log.info("%s has no job.schedule: not scheduled (run it with `gobblin-py run`)", path)
                continue
            for command, key, text in (("run", "job.schedule", job.job.schedule), ("compact", "compaction.schedule", job.compaction.schedule),
                                       ("maintain", "maintenance.schedule", job.maintenance.schedule)):
                if not text:
                    continue
                cron = Cron.parse(text)
                try:
                    first = cron.next_after(now)
                except CronError as exc:
                    raise ConfigError(f"{path}: {key}: {exc}") from None
                name = job.name if command == "run" else f"{job.name}:{command}"
                self.jobs.append(ScheduledJob(path, name, job.job.records_root, cron, first, command=command))
                specs.append(job)
        names = [j.name for j in self.jobs]
        dupes = {n for n in names if names.count(n) > 1}
        if dupes:
            raise ConfigError(f"job name(s) {', '.join(sorted(dupes))} are scheduled from several files; job names must be unique")
        # the shared session takes the first scheduled job's spark: section; a job whose section differs runs as a child
        self.session_spark = spark_key(specs[0]) if specs else None
        self.session_from = self.jobs[0].path if self.jobs else None
        self.session = WarmSession(sorted({str(j.path.parent.resolve()) for j in self.jobs} | {os.getcwd()}))
        self.run_listeners: list[Callable[[RunEnded], None]] = []
        self._results: Path | None = None  # while running: a private temp dir for each child's --metrics-json
        self.abandoned: list[str] = []  # after run_forever(): runs still going when it returned (the caller exits hard)
        for j, job in zip(self.jobs, specs):
            self._note_mode(j, job)

    def stop(self, *_: object) -> None:
        self._stop.set()

    def run_forever(self) -> int:
        """Fire jobs on time until `stop()` (or SIGTERM/SIGINT); returns the exit code for the scheduler."""
        if not self.jobs:
            log.error("no job with job.schedule, compaction.schedule or maintenance.schedule among the files given")
            return 2
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self.stop)
            signal.signal(signal.SIGINT, self.stop)
        for j in self.jobs:
            log.info("scheduled %s (%s): next run at %s", j.name, j.cron.text, j.next_fire.isoformat(timespec="seconds"))
        self._results = Path(tempfile.mkdtemp(prefix="gobblin-py-schedule-"))
        names = _JobNames()
        handlers = list(logging.getLogger().handlers)
        for h in handlers:
            h.addFilter(names)
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
            for h in handlers:
                h.removeFilter(names)
            shutil.rmtree(self._results, ignore_errors=True)

    def _result_file(self, j: ScheduledJob) -> Path:
        assert self._results is not None, "only while run_forever() runs"
        return self._results / f"{j.name}.json"

    def _note_mode(self, j: ScheduledJob, job: JobSpec) -> bool:
        """Whether this run of the job goes to a child; logged when that changes (at start, or as its file changes)."""
        as_child = not self.isolated and not self.in_process and spark_key(job) != self.session_spark
        if as_child != j.as_child and not self.isolated and not self.in_process:
            if as_child:
                assert self.session_spark is not None
                log.warning("%s: its spark: section differs from the shared session's (that of %s) in %s: its runs are "
                            "`gobblin-py run` children, each starting Spark", j.name, self.session_from,
                            session_difference(spark_key(job), self.session_spark))
            elif j.as_child is not None:
                log.info("%s: its spark: section matches the shared session's again: its runs use the session", j.name)
        j.as_child = as_child
        return as_child

    def _fire(self, j: ScheduledJob, now: dt.datetime) -> None:
        try:
            j.next_fire = j.cron.next_after(now)
        except CronError:  # a year field that has passed: this is the last run
            j.next_fire = dt.datetime.max
            log.info("%s (%s): this is its last firing, its schedule has no later time", j.name, j.cron.text)
        if j.busy:
            j.skipped += 1
            how = f"pid {j.running.pid}" if j.running is not None else "in this process"
            log.warning("%s is still running (%s): this firing is skipped; next at %s", j.name, how,
                        j.next_fire.isoformat(timespec="seconds"))
            return
        j.runs += 1
        j.started = time.monotonic()
        if self.isolated:
            self._start_child(j)
            return
        try:  # the job file is read again at each firing, as a child would
            job = load_job(j.path)
        except GobblinError as exc:
            log.error("%s run %d: %s", j.name, j.runs, exc)
            self._ended(j, exc.exit_code, None)
            return
        except Exception:  # noqa: BLE001 - a plugin's import may raise anything: this run fails, the others go on
            log.exception("%s run %d: reading %s failed", j.name, j.runs, j.path)
            self._ended(j, 4, None)
            return
        if self._note_mode(j, job):
            self._start_child(j)
            return
        run = InThreadRun(threading.Thread(target=self._run_in_thread, args=(j, job), name=f"run:{j.name}", daemon=True))
        j.in_thread = run
        run.thread.start()
        log.info("started %s run %d; next at %s", j.name, j.runs, j.next_fire.isoformat(timespec="seconds"))

    def _start_child(self, j: ScheduledJob) -> None:
        self._result_file(j).unlink(missing_ok=True)
        how = ["--yes"] if j.command == "maintain" else ["--in-process"] if self.in_process else []  # maintain: in-process
        cmd = [sys.executable, "-m", "gobblin_py.cli.main", j.command, str(j.path), "--quiet",
               "--metrics-json", str(self._result_file(j)), *how]
        j.running = subprocess.Popen(cmd)
        log.info("started %s run %d (pid %d); next at %s", j.name, j.runs, j.running.pid, j.next_fire.isoformat(timespec="seconds"))

    def _run_in_thread(self, j: ScheduledJob, job: JobSpec) -> None:
        """One warm run; whatever it raises ends this run only (exit codes as `gobblin-py run` would give)."""
        run = j.in_thread
        assert run is not None
        try:
            in_process = self.in_process or j.command == "maintain"  # maintenance runs no tasks
            executor = InProcessExecutor() if in_process else SharedSparkExecutor(job, warm=self.session)
            if j.command == "maintain":
                succeeded = Maintainer(JobRunner(job, executor, [run])).run(maintenance_options(job), apply=True).succeeded
            elif j.command == "compact":
                report = Compactor(JobRunner(job, executor, [run])).run(compaction_options(job))
                succeeded = report.succeeded
            else:
                succeeded = JobRunner(job, executor, [run]).run().succeeded
            run.exit_code = 0 if succeeded else 1
        except GobblinError as exc:  # the lock is held by another run, or the session could not start
            log.error("%s run %d: %s", j.name, j.runs, exc)
            run.exit_code = exc.exit_code
        except KeyboardInterrupt:
            log.warning("%s run %d was cancelled; its next run recovers any pending commit", j.name, j.runs)
            run.exit_code = 130
        except BaseException as exc:  # noqa: BLE001 - a bug or a JVM error fails this run, never the scheduler
            log.error("%s run %d failed with an internal error %s: %s", j.name, j.runs, type(exc).__name__, exc, exc_info=True)
            run.exit_code = 4

    def _reap(self, j: ScheduledJob) -> None:
        if j.running is not None and j.running.poll() is not None:
            code = j.running.returncode
            j.running = None
            self._ended(j, code, self._read_result(j))
        elif j.in_thread is not None and not j.in_thread.thread.is_alive():
            run, j.in_thread = j.in_thread, None
            self._ended(j, run.exit_code, run.result.to_json() if run.result else None, run.result)

    def _ended(self, j: ScheduledJob, code: int, result: dict[str, Any] | None, job_result: JobResult | None = None) -> None:
        j.exit_codes.append(code)
        (log.info if code == 0 else log.error)("%s run %d finished with exit code %d", j.name, j.runs, code)
        ended = RunEnded(j, code, time.monotonic() - j.started, result, job_result)
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
        running = [j for j in self.jobs if j.busy]
        if running:
            log.info("stopping: waiting up to %.0f s for %s", self.grace_s, ", ".join(j.name for j in running))
        deadline = time.monotonic() + self.grace_s
        for j in running:
            if j.running is not None:
                try:
                    j.running.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    log.warning("%s did not finish in time: killed; its next run recovers any pending commit", j.name)
                    j.running.kill()
                    j.running.wait()
            elif j.in_thread is not None:
                j.in_thread.thread.join(timeout=max(0.0, deadline - time.monotonic()))
        late = [j for j in running if j.in_thread is not None and j.in_thread.thread.is_alive()]
        if late:
            log.warning("%s did not finish in time: cancelled; the next run recovers any pending commit",
                        ", ".join(j.name for j in late))
            self.session.cancel_all()
            cancel_deadline = time.monotonic() + CANCEL_WAIT_S
            for j in late:
                assert j.in_thread is not None
                j.in_thread.thread.join(timeout=max(0.0, cancel_deadline - time.monotonic()))
        self.abandoned = [j.name for j in late if j.in_thread is not None and j.in_thread.thread.is_alive()]
        for j in running:
            self._reap(j)
        self.session.stop()
        if self.abandoned:
            log.warning("%s still running after the cancel: stopped with the scheduler; the next run recovers any "
                        "pending commit", ", ".join(self.abandoned))
        log.info("scheduler stopped")
        return 0
