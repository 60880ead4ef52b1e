"""Quality policies: row-level checks on each record, task-level checks on a branch's output."""

from __future__ import annotations

import abc
import enum
from dataclasses import dataclass, field

from gobblin_py.api.plugin import Plugin
from gobblin_py.api.types import Record, Schema


class RowPolicyType(str, enum.Enum):
    """What a failed row check does (Gobblin's MANDATORY/OPTIONAL plus an error-file mode)."""

    FAIL = "FAIL"          # the task fails
    ERR_FILE = "ERR_FILE"  # the record and the reason go to the task's error file
    OPTIONAL = "OPTIONAL"  # counted only; the record still passes


class TaskPolicyType(str, enum.Enum):
    """What a failed task check does."""

    FAIL = "FAIL"
    OPTIONAL = "OPTIONAL"


class RowPolicy(Plugin, abc.ABC):
    """Checks one record; a failed check returns the reason."""

    def open(self, schema: Schema) -> None:
        """Hook: called once with the schema the records will have."""

    @abc.abstractmethod
    def check(self, record: Record) -> str | None:
        """None when the record passes, else why it does not."""


@dataclass
class BranchStats:
    """What one fork branch of one task did, for task-level policies and metrics."""

    branch: str
    records_in: int = 0
    records_written: int = 0
    bytes_written: int = 0
    rejected: dict[str, int] = field(default_factory=dict)


class TaskPolicy(Plugin, abc.ABC):
    """Checks a branch's whole output before it may be committed."""

    @abc.abstractmethod
    def check(self, stats: BranchStats, records_extracted: int) -> str | None:
        """None when the output passes, else why it does not."""
