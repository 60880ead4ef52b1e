"""Type aliases shared by the contracts: records, schemas and watermark values."""

from __future__ import annotations

from typing import Any, TypeAlias

Record: TypeAlias = dict[str, Any]
"""A data record: a mapping of field name to a JSON- or Avro-compatible value."""

Schema: TypeAlias = Any
"""A schema as the extractor or converter defines it (an Avro schema dict for the built-ins)."""

WatermarkValue: TypeAlias = int | float | str | None
"""A JSON value marking progress in one watermark key (a Kafka offset, a file's size)."""
