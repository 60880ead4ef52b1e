"""TableUpkeep: what `gobblin-py maintain` asks of a publisher whose tables need upkeep of their own (expiring
snapshots, removing orphan files, deleting old partitions), as plain values and commit steps the framework logs and
replays, so that a publisher (Iceberg today, Delta next) plugs its upkeep in without touching the commit layer."""

from __future__ import annotations

import abc
from dataclasses import dataclass, field

from gobblin_py.api.commit_step import CommitStep


@dataclass(frozen=True)
class UpkeepRequest:
    """What to do; None: not this action. Ages in seconds, `now` in seconds since the epoch."""

    now: float
    expire_snapshots_older_than: float | None = None
    keep_last: int = 1
    remove_orphans_older_than: float | None = None
    retention: float | None = None
    below_table_retention: bool = False
    """Asked for explicitly: an age below a table's own retention property (Delta's `delta.deletedFileRetentionDuration`,
    `delta.logRetentionDuration`) is honoured rather than refused."""


@dataclass(frozen=True)
class PendingCommit:
    """A commit of the job still pending in its commit log (not yet recovered): upkeep must leave alone everything it
    touches, since its replay or its `verify()` may need it."""

    record: str
    """The record's name (a dataset, a partition, a table partition): what a refusal names."""
    steps: tuple[CommitStep, ...]
    paths: frozenset[str]
    """Every path its steps name (task output, published files, staged files), as written."""


@dataclass
class UpkeepAction:
    """One action on one table or directory: what it deletes (listed one by one), the steps that do it (logged in the
    commit log first, then executed, replayed after a crash), and what it refuses to touch and why."""

    action: str
    """`expire-snapshots`, `remove-orphans`, `retention` …"""
    target: str
    """The table or directory it acts on."""
    deletions: list[str] = field(default_factory=list)
    steps: list[CommitStep] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    note: str = ""
    """Why nothing is done (not supported for this table, nothing old enough), shown beside the action."""


class TableUpkeep(abc.ABC):
    """Mixed into a Committer that publishes to tables: its part of `gobblin-py maintain`. It plans only; the
    framework runs the steps of each action through the commit log, under the job lock, after recovering the job's
    pending commits (those that stay pending are in `pending`)."""

    @abc.abstractmethod
    def upkeep(self, job: str, datasets: list[str], request: UpkeepRequest, pending: list[PendingCommit]) -> list[UpkeepAction]:
        """Hook: the actions `request` asks for on the tables `datasets` are published to, each listing what it
        deletes. Never a step that deletes or expires what a pending commit needs: refuse it (naming the record)."""
