"""Continuous runs (`run --continuous`, `job.mode: continuous`): one job lock and one warm executor for the whole
run, and a checkpoint every `job.checkpoint_interval` until stopped. A checkpoint is a bounded run's body
(`JobRunner.checkpoint`: recover, plan from the committed watermarks up to the source's current end, run the
tasks, publish every dataset through the same commit protocol), so each is exactly once for the same reasons and a
continuous run killed anywhere is recovered by the next run, continuous or not: FLIP-143's unbounded case, with the
checkpoint as the commit boundary. A checkpoint with no new data runs no Spark job. With `compaction.schedule`, the
job's compaction runs between checkpoints when its cron comes due, under the lock the run holds (with
`compaction.older_than`, on closed time partitions only); with `maintenance.schedule`, so does its maintenance (as
`maintain --yes` with the job file's `maintenance:` settings). A failure of either is logged and the run goes on."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from gobblin_py.compaction.compactor import CompactionReport, Compactor
from gobblin_py.compaction.plan import compaction_options
from gobblin_py.cron import Cron, CronError
from gobblin_py.errors import GobblinError, os_fault
from gobblin_py.maintenance.maintainer import Maintainer, MaintenanceReport
from gobblin_py.maintenance.options import maintenance_options
from gobblin_py.runtime.job_result import DatasetStatus, JobResult
from gobblin_py.runtime.runner import JobRunner, new_run_id

log = logging.getLogger(__name__)

KEPT_CHECKPOINTS = 500
"""Checkpoint rows kept in a run's record (the newest); the totals count them all."""


