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

import base64
import importlib
import keyword
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gobblin_py.builtin.sources.kafka.registry import (HEADER, LossyRead, OutputSchema, UndecodableValue, Unusable,
                                                       _WireFormat, ask, version_in)
from gobblin_py.builtin.sources.kafka.settings import SchemaRegistrySettings
from gobblin_py.errors import RetriableTaskError, SourceError, describe

TIMESTAMP = "google.protobuf.Timestamp"
WRAPPERS = {"google.protobuf.DoubleValue": "double", "google.protobuf.FloatValue": "float",
            "google.protobuf.Int64Value": "long", "google.protobuf.UInt64Value": "long",
            "google.protobuf.Int32Value": "int", "google.protobuf.UInt32Value": "long",
            "google.protobuf.BoolValue": "boolean", "google.protobuf.StringValue": "string",
            "google.protobuf.BytesValue": "bytes"}
BUILTIN_PREFIXES = ("google/protobuf/", "google/type/", "confluent/")  # what Confluent's serializer never references
LONG_MAX = 2**63 - 1
TIMESTAMP_MICROS = {"type": "long", "logicalType": "timestamp-micros"}


class Unresolvable(ValueError):
    """A registered Protobuf schema that cannot be made a file descriptor (its reason)."""


class Recursive(ValueError):
    """A message that contains itself: no Avro record schema of finite depth holds it."""


def _scalars() -> dict[int, str]:
    from google.protobuf.descriptor import FieldDescriptor as F

    return {F.TYPE_INT32: "int", F.TYPE_SINT32: "int", F.TYPE_SFIXED32: "int",
            F.TYPE_INT64: "long", F.TYPE_SINT64: "long", F.TYPE_SFIXED64: "long",
            F.TYPE_UINT32: "long", F.TYPE_FIXED32: "long", F.TYPE_UINT64: "long", F.TYPE_FIXED64: "long",
            F.TYPE_FLOAT: "float", F.TYPE_DOUBLE: "double", F.TYPE_BOOL: "boolean",
            F.TYPE_STRING: "string", F.TYPE_BYTES: "bytes"}


def _is_message(field: Any) -> bool:
    from google.protobuf.descriptor import FieldDescriptor as F

    return field.type in (F.TYPE_MESSAGE, F.TYPE_GROUP)


def _repeated(field: Any) -> bool:
    """protobuf 7 has `is_repeated` and no `label`; earlier ones the label."""
    repeated = getattr(field, "is_repeated", None)
    return repeated if repeated is not None else field.label == field.LABEL_REPEATED


def _is_map(field: Any) -> bool:
    return _repeated(field) and _is_message(field) and field.message_type.GetOptions().map_entry


def _unsigned64(field: Any) -> bool:
    from google.protobuf.descriptor import FieldDescriptor as F

    return field.type in (F.TYPE_UINT64, F.TYPE_FIXED64)


# --- the schema: a registered file as a descriptor ------------------------------------------------------------------

@dataclass(frozen=True)
class ProtoFile:
    """A registered schema made a file descriptor (its imports resolved), and its messages in declaration order."""

    file: Any  # google.protobuf FileDescriptor
    proto: Any  # its FileDescriptorProto, for the message indexes

    def message(self, indexes: tuple[int, ...]) -> Any:
        """The message descriptor the indexes name (the first message, [0], the usual); Unresolvable for none."""
        found, names = self.proto.message_type, []
        for depth, index in enumerate(indexes):
            if not 0 <= index < len(found):
                raise Unresolvable(f"message indexes {list(indexes)}: index {index} at depth {depth} is out of range "
                                   f"({len(found)} message(s) there)")
            names.append(found[index].name)
            found = found[index].nested_type
        if not names:
            raise Unresolvable("no message indexes")
        package = self.proto.package
        return self.file.pool.FindMessageTypeByName(".".join([package, *names] if package else names))

    def named(self, name: str | None) -> Any:
        """The message `name` (its full name, or a top-level message's own name); the first message for None."""
        if name is None:
            return self.message((0,))
        package = self.proto.package
        for full in (name, f"{package}.{name}" if package else name):
            try:
                return self.file.pool.FindMessageTypeByName(full)
            except KeyError:
                continue
        names = ", ".join(m.full_name for m in self.file.message_types_by_name.values())
        raise Unresolvable(f"has no message {name!r} (its top-level messages: {names or 'none'})")


