"""Fork operators: `identity` (every branch gets every record) and `by_field` (route by a value)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import Field

from gobblin_py.api import ForkOperator, Settings
from gobblin_py.api.types import Record, Schema
from gobblin_py.errors import TaskError


class IdentityFork(ForkOperator):
    """Every branch gets the schema and every record (copied for the second branch on)."""

    broadcast = True

    def open(self, branch_names: Sequence[str], schema: Schema) -> None:
        super().open(branch_names, schema)
        self._all = tuple(range(len(branch_names)))

    def route(self, record: Record) -> Sequence[int]:
        return self._all


class ByFieldSettings(Settings):
    field: str = Field(description="the field whose value picks the branches")
    routes: dict[str, list[Any]] = Field(description="{branch: [values]}: a record goes to each branch listing its value")
    default: str | None = Field(default=None, description="the branch of a record no route lists (unset: such a record is dropped)")


class ByFieldFork(ForkOperator):
    """Sends a record to each branch whose `routes` list holds the record's `field` value;
    unmatched records go to `default` (a branch name) or to no branch."""

    Settings = ByFieldSettings

    def open(self, branch_names: Sequence[str], schema: Schema) -> None:
        super().open(branch_names, schema)
        index = {name: i for i, name in enumerate(branch_names)}
        unknown = [b for b in [*self.settings.routes, self.settings.default] if b is not None and b not in index]
        if unknown:
            raise TaskError(f"fork.routes names unknown branch(es) {', '.join(unknown)}; branches are {', '.join(branch_names)}")
        table: dict[Any, list[int]] = {}
        for branch, values in self.settings.routes.items():
            for v in values:
                table.setdefault(v, []).append(index[branch])
        self._table = {k: tuple(v) for k, v in table.items()}
        self._default = (index[self.settings.default],) if self.settings.default else ()

    def route(self, record: Record) -> Sequence[int]:
        return self._table.get(record.get(self.settings.field), self._default)
