"""Row-level quality policies: `required_fields` and `schema_check`."""

from __future__ import annotations

from typing import Any

import fastavro
from fastavro.validation import validate
from pydantic import Field

from gobblin_py.api import RowPolicy, Settings
from gobblin_py.api.types import Record, Schema


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
        self.schema: Any = fastavro.parse_schema(schema) if isinstance(schema, dict) and schema.get("type") == "record" else None

    def check(self, record: Record) -> str | None:
        if self.schema is None:
            return None
        if validate(record, self.schema, raise_errors=False):
            return None
        for f in self.schema["fields"]:
            if not validate(record.get(f["name"]), f["type"], raise_errors=False):
                return f"field {f['name']!r}: {record.get(f['name'])!r} does not match the schema"
        return "record does not match the schema"
