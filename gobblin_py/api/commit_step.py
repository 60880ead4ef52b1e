"""CommitStep: one idempotent part of publishing a dataset, replayable after a crash."""

from __future__ import annotations

import abc
import contextvars
import dataclasses
import enum
from typing import Any, ClassVar

WRITING_EPOCH: contextvars.ContextVar[int | None] = contextvars.ContextVar("gobblin_py_writing_epoch", default=None)
"""The lease epoch the commit protocol runs a sequence's steps under on this thread (None: no lease); set by
`state.store.writing_at`."""


def writing_epoch() -> int | None:
    """The lease epoch the steps running on this thread are committed under (None outside the commit protocol, or
    without a lease): what a step may key what it learns by, as only a later epoch's holder may undo what this
    epoch's commits did (a `state reset` takes the lease at a new epoch)."""
    return WRITING_EPOCH.get()


class StepStatus(str, enum.Enum):
    """What `inspect-commits` shows for a step."""

    DONE = "done"        # verify() holds
    PENDING = "pending"  # not done, and execute() can still do it
    LOST = "lost"        # not done, and its input is gone: execute() cannot succeed
    CONFLICT = "conflict"  # not done, and something this job did not write is in the way: never replaced


class CommitStep(abc.ABC):
    """A step with a checkable post-condition; subclasses are dataclasses of JSON values.

    `verify()` must check the whole post-condition (not merely that a destination exists),
    and `execute()` must be safe to call again after a crash at any point inside it.
    """

    type_name: ClassVar[str]
    """The stable name this step type is stored under in the commit store."""

    @abc.abstractmethod
    def verify(self) -> bool:
        """True when this step's post-condition already holds."""

    @abc.abstractmethod
    def execute(self) -> None:
        """Make the post-condition true; raise `CommitError` when it cannot be."""

    def deferred_sync_dir(self) -> str | None:
        """A directory whose fsync this step leaves to the sequence (renames into one directory share
        one fsync, done before any later step that is not itself deferred); None: the step is durable."""
        return None

    @abc.abstractmethod
    def describe(self) -> str:
        """One line for operators: what this step does."""

    def paths(self) -> list[str] | None:
        """Hook: every path (local or URL) this step reads or writes; each must lie under the job's own
        directories or the record is refused as tampered. None (the default): the framework takes them from
        the step's fields (Locations, absolute paths, URLs, anything holding `..`)."""
        return None

    def withdraw(self, dry_run: bool = False) -> str | None:
        """Hook for abandoning a sequence whose watermarks were never committed (`recover --abandon`): undo what
        `execute()` did where it is provably this step's own output (a published file still byte-identical to the
        committable), so the next run's re-extraction of the range publishes nothing twice. Returns what is (with
        `dry_run`: would be) undone, None when nothing of this step is in place; raises `CommitError` when its effect
        is in place and cannot be undone (the default for a done step), and the abandon is refused."""
        if self.verify():
            from gobblin_py.errors import CommitError

            raise CommitError(f"{self.describe()} is done and cannot be undone")
        return None

    def status(self) -> StepStatus:
        """done / pending / lost / conflict, for `inspect-commits`."""
        return StepStatus.DONE if self.verify() else StepStatus.PENDING

    def to_dict(self) -> dict[str, Any]:
        """The step's fields as JSON values (subclasses are dataclasses)."""
        return dataclasses.asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CommitStep:
        return cls(**data)
