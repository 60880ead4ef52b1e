"""Type aliases shared by the contracts: records, schemas and watermark values."""

from __future__ import annotations

import enum
from typing import Any, TypeAlias

Record: TypeAlias = dict[str, Any]
"""A data record: a mapping of field name to a JSON- or Avro-compatible value."""

Schema: TypeAlias = Any
"""A schema as the extractor or converter defines it (an Avro schema dict for the built-ins)."""

WatermarkValue: TypeAlias = int | float | str | None
"""A JSON value marking progress in one watermark key (a Kafka offset, a file's size)."""


class SchemaKind(str, enum.Enum):
    """What schema a plugin's records carry, as validation tells from its settings alone (before reading)."""

    AVRO = "avro"        # an Avro record schema, which the avro and parquet writers need
    NONE = "none"        # no Avro schema: CSV columns, JSON values, message bytes
    KEPT = "kept"        # a converter: the schema it is given, whichever that is
    UNKNOWN = "unknown"  # cannot be told before reading (a plugin that does not say)
