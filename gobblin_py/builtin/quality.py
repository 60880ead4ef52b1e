"""The `quality:` section's built-in policies: row-level `required_fields` and `schema_check`; task-level
`row_count` and `row_count_range` (Gobblin's RowCountPolicy/RowCountRangePolicy)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from gobblin_py.api import BranchStats, RowPolicy, Settings, TaskPolicy
from gobblin_py.api.types import Record, Schema
from gobblin_py.builtin.schemas.avro_values import AvroTypeChecker


class RequiredFieldsSettings(Settings):
    fields: list[str] = Field(min_length=1, description="a record fails when one is missing, null or empty")


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



class RowCountSettings(Settings):
    min: int = Field(default=0, ge=0, description="records the branch must write at least")


class RowCountPolicy(TaskPolicy):
    """Every record that reached the branch's writer was written, and at least `min` were."""

    Settings = RowCountSettings

    def check(self, stats: BranchStats, records_extracted: int) -> str | None:
        handed = stats.records_in - sum(stats.rejected.values())
        if stats.records_written != handed:
            return f"branch {stats.branch}: {handed} records reached the writer but {stats.records_written} were written"
        if stats.records_written < self.settings.min:
            return f"branch {stats.branch}: wrote {stats.records_written} records, fewer than min {self.settings.min}"
        return None


class RowCountRangeSettings(Settings):
    range: float = Field(default=0.05, ge=0, description="records written may differ from records extracted by this fraction")


class RowCountRangePolicy(TaskPolicy):
    """Records written are within ±`range` (a fraction) of records extracted."""

    Settings = RowCountRangeSettings

    def check(self, stats: BranchStats, records_extracted: int) -> str | None:
        if records_extracted == 0:
            return None
        ratio = stats.records_written / records_extracted
        r = self.settings.range
        if not (1 - r <= ratio <= 1 + r):
            return (f"branch {stats.branch}: wrote {stats.records_written} of {records_extracted} extracted records "
                    f"({ratio:.1%}), outside 100% ± {r:.0%}")
        return None