class CheckpointLoop:
    """The body of a continuous run: checkpoints until `stop` is set or too many fail in a row."""

    def __init__(self, runner: JobRunner, stop: threading.Event, after_checkpoint: Callable[[JobResult], None] | None = None) -> None:
        self.runner, self.stop, self.after = runner, stop, after_checkpoint
        settings = runner.job.job
        self.interval, self.limits = settings.checkpoint_interval, settings.continuous
        self.compaction, self.maintenance = Due(runner.job.compaction.schedule), Due(runner.job.maintenance.schedule)
        self.raised = False  # the last checkpoint ended in an error, not in a verdict on its datasets

    def __call__(self, result: JobResult) -> None:
        self.started = time.monotonic()
        result.continuous = True  # the record says `running` from the start (`JobRunner.held`) until the loop ends
        self.runner.persist(result)
        self._loop(result)

    def _loop(self, result: JobResult) -> None:
        failures, last = 0, None
        while not self.stop.is_set():
            lease = self.runner.lease
            if lease is not None and lease.lost is not None:  # taken over: every commit would be refused from now on
                result.succeeded = False
                result.error = f"{lease.lost}; the continuous run ends (the driver that took the lease over goes on)"
                log.error("%s", result.error)
                return
            started = time.monotonic()
            checkpoint = last = self._checkpoint(result, result.checkpoints_total + 1)
            # a checkpoint that only found datasets waiting out their commit backoff neither counts nor slows the next
            waited = not checkpoint.succeeded and not self.raised and _waits_only(checkpoint)
            failures = 0 if checkpoint.succeeded else failures if waited else failures + 1
            if failures >= self.limits.max_consecutive_failures:
                result.succeeded = False
                result.error = f"{failures} checkpoints failed in a row (job.continuous.max_consecutive_failures); the last: {checkpoint.error}"
                log.error("%s", result.error)
                return
            self._compact_when_due()
            self._maintain_when_due()
            wait = self.interval if not failures or waited else min(self.limits.max_backoff, self.interval * 2 ** failures)
            if failures and not waited:
                log.warning("checkpoint %d failed (%d in a row); the next in %.1fs: %s", result.checkpoints_total, failures,
                            wait, checkpoint.error)
            self.stop.wait(max(0.0, wait - (time.monotonic() - started)))
        result.succeeded = last is None or last.succeeded  # stopped: as good as its last checkpoint
        log.info("continuous run %s stopped after %d checkpoints", result.run_id, result.checkpoints_total)

    def _compact_when_due(self) -> None:
        """The job's compaction, when `compaction.schedule` has come due since the last one; its failure is logged
        and the run goes on (what it left pending is recovered by the next checkpoint)."""
        if not self.compaction.fired():
            return
        runner = self.runner
        result = _side_run(runner)
        report = CompactionReport(result)
        t0 = time.monotonic()
        try:
            Compactor(runner).compact(result, compaction_options(runner.job), report)
        except GobblinError as exc:
            result.error = str(exc)
        result.duration_s = time.monotonic() - t0
        merged = sum(p.status == "compacted" for p in report.partitions)
        (log.info if result.succeeded else log.error)("compaction %s: %d partitions compacted%s", result.run_id, merged,
                                                      f": {result.error}" if result.error else "")
        runner.events.emit("CompactionFinished", run_id=result.run_id, partitions=merged, error=result.error)
        runner.persist(result)

    def _maintain_when_due(self) -> None:
        """The job's maintenance (`maintain --yes` with its `maintenance:` settings), when `maintenance.schedule` has
        come due since the last one; its failure (an action that failed, a dataset it names not committed yet) is
        logged and the run goes on (a deletion it left pending is completed by the next checkpoint's recovery)."""
        if not self.maintenance.fired():
            return
        runner = self.runner
        result = _side_run(runner)
        report = MaintenanceReport(dry_run=False, result=result)
        t0 = time.monotonic()
        try:
            Maintainer(runner).maintain(result, maintenance_options(runner.job), report)
        except GobblinError as exc:
            result.succeeded, result.error = False, str(exc)
        except OSError as exc:
            result.succeeded, result.error = False, os_fault(exc)
        result.duration_s = time.monotonic() - t0
        deleted = sum(len(a.deletions) for a in report.actions if a.status == "done")
        refused = sum(len(a.refused) for a in report.actions)
        failed = [f"{a.action} {a.target}: {a.message}" for a in report.actions if a.status == "failed"]
        error = result.error or (failed[0] if failed else None)
        (log.info if report.succeeded else log.error)("maintenance %s: %d deletion(s) done, %d refused%s", result.run_id,
                                                      deleted, refused, f": {error}" if error else "")
        runner.events.emit("MaintenanceFinished", run_id=result.run_id, deleted=deleted, refused=refused, error=error)
        runner.persist(result)

    def _checkpoint(self, result: JobResult, n: int) -> JobResult:
        """Checkpoint `n`: a bounded run's body under its own id; its outcome folded into the run's result and saved."""
        runner = self.runner
        checkpoint = JobResult(job=result.job, run_id=f"{result.run_id}.{n:06d}", succeeded=False,
                               started=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), duration_s=0.0)
        runner.events.emit("CheckpointStarted", run_id=result.run_id, checkpoint=n)
        t0 = time.monotonic()
        self.raised = False
        try:
            runner.checkpoint(checkpoint)
        except GobblinError as exc:  # a source down, the state unreadable: this checkpoint fails, the run goes on
            self.raised, checkpoint.error = True, str(exc)
            log.error("checkpoint %d: %s", n, exc)
        except OSError as exc:  # a full or read-only work directory: so does a fault of the machine, named
            self.raised, checkpoint.error = True, os_fault(exc)
            log.error("checkpoint %d: %s", n, checkpoint.error)
        checkpoint.duration_s = time.monotonic() - t0
        row = _row(n, checkpoint)
        _fold(result, checkpoint, row)
        runner.events.emit("CheckpointCommitted" if checkpoint.succeeded else "CheckpointFailed", run_id=result.run_id,
                           checkpoint=n, records=row["records_written"], error=checkpoint.error)
        runner.observe.checkpoint_finished(result, row)
        result.duration_s = time.monotonic() - self.started
        runner.persist(result)
        if self.after is not None:
            self.after(result)
        return checkpoint


class Due:
    """A cron schedule between checkpoints: `fired()` once each time it has come due, then waits for its next time
    (none after the last: a year field that has passed)."""

    def __init__(self, schedule: str | None) -> None:
        self.cron = Cron.parse(schedule) if schedule else None
        self.next = self.cron.next_after(dt.datetime.now()) if self.cron else None

    def fired(self) -> bool:
        now = dt.datetime.now()
        if self.cron is None or self.next is None or now < self.next:
            return False
        try:
            self.next = self.cron.next_after(now)
        except CronError:
            self.next = None
        return True


