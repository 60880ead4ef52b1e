"""The job flow: lock → recover pending commits → plan → run tasks → commit per dataset → state → cleanup → unlock."""

from __future__ import annotations

import contextlib
import datetime as dt
import enum
import logging
import shutil
import time
import uuid
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from gobblin_py.api import Delivery, TaskCounter, flatten
from gobblin_py.commit.committer import build_sequence
from gobblin_py.commit.confinement import job_confinement
from gobblin_py.commit.distributed import commit_on_executors, default_groups, recover_on_executors, use_executors
from gobblin_py.commit.protocol import commit_sequence, publish_without_log
from gobblin_py.commit.recovery import DatasetRecovery, Outcome, RecoveryReport, recover
from gobblin_py.commit.sequence import CommitSequence
from gobblin_py.commit.store import CommitStepStore, StepRegistry
from gobblin_py.config.model import CommitPolicy, JobSpec
from gobblin_py.errors import CommitError, GobblinError, JobError, JobLockedError
from gobblin_py.fs import Location, filesystem_for
from gobblin_py.runtime.executors import TaskExecutor
from gobblin_py.runtime.observers import Observers
from gobblin_py.runtime.planning import plan
from gobblin_py.runtime.results import TaskStatus, WorkUnitResult
from gobblin_py.runtime.task import TaskSpec
from gobblin_py.state.alerts import FailureTracker
from gobblin_py.state.events import EventLog
from gobblin_py.state.lock import JobLock
from gobblin_py.state.store import StateStore, WatermarkFile

log = logging.getLogger(__name__)


class DatasetStatus(str, enum.Enum):
    COMMITTED = "committed"
    PARTIAL = "committed (partial)"   # commit_policy successful: some tasks failed
    NOT_COMMITTED = "not committed"   # a task failed under commit_policy full
    COMMIT_FAILED = "commit failed"   # the sequence is pending; the next run recovers it
    BLOCKED = "blocked"               # a pending sequence could not be recovered: not extracted
    NO_NEW_DATA = "no new data"


@dataclass
class DatasetSummary:
    dataset: str
    status: DatasetStatus
    workunits: int = 0
    records_extracted: int = 0
    records_written: int = 0
    records_rejected: int = 0
    files_published: int = 0
    error_files: int = 0
    watermark: str = ""
    message: str = ""
    input_problems: list[str] = field(default_factory=list)  # reported by the source; the run exits 1
    counters: dict[str, dict[str, Any]] = field(default_factory=dict)  # what plugins counted (e.g. unknown fields dropped)


@dataclass
class JobResult:
    job: str
    run_id: str
    succeeded: bool
    started: str
    duration_s: float
    datasets: list[DatasetSummary] = field(default_factory=list)
    tasks: list[WorkUnitResult] = field(default_factory=list)
    recovery: RecoveryReport = field(default_factory=RecoveryReport)
    error: str | None = None
    phases: dict[str, float] = field(default_factory=dict)  # seconds: recovery, planning, tasks, commit
    cancelled: bool = False  # interrupted (Ctrl-C, SIGINT): what was committed stays, the rest is redone next run

    @property
    def status(self) -> str:
        return "cancelled" if self.cancelled else "succeeded" if self.succeeded else "failed"

    def metrics(self) -> dict[str, Any]:
        """Job-level counters, as Gobblin counts them, summed over the tasks."""
        rejected: dict[str, int] = {}
        for t in self.tasks:
            for check, n in t.rejected.items():
                rejected[check] = rejected.get(check, 0) + n
        written = sum(t.records_written for t in self.tasks)
        tasks_s = self.phases.get("tasks", 0.0)
        return {
            "workunits": len(self.tasks),
            "tasks_failed": sum(1 for t in self.tasks if t.status.value == "failed"),
            "task_attempts": sum(t.attempts for t in self.tasks),
            "records_extracted": sum(t.records_extracted for t in self.tasks),
            "records_written": written,
            "records_rejected": sum(rejected.values()),
            "rejected_by_check": rejected,
            "bytes_written": sum(b.bytes_written for t in self.tasks for b in t.branches.values()),
            "files_published": sum(d.files_published for d in self.datasets),
            "records_per_s": round(written / tasks_s) if tasks_s > 0 else None,
            "counters": _sum_counters(self.tasks),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job, "run_id": self.run_id, "status": self.status,
            "started": self.started, "duration_s": round(self.duration_s, 3), "error": self.error,
            "phases": {k: round(v, 3) for k, v in self.phases.items()},
            "metrics": self.metrics(),
            "datasets": [{**vars(d), "status": d.status.value} for d in self.datasets],
            "recovered": [vars(r) | {"outcome": r.outcome.value} for r in self.recovery.datasets],
            "tasks": [t.to_json() for t in self.tasks],
        }


