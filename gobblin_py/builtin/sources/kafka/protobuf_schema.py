"""Registered Protobuf schemas made file descriptors, and the Avro record schema a message is read into.

What planning (the output schema) and reading (each writer schema) both ask of the registry's Protobuf files."""

from __future__ import annotations

import base64
import importlib
from dataclasses import dataclass
from typing import Any

from gobblin_py.builtin.sources.kafka.registry import ask
from gobblin_py.builtin.sources.kafka.settings import SchemaRegistrySettings
from gobblin_py.errors import RetriableTaskError, describe

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


def scalars() -> dict[int, str]:
    from google.protobuf.descriptor import FieldDescriptor as F

    return {F.TYPE_INT32: "int", F.TYPE_SINT32: "int", F.TYPE_SFIXED32: "int",
            F.TYPE_INT64: "long", F.TYPE_SINT64: "long", F.TYPE_SFIXED64: "long",
            F.TYPE_UINT32: "long", F.TYPE_FIXED32: "long", F.TYPE_UINT64: "long", F.TYPE_FIXED64: "long",
            F.TYPE_FLOAT: "float", F.TYPE_DOUBLE: "double", F.TYPE_BOOL: "boolean",
            F.TYPE_STRING: "string", F.TYPE_BYTES: "bytes"}


def is_message(field: Any) -> bool:
    from google.protobuf.descriptor import FieldDescriptor as F

    return field.type in (F.TYPE_MESSAGE, F.TYPE_GROUP)


def is_repeated(field: Any) -> bool:
    """protobuf 7 has `is_repeated` and no `label`; earlier ones the label."""
    repeated = getattr(field, "is_repeated", None)
    return repeated if repeated is not None else field.label == field.LABEL_REPEATED


def is_map(field: Any) -> bool:
    return is_repeated(field) and is_message(field) and field.message_type.GetOptions().map_entry


def unsigned64(field: Any) -> bool:
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
                found = ask(s, what, lambda ref=ref: client.get_version(ref.subject, ref.version, True, "serialized"))
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
        self.scalars = scalars()
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
        if is_map(f):
            value = f.message_type.fields_by_name["value"]
            return {"name": f.name, "type": {"type": "map", "values": self.single(value)}, "default": {}}
        if is_repeated(f):
            return {"name": f.name, "type": {"type": "array", "items": self.single(f)}, "default": []}
        kind = self.single(f)
        if is_message(f) or f.has_presence:
            return {"name": f.name, "type": ["null", kind], "default": None}
        return {"name": f.name, "type": kind, "default": _default(f)}

    def single(self, f: Any) -> Any:
        """A field's type without its presence: its element's for a repeated one."""
        if is_message(f):
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