def _side_run(runner: JobRunner) -> JobResult:
    """The result of a compaction or maintenance run between checkpoints: a run of its own in the job's history."""
    return JobResult(job=runner.job.name, run_id=new_run_id(), succeeded=False,
                     started=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), duration_s=0.0)


def _waits_only(checkpoint: JobResult) -> bool:
    """Whether all that failed the checkpoint is datasets whose commits wait out their backoff (a disk or a catalog
    down): each is retried on its own schedule, so the checkpoint does not count towards `max_consecutive_failures`
    (their failed attempts do) and the next comes after `checkpoint_interval`, for the other datasets."""
    waiting = {r.dataset for r in checkpoint.recovery.datasets if r.retry_at is not None}
    fine = (DatasetStatus.COMMITTED, DatasetStatus.PARTIAL, DatasetStatus.NO_NEW_DATA, DatasetStatus.NOT_IN_SOURCE)
    bad = {d.dataset for d in checkpoint.datasets if d.status not in fine or d.input_problems}
    failed_tasks = any(t.status.value == "failed" for t in checkpoint.tasks)
    return bool(waiting) and not failed_tasks and bad <= waiting


def _row(n: int, checkpoint: JobResult) -> dict[str, Any]:
    """What history keeps of one checkpoint: counts, the lag it started from, how long each phase took."""
    metrics = checkpoint.metrics()
    return {"checkpoint": n, "id": checkpoint.run_id, "started": checkpoint.started,
            "status": "succeeded" if checkpoint.succeeded else "failed", "error": checkpoint.error,
            "duration_s": round(checkpoint.duration_s, 3), "records_written": metrics["records_written"],
            "bytes_written": metrics["bytes_written"], "files_published": metrics["files_published"],
            "lag": lag(checkpoint), "phases": {k: round(v, 3) for k, v in checkpoint.phases.items()},
            "committed_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds") if checkpoint.succeeded else None}


def lag(checkpoint: JobResult) -> dict[str, int]:
    """Per dataset, what the checkpoint found to take: its work units' planned ranges (end offset − committed offset
    for Kafka), where watermarks are numbers."""
    out: dict[str, int] = {}
    for t in checkpoint.tasks:
        for key in t.workunit.key_ranges():
            if isinstance(key.low, int) and isinstance(key.high, int):
                out[t.workunit.dataset] = out.get(t.workunit.dataset, 0) + max(0, key.high - key.low)
    return out


def _fold(result: JobResult, checkpoint: JobResult, row: dict[str, Any]) -> None:
    """The run's result after one more checkpoint: datasets' counts summed and their latest status, the latest
    checkpoint's tasks, phases summed, the newest rows kept."""
    by_dataset = {d.dataset: d for d in result.datasets}
    for d in checkpoint.datasets:
        seen = by_dataset.get(d.dataset)
        if seen is None:
            by_dataset[d.dataset] = dataclasses.replace(d)
            continue
        for counter in ("workunits", "records_extracted", "records_written", "records_rejected", "files_published", "error_files"):
            setattr(seen, counter, getattr(seen, counter) + getattr(d, counter))
        seen.watermark, seen.input_problems = d.watermark, d.input_problems
        if d.status is not DatasetStatus.NO_NEW_DATA or seen.status is not DatasetStatus.COMMITTED:
            seen.status, seen.message = d.status, d.message
    result.datasets = [by_dataset[d] for d in sorted(by_dataset)]
    result.tasks = checkpoint.tasks
    result.recovery.datasets.extend(checkpoint.recovery.datasets)
    for phase, seconds in checkpoint.phases.items():
        result.phases[phase] = result.phases.get(phase, 0.0) + seconds
    result.checkpoints = [*result.checkpoints, row][-KEPT_CHECKPOINTS:]
    result.checkpoints_total += 1
    result.error = checkpoint.error


def run_continuous(runner: JobRunner, stop: threading.Event, after_checkpoint: Callable[[JobResult], None] | None = None) -> JobResult:
    """A continuous run of `runner`'s job until `stop` is set (or too many checkpoints fail in a row)."""
    runner.continuous = True
    runner.observe.continuous_started()
    return runner.held(CheckpointLoop(runner, stop, after_checkpoint))

