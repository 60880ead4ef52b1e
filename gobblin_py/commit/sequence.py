"""CommitSequence: the ordered steps of one dataset of one run, committed idempotently."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gobblin_py.api.commit_step import CommitStep
from gobblin_py.commit.crashpoints import crash_point
from gobblin_py.durable import fsync_dir
from gobblin_py.errors import CommitError

if TYPE_CHECKING:
    from gobblin_py.commit.store import CommitStepStore


def _sync(dirs: set[str]) -> None:
    for d in sorted(dirs):
        fsync_dir(Path(d))
    dirs.clear()


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


@dataclass
class CommitSequence:
    """Steps that publish one dataset atomically: logged first, replayed until all verify."""

    job: str
    dataset: str
    run_id: str
    steps: list[CommitStep]
    created: str = field(default_factory=utc_now)
    attempts: int = 0
    last_error: str | None = None
    failed_step: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def commit(self, store: CommitStepStore) -> None:
        """Run each step not already done, in order; then drop the record from the store.

        On failure (an OSError such as a full disk included) the record stays, with the attempt counted and the
        failing step named, unless the record itself cannot be rewritten (then the error says so); a CommitError
        names the dataset either way.
        """
        try:
            self.apply(verify_first=True)
        except StepFailed as failed:
            self.attempts += 1
            self.failed_step = failed.index
            self.last_error = f"step {failed.index + 1}/{len(self.steps)} ({self.steps[failed.index].describe()}): {failed.cause}"
            unrecorded = ""
            try:
                store.put(self)
            except OSError as exc:
                unrecorded = f" (this attempt could not be counted in {store.path(self.job, self.dataset)}: {exc})"
            raise CommitError(f"commit of dataset {self.dataset!r} failed at {self.last_error}{unrecorded}") from failed.cause
        crash_point("commit.before_record_removal")
        try:
            store.remove(self.job, self.dataset)
        except OSError as exc:
            raise CommitError(f"dataset {self.dataset!r}: every step is done but its commit record {store.path(self.job, self.dataset)} "
                              f"could not be removed ({exc}); the next run verifies the steps and removes it") from exc
        crash_point("commit.after_record_removal")

    def apply(self, verify_first: bool) -> None:
        """The steps in order, deferred directory fsyncs done before any step that needs them durable.

        Without the log (`at_least_once`), `verify_first` is False: every step simply runs.
        """
        unsynced: set[str] = set()
        for index, step in enumerate(self.steps):
            try:
                deferred = step.deferred_sync_dir()
                if deferred is None and unsynced:
                    _sync(unsynced)  # what came before is durable before this step runs
                if not (verify_first and step.verify()):
                    step.execute()
                if deferred is not None:  # also when verified: a crashed run may have renamed without the fsync
                    unsynced.add(deferred)
            except Exception as exc:
                raise StepFailed(index, exc) from exc
            crash_point("commit.after_step")
        _sync(unsynced)


class StepFailed(Exception):
    """A step of a sequence raised: which one, and why."""

    def __init__(self, index: int, cause: Exception) -> None:
        super().__init__(str(cause))
        self.index, self.cause = index, cause
