"""The `filter` converter: drops (or keeps only) records matching a simple field condition (1:0 / 1:1)."""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import Field

from gobblin_py.api import Converter, Settings
from gobblin_py.api.types import Record, Schema, SchemaKind

_OPS = {
    "eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
    "gt": operator.gt, "ge": operator.ge,
    "in": lambda a, b: a in b, "not_in": lambda a, b: a not in b,
}


class FilterSettings(Settings):
    field: str = Field(description="the field compared")
    op: Literal["eq", "ne", "lt", "le", "gt", "ge", "in", "not_in", "missing", "present"] = Field(
        default="eq", description="how the field is compared with value (missing, present: value is not used)")
    value: Any = Field(default=None, description="the value compared with (a list for in, not_in)")
    action: Literal["drop", "keep"] = Field(default="drop", description="drop the matching records, or keep only them")


class FilterConverter(Converter):
    """`action: drop` removes matching records; `action: keep` removes all others."""

    Settings = FilterSettings

    @classmethod
    def schema_kind(cls, settings: FilterSettings) -> SchemaKind:
        return SchemaKind.KEPT

    def __init__(self, settings: Any = None) -> None:
        super().__init__(settings)
        s = self.settings
        self._drop_on_match = s.action == "drop"

    def convert_schema(self, schema: Schema) -> Schema:
        return schema

    def matches(self, record: Record) -> bool:
        s = self.settings
        v = record.get(s.field)
        if s.op == "missing":
            return v is None
        if s.op == "present":
            return v is not None
        try:
            return bool(_OPS[s.op](v, s.value))
        except TypeError:
            return False

    def convert_record(self, record: Record) -> Iterable[Record]:
        if self.matches(record) == self._drop_on_match:
            return ()
        return (record,)
