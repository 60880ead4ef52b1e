"""Checking a value against part of an Avro schema, named types included."""

from __future__ import annotations

from typing import Any

import fastavro

try:  # fastavro's per-type validator takes the named types a field may refer to
    from fastavro._validation_py import _validate as _fastavro_validate
except ImportError:  # pragma: no cover - fastavro moved it
    _fastavro_validate = None


class AvroTypeChecker:
    """`matches(value, avro_type)` for any field type of one record schema (named types resolved)."""

    def __init__(self, record_schema: dict[str, Any]) -> None:
        self.named: dict[str, Any] = {}
        self.parsed = fastavro.parse_schema(record_schema, named_schemas=self.named)

    def matches(self, value: Any, avro_type: Any) -> bool:
        if _fastavro_validate is None:
            wrapper = {"type": "record", "name": "_check", "fields": [{"name": "v", "type": avro_type}]}
            return fastavro.validation.validate({"v": value}, wrapper, raise_errors=False)
        return _fastavro_validate(value, avro_type, self.named, "", False, {})

    def parsed_fields(self) -> list[dict[str, Any]]:
        return self.parsed["fields"]
