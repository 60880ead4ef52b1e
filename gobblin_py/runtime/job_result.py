"""What a run reports: each dataset's outcome (DatasetSummary) and the run's (JobResult), for the CLI, history,
events and metrics."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from gobblin_py.api import TaskCounter
from gobblin_py.commit.recovery import RecoveryReport
from gobblin_py.runtime.task.results import WorkUnitResult


class DatasetStatus(str, enum.Enum):
    COMMITTED = "committed"
    PARTIAL = "committed (partial)"   # commit_policy successful: some tasks failed
    NOT_COMMITTED = "not committed"   # a task failed under commit_policy full
    COMMIT_FAILED = "commit failed"   # the sequence is pending; the next run recovers it
    BLOCKED = "blocked"               # a pending sequence could not be recovered: not extracted
    NO_NEW_DATA = "no new data"
    NOT_IN_SOURCE = "not in source"   # committed in the state, but the source no longer lists it (another job's?)


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
    notices: list[str] = field(default_factory=list)  # reported by the source for the operator's information
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
    phases: dict[str, float] = field(default_factory=dict)  # seconds: recovery, planning, tasks, commit, cleanup (and executor_start)
    cancelled: bool = False  # interrupted (Ctrl-C, SIGINT): what was committed stays, the rest is redone next run
    checkpoints: list[dict[str, Any]] = field(default_factory=list)  # a continuous run's checkpoints, the latest last
    checkpoints_total: int = 0
    running: bool = False  # under way: its record says so from its start (a continuous run's is rewritten after each checkpoint)
    continuous: bool = False  # a continuous run's record (its checkpoints, once it has any)
    bad_config: bool = False  # failed on a ConfigError found while running (planning against the source): exit 2
    lease_epoch: int | None = None  # the fencing epoch of the job's lease this run held (None: no lease, job.lock off)
    took_over: str | None = None  # the lease this run took over from another's that had not been released, described
    job_file: str = ""  # the job file this run was loaded from; a run of another file under the same name is warned of
    warnings: list[str] = field(default_factory=list)  # job-level, for the summary (another job file shares the state)

    @property
    def status(self) -> str:
        return "cancelled" if self.cancelled else "running" if self.running else "succeeded" if self.succeeded else "failed"

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
            "counters": sum_counters(self.tasks),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job, "run_id": self.run_id, "status": self.status,
            "started": self.started, "duration_s": round(self.duration_s, 3), "error": self.error,
            "phases": {k: round(v, 3) for k, v in self.phases.items()},
            "metrics": self.metrics(),
            "datasets": [{**vars(d), "status": d.status.value} for d in self.datasets],
            "recovered": [vars(r) | {"outcome": r.outcome.value} for r in self.recovery.datasets],
            "tasks": [t.to_json() for t in kept_tasks(self.tasks)], "tasks_total": len(self.tasks),
            "bytes_by_dataset": bytes_by_dataset(self.tasks),
            "lease_epoch": self.lease_epoch, **({"took_over": self.took_over} if self.took_over else {}),
            **({"job_file": self.job_file} if self.job_file else {}), **({"warnings": self.warnings} if self.warnings else {}),
            **({"mode": "continuous", "checkpoints_total": self.checkpoints_total, "checkpoints": self.checkpoints}
               if self.continuous or self.checkpoints_total else {}),
        }


KEPT_TASKS = 200
"""A run record keeps at most this many tasks' detail (810 B each: 50,000 small files made a 40 MB record that
`history` and `status` read whole): every failed task and every task with rejected records, then the slowest."""


def kept_tasks(results: list[WorkUnitResult], limit: int = KEPT_TASKS) -> list[WorkUnitResult]:
    """The tasks whose detail the run record keeps, in the run's order: the failed, those with rejected records
    (their error files), then the slowest, up to `limit` (the failed and rejecting ones always)."""
    if len(results) <= limit:
        return list(results)
    must = {i for i, r in enumerate(results) if r.status.value != "succeeded" or any(r.rejected.values())}
    rest = sorted((i for i in range(len(results)) if i not in must), key=lambda i: -results[i].duration_s)
    keep = must | set(rest[:max(0, limit - len(must))])
    return [r for i, r in enumerate(results) if i in keep]


def bytes_by_dataset(results: list[WorkUnitResult]) -> dict[str, int]:
    """Bytes written per dataset over every task (the record keeps only some tasks' detail)."""
    out: dict[str, int] = {}
    for r in results:
        out[r.workunit.dataset] = out.get(r.workunit.dataset, 0) + sum(b.bytes_written for b in r.branches.values())
    return out


def sum_counters(results: list[WorkUnitResult]) -> dict[str, dict[str, Any]]:
    """Plugins' task counters summed over `results`, as JSON."""
    return {n: c.to_json() for n, c in TaskCounter.sum(r.counters for r in results).items()}


SHOWN_WIDTH = 40


def watermark_summary(before: dict, after: dict) -> str:
    """`0=120 1=98` for a few keys (Kafka partitions), `12 keys (+3)` for many (files); of a few keys with long values
    (a database's published sub-ranges) the shortest that fit are shown and the rest counted, so the row stays short."""
    if 0 < len(after) <= 4:
        texts = [f"{k}={v}" for k, v in sorted(after.items())]
        fits: set[str] = set()
        for text in sorted(texts, key=len):  # the shortest first, shown in key order
            if sum(len(t) + 1 for t in fits) + len(text) > SHOWN_WIDTH:
                break
            fits.add(text)
        shown = [t for t in texts if t in fits]
        if shown:
            rest = len(after) - len(shown)
            return " ".join(shown) + (f" (+{rest} more)" if rest else "")
    grown = len(after) - len(before)
    return f"{len(after)} keys" + (f" (+{grown})" if grown else "")


def conclude(result: JobResult) -> None:
    """Set `succeeded` and, on failure, a one-line `error` from the datasets' outcomes and the failed tasks."""
    failed_tasks = any(r.status.value == "failed" for r in result.tasks)
    bad = [d for d in result.datasets if d.status in (DatasetStatus.NOT_COMMITTED, DatasetStatus.COMMIT_FAILED, DatasetStatus.BLOCKED)]
    flagged = [d for d in result.datasets if d.input_problems]
    result.succeeded = not failed_tasks and not bad and not flagged
    if not result.succeeded and result.error is None:
        parts = [f"{d.dataset}: {d.status.value}" + (f" ({d.message})" if d.message else "") for d in bad]
        parts += [f"{d.dataset}: {'; '.join(d.input_problems)}" for d in flagged]
        if failed_tasks and not parts:
            parts.append("some tasks failed; their work units are retried next run")
        result.error = "; ".join(parts)
