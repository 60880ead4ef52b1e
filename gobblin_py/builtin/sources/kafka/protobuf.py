"""`deserializer: confluent_protobuf`: values written by Confluent's ProtobufSerializer (magic byte 0, a 4-byte schema
id, the message indexes, the Protobuf payload), their schemas in a schema registry (schemaType PROTOBUF).

A run reads every value into one output schema: an Avro record schema derived, at planning, from the message the job
names (`protobuf_message`, else the first message of the file) in the subject's latest version, so the avro and parquet
writers and the Iceberg publisher write it as they write `confluent_avro`'s. Each value is parsed with its own writer
schema (fetched by id, imports resolved through the registry's references) and converted into the output record field
by field NAME, by a converter generated once per schema id and message: an output field the writer lacks gets its
default (null for a nullable one), a writer field the output lacks is read only when the writer is a version of the
subject up to the output's (`LossyRead` otherwise, as for Avro).

Mapping (docs/sources/kafka.md has the table): int32/sint32/sfixed32 → int; int64/sint64/sfixed64, uint32, fixed32 →
long; uint64/fixed64 → long, a value above 2^63-1 a bad record; float, double, bool, string, bytes as themselves; an
enum → string (its value's name; a number the schema does not name → the number as text); a message → a nullable
record; repeated → array; map → Avro map (keys as text: integers in decimal, bools `true`/`false`); a field with
presence (a oneof member, proto3 `optional`) → nullable; google.protobuf.Timestamp → nullable timestamp-micros; the
wrappers (Int64Value, …) → the nullable scalar. A proto3 field without presence that was never set reads as its
default (0, "", false, empty), as Protobuf defines. A recursive message is refused at planning.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gobblin_py.builtin.sources.kafka.protobuf_convert import Mismatch, converter
from gobblin_py.builtin.sources.kafka.protobuf_schema import (
    Recursive,
    Unresolvable,
    avro_schema,
    message_name,
    proto_file,
)
from gobblin_py.builtin.sources.kafka.registry import (
    HEADER,
    LossyRead,
    OutputSchema,
    UndecodableValue,
    Unusable,
    _WireFormat,
    ask,
    version_in,
)
from gobblin_py.builtin.sources.kafka.settings import SchemaRegistrySettings
from gobblin_py.errors import RetriableTaskError, SourceError, describe


def latest_protobuf_schema(s: SchemaRegistrySettings, client: Any, subject: str, topic: str,
                           message: str | None) -> OutputSchema:
    """The Avro record schema of `message` (or the first message) in the subject's latest version, which must be a
    Protobuf schema (planning)."""
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    try:
        found = ask(s, f"the latest version of subject {subject!r}", lambda: client.get_latest_version(subject, "serialized"))
    except SchemaRegistryError as exc:
        if exc.http_status_code == 404:
            raise SourceError(f"topic {topic!r}: subject {subject!r} is not in {s.endpoint} ({exc.error_message}); "
                              "produce with Confluent's ProtobufSerializer first, or set source.subject to the subject "
                              "that holds the topic's value schemas") from None
        raise SourceError(f"topic {topic!r}: {s.endpoint} answered {exc} for subject {subject!r}") from None
    where = f"topic {topic!r}: subject {subject!r} version {found.version} (schema id {found.schema_id})"
    kind = found.schema.schema_type or "AVRO"
    if kind != "PROTOBUF":
        raise SourceError(f"{where} is {'an' if kind[:1] in 'AEIOU' else 'a'} {kind} schema; confluent_protobuf reads "
                          "Protobuf values only")
    try:
        chosen = proto_file(s, client, found.schema).named(message)
        schema = avro_schema(chosen)
    except (Unresolvable, Recursive) as exc:
        raise SourceError(f"{where}: {exc}" + (
            "; name another message with source.protobuf_message, or read the topic with deserializer: bytes"
            if isinstance(exc, Recursive) else "")) from None
    return OutputSchema(subject, int(found.version), int(found.schema_id), schema)


# --- reading: framing, fetching, one reader per schema id and message -----------------------------------------------

def _varint(raw: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(raw) or shift > 63:
            raise UndecodableValue("the message indexes after the schema id are cut short")
        byte = raw[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        shift += 7
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), pos  # zig-zag


def message_indexes(raw: bytes) -> tuple[tuple[int, ...], int]:
    """The message indexes after the header (a count, then that many indexes; a count 0 means [0]) and where the
    payload starts."""
    count, pos = _varint(raw, HEADER.size)
    if count == 0:
        return (0,), pos
    if not 0 < count <= 64:
        raise UndecodableValue(f"the message indexes' count is {count}, not a message's depth")
    indexes = []
    for _ in range(count):
        index, pos = _varint(raw, pos)
        indexes.append(index)
    return tuple(indexes), pos


@dataclass(frozen=True)
class _Reader:
    parse: Callable[[bytes], Any]
    convert: Callable[[Any], dict[str, Any]]


class ConfluentProtobufDecoder(_WireFormat):
    """Decodes one value into the planned output record: its writer schema fetched by id, its message found by the
    indexes, parsed by a message class made from the descriptor and converted by a generated function (each once per
    schema id and message, and task)."""

    kind = "PROTOBUF"
    wanted = "Protobuf"

    def __init__(self, s: SchemaRegistrySettings, out: OutputSchema) -> None:
        super().__init__(s)
        self.out = out
        self.message = message_name(out.schema)
        self.readers: dict[Any, _Reader | Unusable | LossyRead] = {}  # header + [0], or (id, indexes) → its reader

    def _fetch(self, schema_id: int) -> Any:
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        try:
            schema = ask(self.settings, f"schema id {schema_id}", lambda: self.client.get_schema(schema_id, None, "serialized"))
        except SchemaRegistryError as exc:
            if exc.http_status_code == 404:
                return Unusable(f"not in {self.settings.endpoint} ({exc.error_message})")
            raise RetriableTaskError(f"{self.settings.endpoint} answered {exc} for schema id {schema_id}") from None
        kind = schema.schema_type or "AVRO"
        if kind != self.kind:
            return Unusable(f"{'an' if kind[:1] in 'AEIOU' else 'a'} {kind} schema, not {self.wanted}")
        try:
            return schema, proto_file(self.settings, self.client, schema)
        except Unresolvable as exc:
            return Unusable(f"a Protobuf schema that cannot be read: {exc}")

    def _reader(self, schema_id: int, indexes: tuple[int, ...]) -> _Reader | Unusable | LossyRead:
        from google.protobuf.message_factory import GetMessageClass

        try:
            schema, found = self.schema(schema_id)
        except UndecodableValue as exc:
            return Unusable(str(exc).partition(": ")[2])
        try:
            message = found.message(indexes)
        except Unresolvable as exc:
            return Unusable(str(exc))
        if message.full_name != self.message:
            return Unusable(f"message {message.full_name} (indexes {list(indexes)}), not {self.message}, whose schema "
                            f"is the output's")
        try:
            convert, lost = converter(message, self.out.schema)
        except Mismatch as exc:
            return Unusable(f"cannot be read as {self.out.describe()} (the output schema): {exc}")
        if lost and schema_id != self.out.schema_id:
            version = self._version_of(schema_id, schema)
            if version is None or version > self.out.version:
                what = f"version {version} of subject {self.out.subject!r}" if version is not None else \
                    f"no version of subject {self.out.subject!r}"
                return LossyRead(f"schema id {schema_id} ({what}) has field(s) {', '.join(lost)} that the output schema "
                                 f"(version {self.out.version}, schema id {self.out.schema_id}) lacks: read into it they "
                                 "would be lost, so nothing of this range is published. Register the writer's schema as "
                                 "the subject's newest version (the next run reads into it), or correct the producer")
        return _Reader(GetMessageClass(message).FromString, convert)

    def message_read_as_output(self, schema_id: int) -> Any | None:
        """The message (a Descriptor) of schema id `schema_id`'s first message (indexes [0]) when its values read into
        the output schema (the planned message, no field lost); None otherwise (for the columnar path)."""
        key = (schema_id, (0,))
        reader = self.readers.get(key)
        if reader is None:
            reader = self.readers[key] = self._reader(schema_id, (0,))
        if type(reader) is not _Reader:
            return None
        return self.schema(schema_id)[1].message((0,))

    def _version_of(self, schema_id: int, schema: Any) -> int | None:
        """The subject's version of schema `schema_id`; None when it is none of them."""
        return version_in(self.settings, self.client, self.out.subject, schema_id, schema)

    def __call__(self, raw: bytes) -> Any:
        from google.protobuf.message import DecodeError

        key: Any = raw[:HEADER.size + 1]
        reader = self.readers.get(key) if len(raw) > HEADER.size and raw[HEADER.size] == 0 else None
        start = HEADER.size + 1
        if reader is None:
            schema_id = self.schema_id(raw)
            indexes, start = message_indexes(raw)
            if indexes != (0,) or start != HEADER.size + 1:
                key = (schema_id, indexes)
            reader = self.readers.get(key)
            if reader is None:
                reader = self.readers[key] = self._reader(schema_id, indexes)
        if type(reader) is _Reader:
            try:
                message = reader.parse(raw[start:])
            except DecodeError as exc:
                raise UndecodableValue(f"schema id {self.schema_id(raw)}: the Protobuf payload does not parse "
                                       f"({describe(exc)})") from None
            return reader.convert(message)
        if type(reader) is LossyRead:
            raise LossyRead(str(reader))
        raise UndecodableValue(f"schema id {self.schema_id(raw)}: {reader}")
