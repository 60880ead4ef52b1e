"""Field-shaping converters: `select_fields` (keep some), `rename_fields`, `explode` (1:N on a list)."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from pydantic import Field

from gobblin_py.api import Converter, OneToOneConverter, Settings
from gobblin_py.api.types import Record, Schema, SchemaKind
from gobblin_py.errors import RecordError, TaskError


def _avro_fields(schema: Schema) -> list[dict[str, Any]] | None:
    if isinstance(schema, dict) and schema.get("type") == "record":
        return schema["fields"]
    return None


def _with_fields(schema: Schema, fields: list[dict[str, Any]]) -> Schema:
    out = {k: v for k, v in schema.items() if not k.startswith("__")}
    out["fields"] = fields
    return out


class SelectFieldsSettings(Settings):
    fields: list[str] = Field(min_length=1, description="the fields to keep, in this order")


class SelectFieldsConverter(OneToOneConverter):
    """Keeps only `fields`, in that order (1:1)."""

    Settings = SelectFieldsSettings

    @classmethod
    def schema_kind(cls, settings: Any) -> SchemaKind:
        return SchemaKind.KEPT

    def convert_schema(self, schema: Schema) -> Schema:
        fields = _avro_fields(schema)
        if fields is None:
            return schema
        by_name = {f["name"]: f for f in fields}
        missing = [n for n in self.settings.fields if n not in by_name]
        if missing:
            raise TaskError(f"select_fields: {', '.join(missing)} not in the schema (fields: {', '.join(by_name)})")
        return _with_fields(schema, [by_name[n] for n in self.settings.fields])

    def map_record(self, record: Record) -> Record:
        return {name: record.get(name) for name in self.settings.fields}


class RenameFieldsSettings(Settings):
    mapping: dict[str, str] = Field(min_length=1, description="{old: new} field names")


class RenameFieldsConverter(OneToOneConverter):
    """Renames fields per `mapping: {old: new}` (1:1)."""

    Settings = RenameFieldsSettings

    @classmethod
    def schema_kind(cls, settings: Any) -> SchemaKind:
        return SchemaKind.KEPT

    def convert_schema(self, schema: Schema) -> Schema:
        fields = _avro_fields(schema)
        if fields is None:
            return schema
        out = []
        for f in fields:
            f = dict(f)
            f["name"] = self.settings.mapping.get(f["name"], f["name"])
            out.append(f)
        return _with_fields(schema, out)

    def map_record(self, record: Record) -> Record:
        m = self.settings.mapping
        return {m.get(k, k): v for k, v in record.items()}


class ExplodeSettings(Settings):
    field: str = Field(description="the list field: one output record per element")


class ExplodeConverter(Converter):
    """One output record per element of the list in `field` (1:N; an empty list gives 1:0)."""

    Settings = ExplodeSettings

    @classmethod
    def schema_kind(cls, settings: Any) -> SchemaKind:
        return SchemaKind.KEPT

    def convert_schema(self, schema: Schema) -> Schema:
        fields = _avro_fields(schema)
        if fields is None:
            return schema
        out = []
        for f in fields:
            if f["name"] == self.settings.field:
                f = copy.deepcopy(f)
                t = f["type"]
                if not (isinstance(t, dict) and t.get("type") == "array"):
                    raise TaskError(f"explode: field {self.settings.field!r} is not an array in the schema")
                f["type"] = t["items"]
            out.append(f)
        return _with_fields(schema, out)

    def convert_record(self, record: Record) -> Iterable[Record]:
        name = self.settings.field
        values = record.get(name)
        if not isinstance(values, list):
            raise RecordError(f"explode: field {name!r} is not a list: {values!r}", name)
        return [{**record, name: v} for v in values]
