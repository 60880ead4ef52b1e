"""Row-level quality policies: `required_fields` and `schema_check`."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from gobblin_py.api import RowPolicy, Settings
from gobblin_py.api.types import Record, Schema
from gobblin_py.builtin.avro_values import AvroTypeChecker


class RequiredFieldsSettings(Settings):
    fields: list[str] = Field(min_length=1)


class RequiredFieldsPolicy(RowPolicy):
    """Fails a record where any of `fields` is missing, null or an empty string."""

    Settings = RequiredFieldsSettings

    def check(self, record: Record) -> str | None:
        missing = [f for f in self.settings.fields if record.get(f) in (None, "")]
        if missing:
            return f"required field{'s' if len(missing) > 1 else ''} missing: {', '.join(missing)}"
        return None


class SchemaCheckPolicy(RowPolicy):
    """Fails a record that does not conform to the current Avro schema (names the first bad field)."""

    def open(self, schema: Schema) -> None:
        is_record = isinstance(schema, dict) and schema.get("type") == "record"
        self.checker: Any = AvroTypeChecker(schema) if is_record else None

    def check(self, record: Record) -> str | None:
        if self.checker is None:
            return None
        for f in self.checker.parsed_fields():
            value = record.get(f["name"])
            if not self.checker.matches(value, f["type"]):
                return f"field {f['name']!r}: {value!r} does not match the schema"
        return None
