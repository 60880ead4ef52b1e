"""Avro schema files (`.avsc`) as sources, converters and writers read them: parsed and checked, or a ConfigError
naming the file."""

from __future__ import annotations

from typing import Any

import fastavro
import orjson

from gobblin_py.errors import ConfigError


def load_avro_schema(path: Any) -> dict[str, Any]:
    """Read and check an .avsc file; ConfigError names the file on any problem."""
    try:
        with open(path, "rb") as f:
            schema = orjson.loads(f.read())
        fastavro.parse_schema(schema)
    except fastavro.schema.UnknownType as exc:
        raise ConfigError(f"{path}: not a valid Avro schema: unknown type {exc.name!r}") from None
    except Exception as exc:  # noqa: BLE001 - unreadable, not JSON, or any schema error fastavro finds
        raise ConfigError(f"{path}: not a valid Avro schema: {exc}") from None
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise ConfigError(f"{path}: the Avro schema must be a record with fields")
    return schema
