"""A parsed Protobuf message → the output Avro record, by a function generated once per writer schema and message.

The field-by-name type mapping of reading (protobuf.py's table), kept apart from fetching schemas and framing values."""

from __future__ import annotations

import keyword
from collections.abc import Callable
from typing import Any

from gobblin_py.builtin.sources.kafka.protobuf_schema import (
    LONG_MAX,
    TIMESTAMP,
    TIMESTAMP_MICROS,
    WRAPPERS,
    is_map,
    is_message,
    is_repeated,
    scalars,
    unsigned64,
)
from gobblin_py.builtin.sources.kafka.registry import UndecodableValue


class Mismatch(ValueError):
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
        self.scalars = scalars()
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
                raise Mismatch(f"field {path}: the output's union {kind} is none this reader makes")
            kind = self.resolve(rest[0], namespace)
        access = f"m.{f.name}" if not keyword.iskeyword(f.name) else f"getattr(m, {f.name!r})"
        if is_map(f):
            if not (isinstance(kind, dict) and kind.get("type") == "map"):
                raise Mismatch(f"field {path}: a map in the writer, {_show(kind)} in the output schema")
            key_field = f.message_type.fields_by_name["key"]
            value = self.single(f.message_type.fields_by_name["value"], kind["values"], "v", f"{path}{{}}", namespace)
            key = "k" if key_field.type == key_field.TYPE_STRING else \
                "('true' if k else 'false')" if key_field.type == key_field.TYPE_BOOL else "str(k)"
            return f"dict({access})" if key == "k" and value == "v" else f"{{{key}: {value} for k, v in {access}.items()}}"
        if is_repeated(f):
            if not (isinstance(kind, dict) and kind.get("type") == "array"):
                raise Mismatch(f"field {path}: repeated in the writer, {_show(kind)} in the output schema")
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
        if is_message(f):
            full = f.message_type.full_name
            if full == TIMESTAMP:
                if kind != TIMESTAMP_MICROS:
                    raise Mismatch(f"field {path}: a Timestamp in the writer, {_show(kind)} in the output schema")
                return f"_ts({access})"
            if full in WRAPPERS:
                return self.scalar(f.message_type.fields_by_name["value"], kind, f"{access}.value", path)
            if not (isinstance(kind, dict) and kind.get("type") == "record"):
                raise Mismatch(f"field {path}: message {full} in the writer, {_show(kind)} in the output schema")
            return f"{self.record(f.message_type, kind, f'{path}.', namespace)}({access})"
        if f.enum_type is not None:
            if kind != "string":
                raise Mismatch(f"field {path}: enum {f.enum_type.full_name} in the writer, {_show(kind)} in the output "
                                "schema")
            names = _EnumNames((v.number, v.name) for v in f.enum_type.values)
            return f"{self.constant(names, 'e')}[{access}]"
        return self.scalar(f, kind, access, path)

    def scalar(self, f: Any, kind: Any, access: str, path: str) -> str:
        writer = self.scalars[f.type]
        if writer != kind and (writer, kind) not in PROMOTE:
            raise Mismatch(f"field {path}: {writer} in the writer, {_show(kind)} in the output schema")
        if unsigned64(f):
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
    Mismatch for a field the output cannot hold."""
    gen = _Generate()
    gen.resolve(out, "")
    top = gen.record(message, out, "", "")
    exec("\n".join(gen.lines), gen.names)  # noqa: S102 - source generated here from field names checked as identifiers
    return gen.names[top], gen.lost
