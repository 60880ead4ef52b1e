"""Replaying pending commit sequences before a run extracts anything, and on `recover`."""

from __future__ import annotations

import datetime as dt
import enum
import logging
from dataclasses import dataclass, field

from gobblin_py.commit.protocol import replay
from gobblin_py.commit.sequence import CommitSequence, Fault
from gobblin_py.commit.store import CommitStepStore
from gobblin_py.commit.tasks import ThreadTasks
from gobblin_py.crashpoints import crash_point
from gobblin_py.errors import CommitError, CorruptCommitRecordError

log = logging.getLogger(__name__)


class Outcome(str, enum.Enum):
    RECOVERED = "recovered"
    FAILED = "failed"            # still pending; retried by a run once its backoff has passed
    WAITING = "waiting"          # its last attempt failed and its backoff has not passed: not attempted, not extracted
    QUARANTINED = "quarantined"  # failed commit_max_attempts times: `recover` retries it, and runs after its backoff
                                 # when a fault of the environment failed it (see `retry_wait`)
    CORRUPT = "corrupt"          # unreadable record; an operator must look at it


@dataclass
class DatasetRecovery:
    dataset: str
    outcome: Outcome
    message: str = ""
    run_id: str | None = None
    retry_at: str | None = None  # not attempted (its backoff has not passed): when a run attempts it next, by itself


MAINTENANCE_RECORDS = "maintain"
"""`gobblin-py maintain` names its records `maintain/<action>/<target>`, never a dataset's name."""


def is_maintenance(record: str) -> bool:
    """Whether `record` is a maintenance record (by its name, so an unreadable one is known too): it blocks no dataset."""
    return record.startswith(f"{MAINTENANCE_RECORDS}/")


@dataclass
class RecoveryReport:
    datasets: list[DatasetRecovery] = field(default_factory=list)

    @property
    def blocked(self) -> dict[str, DatasetRecovery]:
        """Datasets still pending: the run must not extract them. A maintenance record still pending, in whatever state
        (failed, waiting, quarantined, unreadable), is none: it names no dataset (see `maintenance_pending`)."""
        return {d: r for d, r in self.unfinished.items() if not is_maintenance(d)}

    @property
    def maintenance_pending(self) -> dict[str, DatasetRecovery]:
        """Maintenance records still pending: named to the operator, blocking nothing."""
        return {d: r for d, r in self.unfinished.items() if is_maintenance(d)}

    @property
    def unfinished(self) -> dict[str, DatasetRecovery]:
        """Every record still pending, datasets' and maintenance's (`recover` exits 1 on any)."""
        return {d.dataset: d for d in self.datasets if d.outcome is not Outcome.RECOVERED}


LONGEST_WAIT = 3600.0
"""Seconds: the longest wait between two automatic attempts of a dataset's commit (unless the backoff is longer)."""


def retry_wait(attempts: int, backoff: float) -> float:
    """Seconds after a dataset's `attempts`-th failed commit attempt before a run attempts it again: `backoff` doubling
    with each failed attempt (60 s: the second attempt a minute after the first, the third two minutes later), at most
    an hour. Spread so, a disk or a catalog down for a minute does not spend every attempt and quarantine the dataset."""
    if attempts <= 0 or backoff <= 0:
        return 0.0
    return min(backoff * 2.0 ** min(attempts - 1, 32), max(backoff, LONGEST_WAIT))


def next_attempt(seq: CommitSequence, backoff: float) -> dt.datetime | None:
    """When a run may attempt `seq` again, or None for at once (no failed attempt recorded, or no backoff)."""
    wait = retry_wait(seq.attempts, backoff)
    if not wait or seq.last_attempt is None:
        return None
    try:
        last = dt.datetime.fromisoformat(seq.last_attempt)
    except ValueError:
        return None  # not a time: attempt it, and the failure records one
    if last.tzinfo is None:  # written by hand without a zone: taken as UTC, as the store writes it
        last = last.replace(tzinfo=dt.UTC)
    return last + dt.timedelta(seconds=wait)


def _waiting(seq: CommitSequence, due: dt.datetime, now: dt.datetime, max_attempts: int) -> DatasetRecovery:
    """The report of a dataset not attempted because its backoff has not passed."""
    quarantined = seq.attempts >= max_attempts
    when = due.isoformat(timespec="seconds")
    head = (f"quarantined after {seq.attempts} failed attempts by a fault of its environment; retried automatically"
            if quarantined else f"commit attempt {seq.attempts}/{max_attempts} failed; the next attempt is")
    return DatasetRecovery(seq.dataset, Outcome.QUARANTINED if quarantined else Outcome.WAITING,
                           f"{head} at {when} (in {(due - now).total_seconds():.0f}s, job.commit_retry_backoff), or now with "
                           f"`gobblin-py recover JOB.yaml --dataset {seq.dataset}`; last error: {seq.last_error}", seq.run_id,
                           retry_at=when)


def pending(store: CommitStepStore, job: str, datasets: list[str] | None = None) -> list[str]:
    """Datasets of `job` (or those of `datasets`) with a pending record, readable or not."""
    found = store.datasets(job)
    return found if datasets is None else [d for d in found if d in datasets]


def recover_dataset(store: CommitStepStore, job: str, dataset: str, max_attempts: int, force: bool = False,
                    backoff: float = 0.0, now: dt.datetime | None = None) -> DatasetRecovery:
    """Commit the pending sequence of one dataset; the same in a driver thread and in a Spark task.

    Unless `force` (`gobblin-py recover`): a sequence whose last attempt failed less than `retry_wait(attempts,
    backoff)` before `now` waits; one that failed `max_attempts` times is quarantined, and attempted again only when a
    fault of the environment failed it and its backoff has passed (never with `backoff` 0, as before backoffs).
    """
    try:
        seq = store.get(job, dataset)
    except CorruptCommitRecordError as exc:
        return DatasetRecovery(dataset, Outcome.CORRUPT, str(exc))
    if not force:
        quarantined = seq.attempts >= max_attempts
        if quarantined and (seq.fault is not Fault.ENVIRONMENT or backoff <= 0):
            return DatasetRecovery(dataset, Outcome.QUARANTINED,
                                   f"quarantined after {seq.attempts} failed attempts; last error: {seq.last_error}", seq.run_id)
        due = next_attempt(seq, backoff)
        now = now or dt.datetime.now(dt.UTC)
        if due is not None and now < due:
            return _waiting(seq, due, now, max_attempts)
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
            force: bool = False, parallelism: int = 4, backoff: float = 0.0, now: dt.datetime | None = None) -> RecoveryReport:
    """Commit every pending sequence of `job` (or of `datasets`) in driver threads, datasets in parallel
    (`gobblin-py recover`); a run recovers through `distributed.recover_many`, on threads or the executors."""
    todo = pending(store, job, datasets)
    one = lambda part: [recover_dataset(store, job, d, max_attempts, force, backoff, now) for d in part]  # noqa: E731
    return RecoveryReport(ThreadTasks(parallelism).flat_map(one, [(d,) for d in todo]))
