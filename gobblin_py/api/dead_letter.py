"""DeadLetters: where a job's bad records go besides its error files (`quality.dead_letter`), exactly once with the
commit that publishes their range.

The error files are the durable staging: a task writes each bad record there (with the message as read, where the
source kept it), the files are published with the data, and the dataset's commit sequence gets one more step, after
its watermarks, that delivers their entries. That step must be idempotent across crashes as every `CommitStep` is:
a record reaches the dead letters iff its range is committed, once.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import ClassVar

from gobblin_py.api.commit_step import CommitStep
from gobblin_py.api.plugin import Plugin


@dataclass(frozen=True)
class DeadLetterFile:
    """A published error file of the commit: where it is and how many entries (bad records) it holds."""

    path: str
    records: int


@dataclass(frozen=True)
class DeadLetterDelivery:
    """What one dataset's commit hands to the dead letters: its identity and its published error files."""

    job: str
    dataset: str
    commit_id: str  # unique per job, run and dataset; stable across replays
    files: tuple[DeadLetterFile, ...]
    mark_dir: str  # a directory of the job's own state where the step may keep what it needs to replay exactly once


class DeadLetters(Plugin, abc.ABC):
    """A dead-letter sink: the commit step delivering a commit's bad records, and a check that it can before a run."""

    step_types: ClassVar[tuple[type[CommitStep], ...]] = ()
    """The step classes `commit_step` returns (recovery rebuilds them from the commit record by type name)."""

    @abc.abstractmethod
    def commit_step(self, delivery: DeadLetterDelivery) -> CommitStep:
        """The step that delivers every entry of `delivery.files` once; it runs after the dataset's watermarks."""

    def topics(self) -> list[str]:
        """Hook: the Kafka topics this sink produces to; the loader refuses a job whose source reads one. Default: none."""
        return []

    def check(self) -> None:
        """Before a run reads anything: raise a GobblinError when the sink cannot take records (its topic is missing,
        its broker cannot be reached), so no range is read whose bad records could not be delivered."""