def proto_file(s: SchemaRegistrySettings, client: Any, schema: Any) -> ProtoFile:
    """The file descriptor of a registered Protobuf schema (asked for in the serialized form, a base64
    FileDescriptorProto): its references fetched from the registry (their own references too), the well-known types
    (google/protobuf, google/type) from the installed packages. Unresolvable says why it cannot be made."""
    from confluent_kafka.schema_registry.error import SchemaRegistryError
    from google.protobuf import descriptor_pb2, descriptor_pool

    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def builtin(name: str) -> None:
        module = name[:-len(".proto")].replace("/", ".") + "_pb2"
        try:
            serialized = importlib.import_module(module).DESCRIPTOR.serialized_pb
        except (ImportError, AttributeError):
            raise Unresolvable(f"imports {name}, a well-known type not installed here (module {module})") from None
        add(name, descriptor_pb2.FileDescriptorProto.FromString(serialized))

    def add(name: str, proto: Any) -> None:
        proto.name = name
        for dep in proto.dependency:
            if dep not in added:
                if not dep.startswith(BUILTIN_PREFIXES):
                    raise Unresolvable(f"imports {dep}, which is neither among its references nor a well-known type")
                builtin(dep)
        try:
            pool.Add(proto)
        except (TypeError, ValueError) as exc:
            raise Unresolvable(f"file {name} is not a valid Protobuf schema ({describe(exc)})") from None
        added.add(name)

    def parse(text: str | None, what: str) -> Any:
        try:
            return descriptor_pb2.FileDescriptorProto.FromString(base64.standard_b64decode((text or "").encode("ascii")))
        except Exception:  # noqa: BLE001 - base64 or Protobuf refusing it: not the serialized form
            raise Unresolvable(f"{what} is not a serialized FileDescriptorProto (base64), as the registry answers "
                               "format=serialized") from None

    def references(of: Any, seen: frozenset[str]) -> None:
        for ref in of.references or []:
            if ref.name in added:
                continue
            if ref.name in seen:
                raise Unresolvable(f"its references import each other in a cycle at {ref.name}")
            if ref.name.startswith(BUILTIN_PREFIXES):
                builtin(ref.name)
                continue
            what = f"reference {ref.name} (subject {ref.subject!r} version {ref.version})"
            try:
                found = ask(s, what, lambda: client.get_version(ref.subject, ref.version, True, "serialized"))
            except SchemaRegistryError as exc:
                if exc.http_status_code == 404:
                    raise Unresolvable(f"{what} is not in {s.endpoint} ({exc.error_message})") from None
                raise RetriableTaskError(f"{s.endpoint} answered {exc} for {what}") from None
            references(found.schema, seen | {ref.name})
            add(ref.name, parse(found.schema.schema_str, what))

    references(schema, frozenset())
    proto = parse(schema.schema_str, "the schema")
    name = proto.name or "default"
    if name not in added:
        add(name, proto)
    return ProtoFile(pool.FindFileByName(name), proto)


# --- planning: the Avro record schema of a message -----------------------------------------------------------------

class _Derive:
    """The Avro schema of one message: each record defined once (later uses name it), recursion refused."""

    def __init__(self) -> None:
        self.scalars = _scalars()
        self.defined: set[str] = set()
        self.stack: list[str] = []

    def record(self, message: Any) -> Any:
        full = message.full_name
        if full in self.stack:
            chain = " → ".join([*self.stack[self.stack.index(full):], full])
            raise Recursive(f"message {self.stack[0]} is recursive ({chain}): no Avro record schema holds it")
        if full in self.defined:
            return full
        self.defined.add(full)
        self.stack.append(full)
        namespace = full.rpartition(".")[0]
        fields = [self.field(f) for f in message.fields]
        self.stack.pop()
        return {"type": "record", "name": message.name, **({"namespace": namespace} if namespace else {}),
                "fields": fields}

    def field(self, f: Any) -> dict[str, Any]:
        if _is_map(f):
            value = f.message_type.fields_by_name["value"]
            return {"name": f.name, "type": {"type": "map", "values": self.single(value)}, "default": {}}
        if _repeated(f):
            return {"name": f.name, "type": {"type": "array", "items": self.single(f)}, "default": []}
        kind = self.single(f)
        if _is_message(f) or f.has_presence:
            return {"name": f.name, "type": ["null", kind], "default": None}
        return {"name": f.name, "type": kind, "default": _default(f)}

    def single(self, f: Any) -> Any:
        """A field's type without its presence: its element's for a repeated one."""
        if _is_message(f):
            full = f.message_type.full_name
            if full == TIMESTAMP:
                return dict(TIMESTAMP_MICROS)
            if full in WRAPPERS:
                return WRAPPERS[full]
            return self.record(f.message_type)
        if f.enum_type is not None:
            return "string"
        return self.scalars[f.type]


