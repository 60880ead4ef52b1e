"""`metadata_columns`: each message's key, topic, partition, offset, timestamp and headers as `_kafka_<name>` fields,
added to the output schema (planning checks they clash with no value field) and to each record; under `tombstones:
delete`, `_kafka_deleted` too, and the value fields made nullable (a tombstone's are null)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from gobblin_py.builtin.sources.kafka.registry import UndecodableValue
from gobblin_py.builtin.sources.kafka.settings import KafkaSettings

PREFIX = "_kafka_"
DELETED = PREFIX + "deleted"
"""`tombstones: delete`: true for a tombstone (its value fields null), false for every other record."""

HEADERS_TYPE = {"type": "array", "items": {
    "type": "record", "name": "KafkaHeader", "namespace": "gobblin_py.kafka",
    "fields": [{"name": "key", "type": "string"}, {"name": "value", "type": ["null", "bytes"]}]}}
"""`_kafka_headers`: Kafka keeps a message's headers in order and allows a key twice, and a header without a value."""


class BadMetadata(ValueError):
    """A message's key or headers that cannot be read into their field: a bad record, its reason the message."""


class MessageDetails(NamedTuple):
    """What a message carries besides its value, as the client gave it (asked only when `metadata_columns` are)."""

    key: bytes | None
    timestamp: int | None  # ms; None or -1 when the message has none
    headers: Sequence[tuple[str, bytes | None]] | BadMetadata | None  # None: not asked, or none


def key_type(s: KafkaSettings, key_schema: Any = None) -> Any:
    """The Avro type of `_kafka_key`: nullable (a message may have no key), of the key subject's schema under
    `metadata_key: confluent_avro`."""
    if not s.avro_keys:
        return ["null", s.metadata_key]
    members = key_schema if isinstance(key_schema, list) else [key_schema]  # a union key schema: null joins it
    return ["null", *(m for m in members if m != "null")]


def metadata_fields(s: KafkaSettings, key_schema: Any = None) -> list[dict[str, Any]]:
    """The Avro fields `metadata_columns` adds, in the order given (`key_schema`: the key subject's planned schema)."""
    types: dict[str, Any] = {
        "key": key_type(s, key_schema) if "key" in s.metadata_columns else None,
        "topic": "string",
        "partition": "int",
        "offset": "long",
        "timestamp": ["null", {"type": "long", "logicalType": "timestamp-millis"}],  # -1 (none) is null
        "headers": HEADERS_TYPE,
    }
    defaults = {"key": None, "timestamp": None, "headers": []}
    fields = [{"name": PREFIX + c, "type": types[c], **({"default": defaults[c]} if c in defaults else {})}
              for c in s.metadata_columns]
    if s.tombstones == "delete":
        fields.append({"name": DELETED, "type": "boolean", "default": False})
    return fields


def _nullable(field: dict[str, Any]) -> dict[str, Any]:
    """An Avro field that admits null (a tombstone's value fields), defaulting to it."""
    kind = field["type"]
    members = kind if isinstance(kind, list) else [kind]
    if "null" in members:
        return {**field, "type": ["null", *(m for m in members if m != "null")], "default": None}
    return {**field, "type": ["null", *members], "default": None}


def clashes(s: KafkaSettings, schema: dict[str, Any]) -> list[str]:
    """The metadata fields the value schema already has (a ConfigError where it is checked)."""
    names = {f.get("name") for f in schema.get("fields", [])}
    return [f["name"] for f in metadata_fields(s) if f["name"] in names]


def with_metadata(s: KafkaSettings, schema: dict[str, Any], key_schema: Any = None) -> dict[str, Any]:
    """The output schema: the value schema with the metadata fields appended (itself when none are asked)."""
    if not s.metadata_columns:
        return schema
    values = schema.get("fields", [])
    if s.tombstones == "delete":
        values = [_nullable(f) for f in values]
    return {**schema, "fields": [*values, *metadata_fields(s, key_schema)]}


def metadata_of(s: KafkaSettings, topic: str, partition: int,
                decode_key: Callable[[bytes], Any] | None = None) -> Callable[[int, MessageDetails], dict[str, Any]] | None:
    """A function of (offset, details) giving a record's metadata fields (BadMetadata for a key or headers that cannot
    be read); None when none are asked. `decode_key`: the key subject's decoder under `metadata_key: confluent_avro`."""
    columns = s.metadata_columns
    if not columns:
        return None
    as_text = s.metadata_key == "string"

    def key_of(key: bytes | None) -> Any:
        if key is None:
            return None
        if decode_key is not None:
            try:
                return decode_key(key)
            except UndecodableValue as exc:
                raise BadMetadata(f"the key cannot be decoded as confluent_avro: {exc}") from None
        if as_text:
            try:
                return key.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise BadMetadata(f"the key is not UTF-8 (metadata_key: string; bytes keeps it as it is): {exc}") from None
        return key

    def headers_of(headers: Sequence[tuple[str, bytes | None]] | BadMetadata | None) -> list[dict[str, Any]]:
        if isinstance(headers, BadMetadata):
            raise headers
        return [{"key": k, "value": v} for k, v in headers or ()]

    makers: dict[str, Callable[[int, MessageDetails], Any]] = {
        "key": lambda offset, m: key_of(m.key),
        "topic": lambda offset, m: topic,
        "partition": lambda offset, m: partition,
        "offset": lambda offset, m: offset,
        "timestamp": lambda offset, m: m.timestamp if m.timestamp is not None and m.timestamp >= 0 else None,
        "headers": lambda offset, m: headers_of(m.headers),
    }
    chosen = [(PREFIX + c, makers[c]) for c in columns]
    if s.tombstones == "delete":
        chosen.append((DELETED, lambda offset, m: False))
    return lambda offset, m: {name: make(offset, m) for name, make in chosen}
