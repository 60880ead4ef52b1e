"""Replaying pending commit sequences before a run extracts anything, and on `recover`."""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field

from gobblin_py.crashpoints import crash_point
from gobblin_py.commit.protocol import replay
from gobblin_py.commit.store import CommitStepStore
from gobblin_py.commit.tasks import ThreadTasks
from gobblin_py.errors import CommitError, CorruptCommitRecordError

log = logging.getLogger(__name__)


class Outcome(str, enum.Enum):
    RECOVERED = "recovered"
    FAILED = "failed"            # still pending; retried by the next run
    QUARANTINED = "quarantined"  # failed commit_max_attempts times; only `recover` retries it
    CORRUPT = "corrupt"          # unreadable record; an operator must look at it


@dataclass
class DatasetRecovery:
    dataset: str
    outcome: Outcome
    message: str = ""
    run_id: str | None = None


@dataclass
class RecoveryReport:
    datasets: list[DatasetRecovery] = field(default_factory=list)

    @property
    def blocked(self) -> dict[str, DatasetRecovery]:
        """Datasets still pending: the run must not extract them."""
        return {d.dataset: d for d in self.datasets if d.outcome is not Outcome.RECOVERED}


def pending(store: CommitStepStore, job: str, datasets: list[str] | None = None) -> list[str]:
    """Datasets of `job` (or those of `datasets`) with a pending record, readable or not."""
    found = store.datasets(job)
    return found if datasets is None else [d for d in found if d in datasets]


def recover_dataset(store: CommitStepStore, job: str, dataset: str, max_attempts: int, force: bool = False) -> DatasetRecovery:
    """Commit the pending sequence of one dataset; the same in a driver thread and in a Spark task.

    A sequence that already failed `max_attempts` times is quarantined and left alone unless `force`.
    """
    try:
        seq = store.get(job, dataset)
    except CorruptCommitRecordError as exc:
        return DatasetRecovery(dataset, Outcome.CORRUPT, str(exc))
    if seq.attempts >= max_attempts and not force:
        return DatasetRecovery(dataset, Outcome.QUARANTINED,
                               f"quarantined after {seq.attempts} failed attempts; last error: {seq.last_error}", seq.run_id)
    crash_point("recovery.before_commit")
    try:
        replay(store, seq)
    except CommitError as exc:
        outcome = Outcome.QUARANTINED if seq.attempts >= max_attempts else Outcome.FAILED
        return DatasetRecovery(dataset, outcome, f"attempt {seq.attempts}/{max_attempts}: {exc}", seq.run_id)
    except OSError as exc:  # outside any step (the commit reports theirs): still this dataset's fault, not an internal error
        return DatasetRecovery(dataset, Outcome.FAILED, f"replay of dataset {dataset!r} failed: {exc}", seq.run_id)
    log.info("recovered the pending commit of dataset %s (run %s)", dataset, seq.run_id)
    return DatasetRecovery(dataset, Outcome.RECOVERED, "", seq.run_id)


def recover(store: CommitStepStore, job: str, max_attempts: int, datasets: list[str] | None = None,
            force: bool = False, parallelism: int = 4) -> RecoveryReport:
    """Commit every pending sequence of `job` (or of `datasets`) in driver threads, datasets in parallel
    (`gobblin-py recover`); a run recovers through `distributed.recover_many`, on threads or the executors."""
    todo = pending(store, job, datasets)
    one = lambda part: [recover_dataset(store, job, d, max_attempts, force) for d in part]  # noqa: E731
    return RecoveryReport(ThreadTasks(parallelism).flat_map(one, [(d,) for d in todo]))