def _default(f: Any) -> Any:
    """A scalar field's default as an Avro schema's JSON writes it (bytes as ISO-8859-1 text, an enum by name)."""
    if f.enum_type is not None:
        value = f.enum_type.values_by_number.get(f.default_value)
        return value.name if value is not None else str(f.default_value)
    if isinstance(f.default_value, bytes):
        return f.default_value.decode("latin-1")
    return f.default_value


def avro_schema(message: Any) -> dict[str, Any]:
    """The Avro record schema of a message descriptor (Recursive for a message that contains itself)."""
    return _Derive().record(message)


def message_name(schema: dict[str, Any]) -> str:
    """The Protobuf message an output schema was derived from: the record's full name."""
    namespace = schema.get("namespace")
    return f"{namespace}.{schema['name']}" if namespace else schema["name"]


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


# --- reading: a converter per writer schema and message ------------------------------------------------------------

class _Mismatch(ValueError):
    """A writer field whose type the output field cannot hold."""


PROMOTE = {("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"), ("long", "double"),
           ("float", "double")}


class _EnumNames(dict):  # type: ignore[type-arg]
    """An enum's names by number; a number the schema does not name reads as its decimal text (proto3 enums are open)."""

    def __missing__(self, number: int) -> str:
        return str(number)


def _timestamp(t: Any) -> int:
    return t.seconds * 1_000_000 + t.nanos // 1000


