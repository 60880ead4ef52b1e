"""A compaction run of a job, under the job's lock like any run: recover pending commits → pick the partitions →
merge each as a task → one commit sequence per partition through the same commit path as ingestion (a directory:
stage the merged files, exchange the partition directory, remove the replaced files; a table partition: publish the
merged files, then the table publisher's one replace commit (an Iceberg snapshot); then record the compaction)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gobblin_py.api import CommitStep, TableCompaction, TableReplace
from gobblin_py.commit.sequence import CommitSequence
from gobblin_py.commit.steps import CompactionStateCommitStep
from gobblin_py.commit.tasks import ThreadTasks
from gobblin_py.compaction.plan import (
    CompactionOptions,
    CompactionWork,
    PartitionWork,
    TablePartitionWork,
    plan_compaction,
)
from gobblin_py.compaction.task import PartitionResult, compact_partition
from gobblin_py.config.model import JobSpec
from gobblin_py.errors import spark_failure
from gobblin_py.fs import Location
from gobblin_py.fs.exchange_steps import FsExchangeDirsCommitStep, FsRemoveReplacedCommitStep, FsStageCommitStep
from gobblin_py.fs.publish_steps import publish_step
from gobblin_py.runtime.executors.base import TaskExecutor, in_driver_why, small_plan_bytes
from gobblin_py.runtime.job_result import DatasetStatus, DatasetSummary, JobResult, conclude
from gobblin_py.runtime.publish import commit_id
from gobblin_py.runtime.runner import JobRunner

log = logging.getLogger(__name__)


@dataclass
class PartitionOutcome:
    """One partition's line in the report."""

    partition: str
    status: str
    files_in: int = 0
    files_out: int = 0
    records_in: int = 0
    records_out: int = 0
    duplicates_removed: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    message: str = ""


@dataclass
class CompactionReport:
    """What a compaction did: each partition merged or failed, each one left alone and why, and the run."""

    result: JobResult | None = None
    partitions: list[PartitionOutcome] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def succeeded(self) -> bool:
        return self.result is not None and self.result.succeeded

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.result.run_id if self.result else None, "succeeded": self.succeeded,
                "error": self.result.error if self.result else None,
                "partitions": [vars(p) for p in self.partitions], "skipped": self.skipped}


def compaction_sequence(job: JobSpec, done: PartitionResult) -> CommitSequence:
    """The steps that replace one partition's files with the merged ones, in the order readers stay consistent, then
    record it: for a directory, stage each merged file beside the partition, exchange the directories, remove the
    replaced files; for a table partition, publish each merged file beside the table's data, then one snapshot that
    replaces the inputs with them."""
    work = done.work
    names = [Path(f.path).name for f in done.files]
    steps = _table_steps(job, done, names) if isinstance(work, TablePartitionWork) else _directory_steps(done, names)
    entry = {"files_in": len(work.inputs), "files_out": len(names), "records_in": done.records_in,
             "records_out": done.records_out, "duplicates_removed": done.duplicates_removed,
             "bytes_in": work.input_bytes, "bytes_out": sum(f.size for f in done.files),
             "dedup_key": work.dedup.key if work.dedup else None, "files": names}
    steps.append(CompactionStateCommitStep(state_dir=str(job.job.records_root / "state" / job.name), dataset=work.dataset,
                                           run_id=work.run_id, state=entry, partition=work.partition))
    return CommitSequence(job=job.name, dataset=work.rel, run_id=work.run_id, steps=steps,
                          meta={"kind": "compaction", "dataset": work.dataset, "partition": work.partition})


def _directory_steps(done: PartitionResult, names: list[str]) -> list[CommitStep]:
    work = done.work
    assert isinstance(work, PartitionWork)
    staged = work.staged
    steps: list[CommitStep] = [FsStageCommitStep(src=f.path, dst=str(staged / name), size=f.size, checksum=f.checksum,
                                                 final=str(work.directory / name)) for f, name in zip(done.files, names)]
    steps.append(FsExchangeDirsCommitStep(partition=str(work.directory), staged=str(staged), published=names,
                                          replaced=[f.name for f in work.inputs]))
    steps.append(FsRemoveReplacedCommitStep(staged=str(staged), published=names))
    return steps


