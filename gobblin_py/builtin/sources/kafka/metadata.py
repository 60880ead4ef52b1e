"""`metadata_columns`: each message's key, topic, partition, offset and timestamp as `_kafka_<name>` fields, added to
the output schema (planning checks they clash with no value field) and to each record."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gobblin_py.builtin.sources.kafka.settings import KafkaSettings

PREFIX = "_kafka_"


def metadata_fields(s: KafkaSettings) -> list[dict[str, Any]]:
    """The Avro fields `metadata_columns` adds, in the order given."""
    types: dict[str, Any] = {
        "key": ["null", s.metadata_key],  # a message may have no key
        "topic": "string",
        "partition": "int",
        "offset": "long",
        "timestamp": ["null", {"type": "long", "logicalType": "timestamp-millis"}],  # -1 (none) is null
    }
    return [{"name": PREFIX + c, "type": types[c], **({"default": None} if c in ("key", "timestamp") else {})}
            for c in s.metadata_columns]


def clashes(s: KafkaSettings, schema: dict[str, Any]) -> list[str]:
    """The metadata fields the value schema already has (a ConfigError where it is checked)."""
    names = {f.get("name") for f in schema.get("fields", [])}
    return [f["name"] for f in metadata_fields(s) if f["name"] in names]


def with_metadata(s: KafkaSettings, schema: dict[str, Any]) -> dict[str, Any]:
    """The output schema: the value schema with the metadata fields appended (itself when none are asked)."""
    if not s.metadata_columns:
        return schema
    return {**schema, "fields": [*schema.get("fields", []), *metadata_fields(s)]}


def metadata_of(s: KafkaSettings, topic: str, partition: int) -> Callable[[int, Any, Any], dict[str, Any]] | None:
    """A function of (offset, key, timestamp) giving a record's metadata fields; None when none are asked."""
    columns = s.metadata_columns
    if not columns:
        return None
    as_text = s.metadata_key == "string"

    def key_of(key: bytes | None) -> Any:
        return key.decode("utf-8") if as_text and key is not None else key  # UnicodeDecodeError: a bad record

    makers: dict[str, Callable[[int, Any, Any], Any]] = {
        "key": lambda offset, key, ts: key_of(key),
        "topic": lambda offset, key, ts: topic,
        "partition": lambda offset, key, ts: partition,
        "offset": lambda offset, key, ts: offset,
        "timestamp": lambda offset, key, ts: ts if ts is not None and ts >= 0 else None,
    }
    chosen = [(PREFIX + c, makers[c]) for c in columns]
    return lambda offset, key, ts: {name: make(offset, key, ts) for name, make in chosen}