class _Generate:
    """Python source of one function per (writer message, output record): a dict by output field name, each value
    taken from the writer's field of that name (its default where the writer has none). The writer fields the output
    lacks are collected in `lost`."""

    def __init__(self) -> None:
        self.scalars = _scalars()
        self.names: dict[str, Any] = {"_ts": _timestamp}  # the generated code's globals
        self.lines: list[str] = []
        self.done: dict[tuple[str, int], str] = {}
        self.named: dict[str, Any] = {}  # the output schema's named records, by full name
        self.lost: list[str] = []

    def constant(self, value: Any, stem: str) -> str:
        name = f"_{stem}{len(self.names)}"
        self.names[name] = value
        return name

    def resolve(self, avro: Any, namespace: str) -> Any:
        if isinstance(avro, str) and avro in self.named:
            return self.named[avro]
        if isinstance(avro, str) and f"{namespace}.{avro}" in self.named:
            return self.named[f"{namespace}.{avro}"]
        if isinstance(avro, dict) and avro.get("type") == "record":
            full = avro["name"] if "." in avro["name"] or not avro.get("namespace", namespace) else \
                f"{avro.get('namespace', namespace)}.{avro['name']}"
            self.named.setdefault(full, avro)
        return avro

    def record(self, message: Any, out: dict[str, Any], path: str, namespace: str) -> str:
        key = (message.full_name, id(out))
        if key in self.done:
            return self.done[key]
        name = self.done[key] = f"_r{len(self.done)}"
        namespace = out.get("namespace", namespace)
        by_name = message.fields_by_name
        wanted = {f["name"] for f in out["fields"]}
        self.lost.extend(f"{path}{f.name}" for f in message.fields if f.name not in wanted)
        items = []
        for field in out["fields"]:
            writer = by_name.get(field["name"])
            if writer is None:
                value = self.default(field, namespace)
            else:
                value = self.field(writer, field, f"{path}{field['name']}", namespace)
            items.append(f"{field['name']!r}: {value}")
        self.lines.append(f"def {name}(m):\n    return {{{', '.join(items)}}}\n")
        return name

    def default(self, field: dict[str, Any], namespace: str) -> str:
        """An output field the writer lacks: null if nullable, empty for an array or map, else its default."""
        kind = self.resolve(field["type"], namespace)
        if isinstance(kind, list) and "null" in kind:
            return "None"
        if isinstance(kind, dict) and kind.get("type") == "array":
            return "[]"
        if isinstance(kind, dict) and kind.get("type") == "map":
            return "{}"
        value = field.get("default")
        if kind == "bytes" and isinstance(value, str):
            value = value.encode("latin-1")
        return self.constant(value, "d")

    def field(self, f: Any, out: dict[str, Any], path: str, namespace: str) -> str:
        kind = self.resolve(out["type"], namespace)
        nullable = isinstance(kind, list)
        if nullable:
            rest = [k for k in kind if k != "null"]
            if len(rest) != 1:
                raise _Mismatch(f"field {path}: the output's union {kind} is none this reader makes")
            kind = self.resolve(rest[0], namespace)
        access = f"m.{f.name}" if not keyword.iskeyword(f.name) else f"getattr(m, {f.name!r})"
        if _is_map(f):
            if not (isinstance(kind, dict) and kind.get("type") == "map"):
                raise _Mismatch(f"field {path}: a map in the writer, {_show(kind)} in the output schema")
            key_field = f.message_type.fields_by_name["key"]
            value = self.single(f.message_type.fields_by_name["value"], kind["values"], "v", f"{path}{{}}", namespace)
            key = "k" if key_field.type == key_field.TYPE_STRING else \
                "('true' if k else 'false')" if key_field.type == key_field.TYPE_BOOL else "str(k)"
            return f"dict({access})" if key == "k" and value == "v" else f"{{{key}: {value} for k, v in {access}.items()}}"
        if _repeated(f):
            if not (isinstance(kind, dict) and kind.get("type") == "array"):
                raise _Mismatch(f"field {path}: repeated in the writer, {_show(kind)} in the output schema")
            item = self.single(f, kind["items"], "x", f"{path}[]", namespace)
            return f"list({access})" if item == "x" else f"[{item} for x in {access}]"
        value = self.single(f, kind, access, path, namespace)
        if f.has_presence:
            absent = "None" if nullable else self.default(out, namespace)
            return f"({value} if m.HasField({f.name!r}) else {absent})"
        return value

    def single(self, f: Any, kind: Any, access: str, path: str, namespace: str) -> str:
        """The expression of one value of writer field `f` (an element, for a repeated one) as output type `kind`."""
        kind = self.resolve(kind, namespace)
        if _is_message(f):
            full = f.message_type.full_name
            if full == TIMESTAMP:
                if kind != TIMESTAMP_MICROS:
                    raise _Mismatch(f"field {path}: a Timestamp in the writer, {_show(kind)} in the output schema")
                return f"_ts({access})"
            if full in WRAPPERS:
                return self.scalar(f.message_type.fields_by_name["value"], kind, f"{access}.value", path)
            if not (isinstance(kind, dict) and kind.get("type") == "record"):
                raise _Mismatch(f"field {path}: message {full} in the writer, {_show(kind)} in the output schema")
            return f"{self.record(f.message_type, kind, f'{path}.', namespace)}({access})"
        if f.enum_type is not None:
            if kind != "string":
                raise _Mismatch(f"field {path}: enum {f.enum_type.full_name} in the writer, {_show(kind)} in the output "
                                "schema")
            names = _EnumNames((v.number, v.name) for v in f.enum_type.values)
            return f"{self.constant(names, 'e')}[{access}]"
        return self.scalar(f, kind, access, path)

    def scalar(self, f: Any, kind: Any, access: str, path: str) -> str:
        writer = self.scalars[f.type]
        if writer != kind and (writer, kind) not in PROMOTE:
            raise _Mismatch(f"field {path}: {writer} in the writer, {_show(kind)} in the output schema")
        if _unsigned64(f):
            return f"{self.constant(_checked_long(path), 'u')}({access})"
        if kind in ("float", "double") and writer in ("int", "long"):
            return f"float({access})"
        return access


def _checked_long(path: str) -> Callable[[int], int]:
    def check(value: int) -> int:
        if value > LONG_MAX:
            raise UndecodableValue(f"field {path}: uint64 value {value} is beyond Avro's long (2^63-1)")
        return value
    return check


def _show(kind: Any) -> str:
    return kind if isinstance(kind, str) else (kind.get("logicalType") or kind.get("type", "?")) if isinstance(kind, dict) \
        else str(kind)


def converter(message: Any, out: dict[str, Any]) -> tuple[Callable[[Any], dict[str, Any]], list[str]]:
    """The function making a parsed `message` the output record `out`, and the writer fields it drops;
    _Mismatch for a field the output cannot hold."""
    gen = _Generate()
    gen.resolve(out, "")
    top = gen.record(message, out, "", "")
    exec("\n".join(gen.lines), gen.names)  # noqa: S102 - source generated here from field names checked as identifiers
    return gen.names[top], gen.lost


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
        except _Mismatch as exc:
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