def _table_steps(job: JobSpec, done: PartitionResult, names: list[str]) -> list[CommitStep]:
    """Publish each merged file under the table's data directory (as the table publisher publishes a run's files),
    then the publisher's replace commit, tagged with a commit id of this run and partition."""
    work = done.work
    assert isinstance(work, TablePartitionWork)
    publisher = work.publisher.create()
    assert isinstance(publisher, TableCompaction)
    published = [Location(work.data_dir) / name for name in names]
    steps: list[CommitStep] = [publish_step(f.path, dst, f.size, f.checksum) for f, dst in zip(done.files, published)]
    counts = {"partition": work.partition, "files_in": len(work.inputs), "files_out": len(names),
              "records_in": done.records_in, "records_out": done.records_out, "compaction_id": work.compaction_id}
    steps.append(publisher.replace_step(TableReplace(
        job=job.name, run_id=work.run_id, table=work.dataset, commit_id=commit_id(job.name, work.run_id, work.rel),
        replaced=tuple(f.name for f in work.inputs), added=tuple(str(p) for p in published),
        keeps_data=work.dedup is None, record=work.rel, counts=counts)))
    return steps


class Compactor:
    """Runs compactions of one job through its runner: as a run of the job (its lock, history and events), or between
    a continuous run's checkpoints, under the lock that run holds."""

    def __init__(self, runner: JobRunner) -> None:
        self.runner = runner
        self.job: JobSpec = runner.job
        self.executor: TaskExecutor = runner.executor

    def run(self, options: CompactionOptions) -> CompactionReport:
        """One compaction under the job lock (JobLockedError while an ingestion or another compaction holds it)."""
        report = CompactionReport()
        report.result = self.runner.held(lambda result: self.compact(result, options, report))
        return report

    def compact(self, result: JobResult, options: CompactionOptions, report: CompactionReport) -> None:
        """The compaction's body, filling `result` and `report`; the caller holds the job lock."""
        runner, run_id = self.runner, result.run_id
        t0 = time.monotonic()
        result.recovery = runner.publishing.recover()
        blocked = dict(result.recovery.blocked)
        runner.clean_orphans(current=run_id)
        result.phases["recovery"] = time.monotonic() - t0

        plan = plan_compaction(self.job, options, run_id, set(blocked))
        report.skipped = plan.skipped
        log.info("compacting %d partitions (%d left alone)", len(plan.works), len(plan.skipped))
        t1 = time.monotonic()
        done = self._merge(plan.works)
        result.phases["tasks"] = time.monotonic() - t1

        t2 = time.monotonic()
        merged = [d for d in done if d.error is None]
        errors = runner.publishing.commit([compaction_sequence(self.job, d) for d in merged], logged=True) if merged else {}
        result.phases["commit"] = time.monotonic() - t2
        for d in done:
            work = d.work
            error = d.error or errors.get(work.rel)
            outcome = PartitionOutcome(
                work.rel, "compacted" if error is None else "merge failed" if d.error else "commit failed",
                files_in=len(work.inputs), files_out=len(d.files), records_in=d.records_in, records_out=d.records_out,
                duplicates_removed=d.duplicates_removed, bytes_in=work.input_bytes, bytes_out=sum(f.size for f in d.files),
                message=error or "")
            report.partitions.append(outcome)
            status = DatasetStatus.COMMITTED if error is None else \
                DatasetStatus.NOT_COMMITTED if d.error else DatasetStatus.COMMIT_FAILED
            result.datasets.append(DatasetSummary(work.rel, status, workunits=1, records_extracted=d.records_in,
                                                  records_written=d.records_out if error is None else 0,
                                                  files_published=len(d.files) if error is None else 0,
                                                  message=error or f"{len(work.inputs)} files → {len(d.files)}; "
                                                                   f"{d.duplicates_removed} duplicates removed"))
        for rel, rec in blocked.items():
            result.datasets.append(DatasetSummary(rel, DatasetStatus.BLOCKED, message=rec.message))
        runner.clean_run(run_id)
        conclude(result)

    def _merge(self, works: list[CompactionWork]) -> list[PartitionResult]:
        """One task per partition on the executors (threads of this process with `--in-process`); a lost Spark job
        fails every partition of it, and nothing of them is published."""
        if not works:
            return []
        tasks = self.executor.commit_tasks(start=False)  # Spark already up (a warm scheduler): use it
        limit = self.job.spark.in_driver_limit
        small = small_plan_bytes([sum(f.size for f in w.inputs) for w in works], limit) if tasks is None else None
        if small is not None and limit is not None:  # as `run`: less work than Spark's start takes
            log.info("compacting %d partition(s) in the driver, not on Spark: %s", len(works), in_driver_why(small, limit))
        elif tasks is None:
            tasks = self.executor.commit_tasks(start=True)
        tasks = tasks or ThreadTasks(self.job.job.commit_parallelism)
        try:
            return list(tasks.flat_map(compact_partition, works))
        except Exception as exc:  # noqa: BLE001 - Py4J's error for a failed Spark job
            message = spark_failure(exc)
            log.error("the compaction's Spark job failed: %s", message)
            return [PartitionResult(w, error=f"Spark job failed: {message}") for w in works]