def _sum_counters(results: list[WorkUnitResult]) -> dict[str, dict[str, Any]]:
    """Plugins' task counters summed over `results`, as JSON."""
    return {n: c.to_json() for n, c in TaskCounter.sum(r.counters for r in results).items()}


def new_run_id() -> str:
    """Sortable by start time, unique across hosts."""
    return dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ") + "-" + uuid.uuid4().hex[:6]


def step_registry(job: JobSpec) -> StepRegistry:
    """Built-in steps plus every step class the job's publishers declare."""
    return StepRegistry(t for b in job.branches for t in b.publisher.cls().step_types)


def _watermark_summary(before: dict, after: dict) -> str:
    """`0=120 1=98` for a few keys (Kafka partitions), `12 keys (+3)` for many (files)."""
    if 0 < len(after) <= 4:
        return " ".join(f"{k}={v}" for k, v in sorted(after.items()))
    grown = len(after) - len(before)
    return f"{len(after)} keys" + (f" (+{grown})" if grown else "")


class JobRunner:
    """Runs one job once; every outcome ends in a JobResult, and the state says what was committed."""

    def __init__(self, job: JobSpec, executor: TaskExecutor, observers: list[Any] | None = None) -> None:
        self.job = job
        self.executor = executor
        self.events = EventLog(job.job.work_dir, job.name)
        self.observe = Observers([self.events, *(observers or [])])
        work = job.job.work_dir
        self.store = CommitStepStore(work, step_registry(job), job_confinement(job))
        self.state = StateStore(work, job.name)

    def run(self) -> JobResult:
        job = self.job
        run_id = new_run_id()
        started_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        t0 = time.monotonic()
        result = JobResult(job=job.name, run_id=run_id, succeeded=False, started=started_at, duration_s=0.0)
        with contextlib.ExitStack() as held:
            try:
                held.enter_context(JobLock(job.job.work_dir, job.name, job.job.lock))
            except JobLockedError as exc:
                self.events.emit("LockInUse", error=str(exc))
                raise
            log.info("job %s run %s started", job.name, run_id)
            self.observe.job_started(job.name, run_id)
            try:
                self._run_locked(result)
            except GobblinError as exc:
                result.error = str(exc)
                log.error("%s", exc)
            except KeyboardInterrupt:  # Ctrl-C or SIGINT: recorded as cancelled, not as a failure for alerts
                result.cancelled = True
                result.error = "interrupted" + (f" after committing {', '.join(committed)}" if (committed := [
                    d.dataset for d in result.datasets if d.status in (DatasetStatus.COMMITTED, DatasetStatus.PARTIAL)]) else
                    " before any dataset was committed")
                raise
            finally:
                result.duration_s = time.monotonic() - t0
                self._persist_run(result)
                if not result.cancelled:
                    self._count_for_alerts(result)
                self.observe.job_finished(result)
        return result

    def _run_locked(self, result: JobResult) -> None:
        job = self.job
        clock = time.monotonic()

        def phase(name: str) -> None:
            nonlocal clock
            now = time.monotonic()
            result.phases[name] = now - clock
            clock = now

        result.recovery = self._recover()
        blocked = dict(result.recovery.blocked)
        for rec in blocked.values():
            log.error("dataset %s is %s and is skipped this run: %s", rec.dataset, rec.outcome.value, rec.message)
        self._clean_orphans(current=result.run_id)
        phase("recovery")
        started_for_recovery = float(getattr(self.executor, "startup_s", 0.0))
        result.phases["recovery"] -= started_for_recovery

        planned = plan(job, self.state, skip=set(blocked))
        previous, units = planned.previous, planned.units
        for dataset, exc in planned.unreadable.items():  # an unreadable watermark file blocks its dataset only
            log.error("dataset %s is skipped this run: %s", dataset, exc)
            blocked[dataset] = DatasetRecovery(dataset, Outcome.CORRUPT, str(exc))
        workunits = flatten(units)
        log.info("planned %d work units in %d tasks", len(workunits), len(units))
        self.observe.workunits_created(len(workunits), len(units), sorted({w.dataset for w in workunits}))
        phase("planning")

        suffix = f".{result.run_id}" if job.job.delivery is Delivery.AT_LEAST_ONCE else ""
        tasks = [TaskSpec(job=job, run_id=result.run_id, unit=u, file_suffix=suffix) for u in units]
        results = self.executor.run(tasks, self.observe.tasks_progress) if tasks else []  # Spark starts only when there is work
        result.tasks = results
        for r in results:
            self.observe.task_finished(r)
        phase("tasks")
        startup = float(getattr(self.executor, "startup_s", 0.0))
        if startup:
            result.phases["executor_start"] = startup
            result.phases["tasks"] -= startup - started_for_recovery
        for r in results:
            if r.status is TaskStatus.FAILED:
                log.error("task %s (dataset %s) failed after %d attempt(s): %s", r.workunit.id, r.workunit.dataset, r.attempts, r.error)

        by_dataset: dict[str, list[WorkUnitResult]] = defaultdict(list)
        for r in results:
            by_dataset[r.workunit.dataset].append(r)
        problems = planned.input_problems
        datasets = sorted(set(by_dataset) | set(previous) | set(problems))
        plans = {d: self._plan_dataset(result.run_id, d, by_dataset[d], previous.get(d, {})) for d in by_dataset}
        outcomes = self._commit_all([seq for _, seq in plans.values() if seq is not None])
        summaries: dict[str, DatasetSummary] = {}
        for dataset, (summary, seq) in plans.items():
            if seq is not None:
                error = outcomes.get(dataset)
                if error is not None:
                    summary.status, summary.message = DatasetStatus.COMMIT_FAILED, error
                    summary.files_published = summary.error_files = 0
                else:
                    summary.watermark = _watermark_summary(previous.get(dataset, {}), WatermarkFile(self.state.dir, dataset).read())
            summaries[dataset] = summary
        for dataset in datasets:
            if dataset in summaries:
                result.datasets.append(summaries[dataset])
                self.observe.dataset_committed(summaries[dataset])
            elif dataset in blocked:
                result.datasets.append(DatasetSummary(dataset, DatasetStatus.BLOCKED, message=blocked[dataset].message,
                                                      watermark=_watermark_summary(previous.get(dataset, {}), previous.get(dataset, {}))))
            else:
                result.datasets.append(DatasetSummary(dataset, DatasetStatus.NO_NEW_DATA,
                                                      watermark=_watermark_summary(previous.get(dataset, {}), previous.get(dataset, {}))))
        for dataset, rec in blocked.items():
            if dataset not in previous and dataset not in summaries:
                result.datasets.append(DatasetSummary(dataset, DatasetStatus.BLOCKED, message=rec.message))
        for summary in result.datasets:
            summary.input_problems = problems.get(summary.dataset, [])
            for problem in summary.input_problems:
                log.error("dataset %s: %s", summary.dataset, problem)
        phase("commit")
        self._clean_run(result.run_id)
        failed_tasks = any(r.status is TaskStatus.FAILED for r in results)
        bad = [d for d in result.datasets if d.status in (DatasetStatus.NOT_COMMITTED, DatasetStatus.COMMIT_FAILED, DatasetStatus.BLOCKED)]
        flagged = [d for d in result.datasets if d.input_problems]
        result.succeeded = not failed_tasks and not bad and not flagged
        if not result.succeeded and result.error is None:
            parts = [f"{d.dataset}: {d.status.value}" + (f" ({d.message})" if d.message else "") for d in bad]
            parts += [f"{d.dataset}: {'; '.join(d.input_problems)}" for d in flagged]
            if failed_tasks and not parts:
                parts.append("some tasks failed; their work units are retried next run")
            result.error = "; ".join(parts)

    def _plan_dataset(self, run_id: str, dataset: str, results: list[WorkUnitResult], before: dict) -> tuple[DatasetSummary, CommitSequence | None]:
        """Per the commit policy: the dataset's summary so far, and the sequence to commit (None: nothing to publish)."""
        job = self.job
        ok = [r for r in results if r.status is TaskStatus.SUCCEEDED]
        failed = [r for r in results if r.status is not TaskStatus.SUCCEEDED]
        summary = DatasetSummary(dataset, DatasetStatus.COMMITTED, workunits=len(results),
                                 records_extracted=sum(r.records_extracted for r in results),
                                 records_written=sum(r.records_written for r in ok),
                                 records_rejected=sum(r.records_rejected for r in ok),
                                 files_published=sum(1 for r in ok for f in r.files if f.kind == "data"),
                                 error_files=sum(1 for r in ok for f in r.files if f.kind == "errors"),
                                 watermark=_watermark_summary(before, before), counters=_sum_counters(ok))
        if failed and job.job.commit_policy is CommitPolicy.FULL:
            summary.status, summary.records_written, summary.files_published, summary.error_files = DatasetStatus.NOT_COMMITTED, 0, 0, 0
            summary.message = f"{len(failed)} of {len(results)} tasks failed (commit_policy full): {failed[0].error}"
            return summary, None
        if not ok:
            summary.status = DatasetStatus.NOT_COMMITTED
            summary.message = f"all {len(results)} tasks failed: {failed[0].error}"
            return summary, None
        if failed:
            summary.status = DatasetStatus.PARTIAL
            summary.message = f"{len(failed)} of {len(results)} tasks failed and are retried next run: {failed[0].error}"
        return summary, build_sequence(job, run_id, dataset, ok, self.state.dir)

    def _commit_local(self, seq: CommitSequence) -> str | None:
        """Log and execute one sequence in the driver; the error, or None."""
        try:
            if self.job.job.delivery is Delivery.EXACTLY_ONCE:
                commit_sequence(self.store, seq)
            else:  # at_least_once: Gobblin's classic order, publish then persist, no log
                publish_without_log(self.store.confinement, seq)
        except (CommitError, OSError) as exc:
            return str(exc)
        return None

    def _commit_all(self, sequences: list[CommitSequence]) -> dict[str, str | None]:
        """Every sequence committed: on the executors when there are many datasets and Spark is up, else in threads."""
        job = self.job
        spark_session = getattr(self.executor, "running_session", lambda: None)()
        if (spark_session is not None and job.job.delivery is Delivery.EXACTLY_ONCE
                and use_executors(len(sequences), job.job.commit_on_executors_from, spark_session.sparkContext.master)):
            sc = spark_session.sparkContext
            log.info("committing %d datasets on the executors", len(sequences))
            return commit_on_executors(sc, job.job.work_dir, tuple(self.store.registry.types()), sequences,
                                       groups=default_groups(sc), filesystems=job.job.filesystems,
                                       confinement=self.store.confinement)
        with ThreadPoolExecutor(max_workers=max(1, min(job.job.commit_parallelism, len(sequences) or 1))) as pool:
            return dict(zip((s.dataset for s in sequences), pool.map(self._commit_local, sequences)))

    def _recover(self) -> RecoveryReport:
        """Every pending sequence replayed: on the executors (Spark started for it) when as many datasets are
        pending as `_commit_all` would commit there, else in driver threads."""
        job = self.job
        settings = job.job
        count = len(self.store.datasets(job.name))
        session = self._session_for_recovery(count)
        if session is None:
            return recover(self.store, job.name, settings.commit_max_attempts, parallelism=settings.commit_parallelism)
        sc = session.sparkContext
        log.info("recovering %d datasets on the executors", count)
        return recover_on_executors(sc, settings.work_dir, tuple(self.store.registry.types()), job.name,
                                    settings.commit_max_attempts, groups=default_groups(sc), filesystems=settings.filesystems,
                                    confinement=self.store.confinement)

    def _session_for_recovery(self, pending: int) -> Any:
        """The Spark session to recover `pending` datasets on, started if need be; None: use threads."""
        running = getattr(self.executor, "running_session", lambda: None)()
        master = running.sparkContext.master if running is not None else self.job.spark.master
        if not pending or not use_executors(pending, self.job.job.commit_on_executors_from, master):
            return None
        if running is not None:
            return running
        if not hasattr(self.executor, "session"):  # in-process executor: no Spark
            return None
        try:
            session = self.executor.session()
            self.executor.check_paths()  # the executors must see the store and every file it names
        except JobError as exc:
            log.warning("recovering in the driver: %s", exc)
            return None
        return session

    def _pending_runs(self) -> set[str]:
        runs = set()
        for dataset in self.store.datasets(self.job.name):
            try:
                runs.add(self.store.get(self.job.name, dataset).run_id)
            except GobblinError:
                return {"*"}  # an unreadable record may refer to any run: keep everything
        return runs

    def _clean_run(self, run_id: str) -> None:
        """Delete this run's staging and task output unless a pending sequence refers to them."""
        if run_id in self._pending_runs():
            return
        shutil.rmtree(self.job.job.job_staging / run_id, ignore_errors=True)
        root = self.job.job.job_task_output
        filesystem_for(root).rmtree(root / run_id)

    def _clean_orphans(self, current: str) -> None:
        """Delete staging and task output of this job's earlier runs that no pending sequence refers to.

        Only this job's own directories are listed: other jobs sharing the work directory are never touched."""
        keep = self._pending_runs() | {current}
        if "*" in keep:
            return
        for root in (Location(self.job.job.job_staging), self.job.job.job_task_output):
            fs = filesystem_for(root)
            for run_dir in fs.listdir(root):
                if run_dir.name not in keep:
                    fs.rmtree(run_dir)

    def _count_for_alerts(self, result: JobResult) -> None:
        try:
            sent = FailureTracker(self.state.dir, self.job.name, self.job.job.alert).record(result.run_id, result.succeeded, result.error)
        except (OSError, GobblinError) as exc:
            log.error("could not update the failure count of %s: %s", self.job.name, exc)
            return
        if sent:
            self.events.emit("AlertSent", alert=sent)

    def _persist_run(self, result: JobResult) -> None:
        try:
            self.state.write_run(result.to_json(), self.job.job.retention_runs)
        except (OSError, GobblinError) as exc:
            log.error("could not write the run state of %s: %s", result.run_id, exc)
