"""ForkOperator: decides which branches get the schema and each record."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import ClassVar

from gobblin_py.api.plugin import Plugin
from gobblin_py.api.types import Record, Schema


class ForkOperator(Plugin, abc.ABC):
    """Routes records to branches by index; a record sent to several branches is copied."""

    broadcast: ClassVar[bool] = False
    """True when every record goes to every branch (lets the task skip routing)."""

    def open(self, branch_names: Sequence[str], schema: Schema) -> None:
        """Hook: called once with the branches configured and the main branch's schema."""
        self.branch_names = list(branch_names)

    @abc.abstractmethod
    def route(self, record: Record) -> Sequence[int]:
        """Indexes of the branches that get `record` (may be empty)."""
