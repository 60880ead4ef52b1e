"""The job flow: lock → recover pending commits → plan → run tasks → publish per dataset → state → cleanup →
unlock. What publishing a dataset means lives in `runtime.publish`."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from gobblin_py.api import Delivery, Source, flatten
from gobblin_py.commit.confinement import job_confinement
from gobblin_py.commit.guard import JobGuard
from gobblin_py.commit.recovery import DatasetRecovery, Outcome
from gobblin_py.commit.store import CommitStepStore
from gobblin_py.config.model import JobSpec
from gobblin_py.errors import ConfigError, GobblinError, JobLockedError, StateStoreError, UnreachableError, describe
from gobblin_py.fs import Location, filesystem_for
from gobblin_py.runtime.executors.base import TaskExecutor
from gobblin_py.runtime.job_result import DatasetStatus, DatasetSummary, JobResult, conclude
from gobblin_py.runtime.observers import Observers
from gobblin_py.runtime.planning import Plan, committed_state, plan
from gobblin_py.runtime.publish import PublishPath, step_registry
from gobblin_py.runtime.resume import resume_from_targets
from gobblin_py.runtime.task.results import TasksCancelled, TaskStatus, WorkUnitResult
from gobblin_py.runtime.task.spec import TaskSpec
from gobblin_py.state.alerts import FailureTracker
from gobblin_py.state.events import EventLog
from gobblin_py.state.lease import Lease
from gobblin_py.state.store import StateStore

__all__ = ["DatasetStatus", "DatasetSummary", "JobResult", "JobRunner", "new_run_id", "step_registry"]

log = logging.getLogger(__name__)


def _warm_up(job: JobSpec) -> None:
    """The source's `warm_up` (its tasks' imports), on its own thread: best effort, a failure only logged."""
    try:
        job.source.create().warm_up()
    except Exception:  # noqa: BLE001 - best effort by contract: the task's own import reports what is missing
        log.debug("source %s: warming up its tasks' imports failed", job.source.label, exc_info=True)


def new_run_id() -> str:
    """Sortable by start time, unique across hosts."""
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ") + "-" + uuid.uuid4().hex[:6]


class JobRunner:
    """Runs one job once; every outcome ends in a JobResult, and the state says what was committed."""

    def __init__(self, job: JobSpec, executor: TaskExecutor, observers: list[Any] | None = None) -> None:
        self.job = job
        self.executor = executor
        self.events = EventLog(job.job.records_root, job.name)
        self.observe = Observers([self.events, *(observers or [])])
        work = job.job.records_root
        self.store = CommitStepStore(work, step_registry(job), job_confinement(job))
        self.state = StateStore(work, job.name)
        self.publishing = PublishPath(job, executor, self.store, self.state)
        self.continuous = False  # a continuous run: one line per checkpoint, its planning and tasks at DEBUG
        self.force_takeover = False  # take the job's lease even while another driver's is live (`run --force-takeover`)
        self._claimed = False  # the publishers' targets checked for this work directory (once per runner)
        self._warmed = False  # the source's warm_up started (once per runner)
        self._warming: threading.Thread | None = None  # joined before the run ends: an import cut off by the
        # interpreter's exit aborts it (PyGILState_Release while finalizing)
        self.lease: Lease | None = None  # the job's lease while a run holds it

    def run(self) -> JobResult:
        """One bounded run."""
        return self.held(self.checkpoint)

    def held(self, body: Callable[[JobResult], None]) -> JobResult:
        """`body` under the job lock, filling a new run's result: a GobblinError ends in its `error`, Ctrl-C in a
        cancelled result (raised again); the run is persisted, counted for alerts and reported either way."""
        job = self.job
        started_at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        t0 = time.monotonic()
        result = JobResult(job=job.name, run_id=new_run_id(), succeeded=False, started=started_at, duration_s=0.0)
        with contextlib.ExitStack() as held:
            try:
                guard = held.enter_context(JobGuard(job, result.run_id, self.store, force_takeover=self.force_takeover))
                self.lease = guard.lease
                held.callback(setattr, self, "lease", None)
            except JobLockedError as exc:
                self.events.emit("LockInUse", error=str(exc))
                raise
            if guard.lease is not None:
                result.lease_epoch = guard.lease.epoch
                before = guard.lease.taken_from
                if before is not None and not before.released and not before.owner.dead_here():
                    result.took_over = before.describe()
                    log.warning("job %s: took over the lease of %s (now epoch %d)", job.name, before.describe(),
                                guard.lease.epoch)
                    self.events.emit("LeaseTakenOver", previous=before.describe(), epoch=guard.lease.epoch)
            if job.job.lock:  # no other run of the job is live: one whose record says running was killed
                killed = self.state.end_unfinished_run(result.run_id)
                if killed is not None:
                    log.warning("run %s of job %s ended without finishing its record (killed?): recorded as killed; "
                                "its commits are recovered now", killed, job.name)
            result.job_file = job.source_file
            other = self._other_job_file()
            if other is not None:
                result.warnings.append(
                    f"job {job.name!r} was last run from {other}, this run from {job.source_file}: both keep their "
                    f"state under {self.state.dir} (`job.name` and `job.work_dir` key the state); if they are two jobs, "
                    "give this one its own job.name")
                log.warning("%s", result.warnings[-1])
            log.info("job %s run %s started", job.name, result.run_id)
            self.observe.job_started(job.name, result.run_id)
            result.running = True  # its record says `running` until the run ends, however it ends (a kill: `killed`
            self.persist(result)   # once the next run holds the lock), so history and status show a run under way
            try:
                body(result)
            except GobblinError as exc:
                # an unreachable service before any task (planning) says what to check, as a task's give-up does
                result.error = f"{exc} {exc.remedy}" if isinstance(exc, UnreachableError) else str(exc)
                result.bad_config = isinstance(exc, ConfigError)  # found only now (a table's columns): exit 2, as validate
                log.error("%s", result.error)
            except (KeyboardInterrupt, BrokenPipeError) as exc:  # Ctrl-C, SIGINT, or the reader of our output gone
                result.cancelled = True     # (Ctrl-C in `run … | tee log` ends tee first): cancelled, not a failure
                committed = [d.dataset for d in result.datasets if d.status in (DatasetStatus.COMMITTED, DatasetStatus.PARTIAL)]
                result.error = f"interrupted after committing {', '.join(committed)}" if committed else \
                    "interrupted before any dataset was committed"
                if isinstance(exc, BrokenPipeError):
                    result.error += " (the output pipe was closed)"
                    raise KeyboardInterrupt from None
                raise
            except Exception as exc:  # a bug or a lost Spark JVM: the record says what, the caller reports it
                result.error = f"internal error: {describe(exc)}"
                raise
            finally:
                if self._warming is not None:
                    self._warming.join()
                    self._warming = None
                result.running = False
                result.duration_s = time.monotonic() - t0
                self.persist(result)
                if not result.cancelled:
                    self._count_for_alerts(result)
                self.observe.job_finished(result)
        return result

    def checkpoint(self, result: JobResult) -> None:
        """A bounded run's body, under the lock: recover, plan from the committed watermarks, run the tasks,
        publish each dataset, clean up; a continuous run calls it once per checkpoint."""
        phases = _Phases(result.phases, self.executor)
        if not self._warmed:  # the tasks' imports, while this thread recovers and plans (a driver's, a native reader's)
            self._warming = threading.Thread(target=_warm_up, args=(self.job,), name="warm-up")
            self._warming.start()
            self._warmed = True
        start_early = getattr(self.executor, "start_early", None)
        if start_early is not None and self._last_run_on_spark():
            start_early()
        if not self._claimed:  # a target another work directory publishes this job to is refused before anything
            self.publishing.claim(make=False)
            self._claimed = True
        result.recovery = self.publishing.recover()
        blocked = dict(result.recovery.blocked)
        for rec in blocked.values():
            log.error("dataset %s is %s and is skipped this run: %s", rec.dataset, rec.outcome.value, rec.message)
        for rec in result.recovery.maintenance_pending.values():  # names no dataset: every dataset runs
            log.warning("maintenance record %s is still pending (%s; it blocks no dataset; `gobblin-py recover JOB.yaml "
                        "--dataset %s` or the next `maintain` completes it): %s", rec.dataset, rec.outcome.value,
                        rec.dataset, rec.message)
        self.clean_orphans(current=result.run_id)
        phases.end("recovery")

        if self.job.dead_letter is not None:  # no range is read whose bad records could not be delivered
            self.job.dead_letter.create().check()
        planned = self._plan(blocked)
        phases.end("planning")

        try:
            result.tasks = self._run_tasks(result.run_id, planned)
        except TasksCancelled as exc:  # the run's record lists every task as it ended
            result.tasks = exc.results
            raise
        phases.end("tasks")

        result.datasets = self.publishing.publish(result.run_id, result.tasks, planned, blocked)
        for summary in result.datasets:
            if summary.workunits:
                self.observe.dataset_committed(summary)
            for problem in summary.input_problems:
                log.error("dataset %s: %s", summary.dataset, problem)
            for note in summary.notices:
                log.warning("dataset %s: %s", summary.dataset, note)
        self._after_commit()
        phases.end("commit")
        if self.store.fence is not None:  # a driver that lost its lease leaves its run's files to the holder
            self.store.fence.check()
        self.clean_run(result.run_id)
        phases.end("cleanup")  # every second of a run is in a phase: 50,000 tasks' directories take a while
        conclude(result)

    def _after_commit(self) -> None:
        """The source's `committed` hook, once this run's commits (and those recovery finished) are durable: best
        effort, outside every commit sequence, so its failure is a warning and an event, never a failed or blocked
        commit."""
        source = self.job.source
        if source.cls().committed is Source.committed:
            return
        try:
            source.create().committed(committed_state(self.job, self.state).source_state)
        except Exception as exc:  # noqa: BLE001 - best effort by contract: the run's outcome is its commits'
            log.warning("source %s: after the commit: %s (the committed watermarks are unaffected)", source.label, describe(exc))
            self.events.emit("AfterCommitFailed", source=source.label, error=describe(exc))

    def _other_job_file(self) -> str | None:
        """The job file the job's last run was loaded from, when it is another file than this run's (a copied job
        file that kept the name shares the original's state); None when the same, or not recorded."""
        try:
            last = self.state.last_run()
        except StateStoreError:
            return None  # an unreadable record predicts nothing; `history` names it
        before = (last or {}).get("job_file")
        return before if before and before != self.job.source_file else None

    def _last_run_on_spark(self) -> bool:
        """Whether the job's last run waited for Spark to start (its record has an executor_start phase)."""
        try:
            last = self.state.last_run()
        except StateStoreError:
            return False  # an unreadable record predicts nothing; `history` names it
        return bool(last and (last.get("phases") or {}).get("executor_start"))

    def _plan(self, blocked: dict[str, DatasetRecovery]) -> Plan:
        """The Source's work units, minus blocked datasets; a dataset whose watermark or state file is unreadable joins them."""
        planned = plan(self.job, self.state, skip=set(blocked))
        lost = {wu.dataset for wu in planned.workunits} - set(self.state.dataset_names()) - set(blocked)
        resumed = resume_from_targets(self.job, self.state, lost)
        for dataset, exc in resumed.refused.items():  # its table holds the job's data but cannot say where it was
            log.error("dataset %s is skipped this run: %s", dataset, exc)
            blocked[dataset] = DatasetRecovery(dataset, Outcome.CORRUPT, str(exc))
        if resumed.notices or resumed.refused:  # plan again from the watermarks the tables gave, without those refused
            planned = plan(self.job, self.state, skip=set(blocked))
            for dataset, notice in resumed.notices.items():
                planned.notices.setdefault(dataset, []).append(notice)
        for dataset, exc in planned.unreadable.items():  # an unreadable watermark or state file blocks its dataset only
            log.error("dataset %s is skipped this run: %s", dataset, exc)
            blocked[dataset] = DatasetRecovery(dataset, Outcome.CORRUPT, str(exc))
        workunits = flatten(planned.units)
        log.log(logging.DEBUG if self.continuous else logging.INFO,
                "planned %d work units in %d tasks", len(workunits), len(planned.units))
        self.observe.workunits_created(len(workunits), len(planned.units), sorted({w.dataset for w in workunits}))
        return planned

    def _run_tasks(self, run_id: str, planned: Plan) -> list[WorkUnitResult]:
        """One task per planned unit on the executor (Spark starts only when there is work); each result reported."""
        suffix = f".{run_id}" if self.job.job.delivery is Delivery.AT_LEAST_ONCE else ""
        tasks = [TaskSpec(job=self.job, run_id=run_id, unit=u, file_suffix=suffix, estimated_bytes=planned.estimate(u),
                          native_share=planned.native_share(u)) for u in planned.units]
        try:
            results = self.executor.run(tasks, self.observe.tasks_progress) if tasks else []
        except TasksCancelled as exc:  # those finished reported, the others listed as cancelled
            for r in exc.results:
                self.observe.task_finished(r)
            done = {r.workunit.id for r in exc.results}
            raise TasksCancelled(exc.results + [
                WorkUnitResult(workunit=wu, status=TaskStatus.CANCELLED, attempts=0,
                               error="the run was interrupted before this task's result reached the driver")
                for wu in planned.workunits if wu.id not in done]) from None
        for r in results:
            self.observe.task_finished(r)
            if r.status is TaskStatus.FAILED:
                log.error("task %s (dataset %s) failed after %d attempt(s): %s", r.workunit.id, r.workunit.dataset, r.attempts, r.error)
        return results

    def _pending_runs(self) -> set[str]:
        runs = set()
        for dataset in self.store.datasets(self.job.name):
            try:
                runs.add(self.store.get(self.job.name, dataset).run_id)
            except GobblinError:
                return {"*"}  # an unreadable record may refer to any run: keep everything
        return runs

    def clean_run(self, run_id: str) -> None:
        """Delete this run's staging and task output unless a pending sequence refers to them."""
        if run_id in self._pending_runs():
            return
        shutil.rmtree(self.job.job.job_staging / run_id, ignore_errors=True)
        root = self.job.job.job_task_output
        filesystem_for(root).rmtree(root / run_id)

    def clean_orphans(self, current: str) -> None:
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
            log.error("could not update the failure count of %s in %s: %s", self.job.name, self.state.dir, exc)
            return
        if sent:
            self.events.emit("AlertSent", alert=sent)

    def persist(self, result: JobResult) -> None:
        """Write the run's record to the state store's history (a continuous run rewrites it after each checkpoint)."""
        try:
            self.state.write_run(result.to_json(), self.job.job.retention_runs)
        except (OSError, GobblinError) as exc:
            log.error("could not write the run state of %s in %s: %s", result.run_id, self.state.dir, exc)


class _Phases:
    """Seconds per phase of a run; the wait for the executors to start is its own phase, taken out of the
    phase that waited (recovery or tasks)."""

    def __init__(self, phases: dict[str, float], executor: TaskExecutor) -> None:
        self.phases, self.executor = phases, executor
        self.clock = time.monotonic()
        self.first = self.startup = float(executor.startup_s)  # a warm executor (a continuous run's) waited before

    def end(self, name: str) -> None:
        now = time.monotonic()
        startup = float(self.executor.startup_s)
        self.phases[name] = now - self.clock - (startup - self.startup)
        if startup > self.first:
            self.phases["executor_start"] = startup - self.first
        self.clock, self.startup = now, startup
