"""Flat Protobuf messages → one Arrow record batch, a field at a time for all messages at once (numpy), with no Python
object per message: the columnar twin of the `confluent_protobuf` row path (`sources/kafka/protobuf_convert.py`).

Wire format is tag-ordered, not positional as Avro is, so the parser goes in rounds: each round reads the next tag of
every message not yet at its end (varints from 8-byte words, as `avro_datums`), then each field number met in that
round is read for the messages that have it there (serializers write fields in number order, so a round is mostly one
field). A later occurrence of a field overwrites an earlier one, as Protobuf's last-one-wins; fields the schema lacks
are skipped by their wire type. No library was used: `protarrow` and the like convert *parsed* message objects, which
is the cost this avoids.

Only what is proven the same as the row path is taken; anything else refuses the whole batch (None) and the caller
reads it message by message: at planning (`for_message` gives None) a repeated, map, message (but
google.protobuf.Timestamp), real oneof or required field, a writer field the output lacks, or an output type other
than the field's own mapping; in `decode`, a group or unknown wire type, a field number 0, a known field with another
wire type, a Timestamp met twice in one message, a varint past 64 bits, invalid UTF-8 in any occurrence of a string field (not
only the last, as Protobuf checks each), a value not in its type's range as written
canonically (an int32 beyond 32 bits, a uint64 beyond Avro's long, a bool other than 0 or 1), an enum number the
schema does not name, invalid UTF-8, a message cut short.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gobblin_py.builtin.schemas.avro_datums import (
    _HIGH_BITS,
    _LOW_BITS,
    _SEVEN,
    SpanDecoder,
    _Bad,
    _blob_array,
    _Cursor,
    _long_varints,
)

_U = np.uint64
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
_INT32 = (-(2**31), 2**31 - 1)
_LONG_MAX = 2**63 - 1
_SECONDS = 9_000_000_000_000  # |seconds| whose micros, nanos added, fit an int64 (±285,000 years)
TIMESTAMP = "google.protobuf.Timestamp"
_WIRE = {"int32": _VARINT, "int64": _VARINT, "uint32": _VARINT, "uint64": _VARINT, "sint32": _VARINT,
         "sint64": _VARINT, "bool": _VARINT, "enum": _VARINT, "fixed64": _I64, "sfixed64": _I64, "double": _I64,
         "string": _LEN, "bytes": _LEN, "timestamp": _LEN, "fixed32": _I32, "sfixed32": _I32, "float": _I32}
_AVRO = {"int32": "int", "sint32": "int", "sfixed32": "int", "int64": "long", "sint64": "long", "sfixed64": "long",
         "uint32": "long", "fixed32": "long", "uint64": "long", "fixed64": "long", "float": "float",
         "double": "double", "bool": "boolean", "string": "string", "bytes": "bytes", "enum": "string"}
_DTYPE = {"int": np.int32, "long": np.int64, "float": np.float32, "double": np.float64, "boolean": np.bool_}


def _uvarints(cur: _Cursor, pos: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The unsigned varints at `pos` (uint64) and the positions after them; _Bad past 64 bits or past its end."""
    if len(pos) and not (pos < end).all():
        raise _Bad("a message is cut short")
    first = cur.bytes[pos]
    if not len(first) or first.max() < 0x80:  # all of one byte, as tags and small values mostly are
        return first.astype(np.uint64), pos + 1
    words = cur.words[pos]
    stops = ~words & _HIGH_BITS
    long_ones = stops == 0
    lowest = stops & (~stops + _U(1))
    x = words & ((lowest << _U(1)) - _U(1)) & _LOW_BITS
    n = x & _U(0x7F)
    for shift, mask in _SEVEN[1:]:
        n |= (x >> shift) & mask
    size = np.bitwise_count((lowest - _U(1)) & _HIGH_BITS).astype(np.int64) + 1
    if long_ones.any():
        where = np.flatnonzero(long_ones)
        n[where], size[where] = _long_varints(cur, pos[where])
    after = pos + size
    if not (after <= end).all():
        raise _Bad("a varint runs past its message")
    return n, after


class _Column:
    """One output field: its writer field's kind (None: the writer lacks it, a constant), number, presence, values."""

    __slots__ = ("arrow", "const", "default", "earlier", "kind", "length", "names", "nullable", "number", "numbers",
                 "presence", "seen", "start", "values")

    def __init__(self, kind: str | None, number: int, presence: bool, nullable: bool, arrow: Any, default: Any,
                 names: dict[int, str] | None = None) -> None:
        self.kind, self.number, self.presence, self.nullable, self.arrow = kind, number, presence, nullable, arrow
        self.default, self.names = default, names
        self.numbers = np.array(sorted(names), np.int64) if names else None
        self.const = kind is None

    def reset(self, n: int) -> None:
        self.seen = np.zeros(n, bool)
        self.earlier: list[tuple[np.ndarray, np.ndarray]] = []  # strings a later occurrence replaced: checked too
        if self.kind in ("string", "bytes") or self.kind == "timestamp":
            self.start, self.length = np.zeros(n, np.int64), np.zeros(n, np.int64)
        elif self.kind == "enum":
            self.values = np.full(n, self.default, np.int64)
        elif self.kind is not None:
            self.values = np.full(n, self.default, _DTYPE[_AVRO[self.kind]])

    def read(self, cur: _Cursor, rows: np.ndarray, pos: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Reads this field's value at `pos` for `rows`; the positions after it."""
        kind = self.kind
        if kind in ("string", "bytes", "timestamp"):
            length, start = _uvarints(cur, pos, end)
            if len(length) and (length > (end - start).astype(np.uint64)).any():
                raise _Bad("a length past its message")
            length = length.astype(np.int64)
            if kind == "timestamp" and self.seen[rows].any():
                raise _Bad("a Timestamp met twice in a message (Protobuf merges them)")
            if kind == "string":
                again = rows[self.seen[rows]]
                if len(again):  # Protobuf checks the UTF-8 of every occurrence, not only the last one's
                    self.earlier.append((self.start[again], self.length[again]))
            self.start[rows], self.length[rows] = start, length
            self.seen[rows] = True
            return start + length
        if _WIRE[kind] == _VARINT:
            n, after = _uvarints(cur, pos, end)
            value = n.view(np.int64)
            if kind in ("int32", "enum"):
                if len(value) and (value.min() < _INT32[0] or value.max() > _INT32[1]):
                    raise _Bad("an int32 beyond 32 bits")
                if kind == "enum" and not np.isin(value, self.numbers).all():
                    raise _Bad("an enum number the schema does not name")
            elif kind in ("uint32", "sint32"):
                if len(n) and n.max() > _U(0xFFFFFFFF):
                    raise _Bad("a 32-bit varint beyond 32 bits")
            elif kind == "uint64":
                if len(n) and n.max() > _U(_LONG_MAX):
                    raise _Bad("a uint64 beyond Avro's long")
            elif kind == "bool" and len(n) and n.max() > _U(1):
                raise _Bad("a bool other than 0 or 1")
            if kind in ("sint32", "sint64"):
                value = (n >> _U(1)).view(np.int64) ^ -(n & _U(1)).view(np.int64)
        elif _WIRE[kind] == _I64:
            after = pos + 8
            words = cur.words[pos]
            value = words.view(np.float64) if kind == "double" else words.view(np.int64)
            if kind == "fixed64" and len(words) and words.max() > _U(_LONG_MAX):
                raise _Bad("a fixed64 beyond Avro's long")
        else:
            after = pos + 4
            low = (cur.words[pos] & _U(0xFFFFFFFF)).astype(np.uint32)
            if kind == "float":
                with np.errstate(invalid="ignore"):
                    value = low.view(np.float32).astype(np.float64).astype(np.float32)
            else:
                value = low.view(np.int32) if kind == "sfixed32" else low.astype(np.int64)
        if len(after) and not (after <= end).all():
            raise _Bad("a value runs past its message")
        self.values[rows] = value
        self.seen[rows] = True
        return after

    def array(self, cur: _Cursor, n: int, pa: Any) -> Any:
        """The column's Arrow array: unset fields null where they have presence and the output is nullable, else
        their default."""
        if self.const:
            return pa.nulls(n, self.arrow) if self.default is None else pa.array([self.default] * n, self.arrow)
        valid = self.seen if self.presence and self.nullable else None
        if valid is not None and valid.all():
            valid = None
        nulls = 0 if valid is None else n - int(np.count_nonzero(valid))
        bitmap = None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))
        if self.kind == "timestamp":
            return self._timestamps(cur, valid, bitmap, nulls, n, pa)
        if self.presence and not self.nullable and not self.seen.all():
            raise _Bad("a field with presence unset in a non-nullable output field")  # the row path gives its default
        for start, length in self.earlier:
            _blob_array(self.arrow, cur.bytes, start, length, None, None, 0, len(start), pa)  # _Bad for bad UTF-8
        if self.kind in ("string", "bytes"):
            keep = slice(None) if valid is None else valid
            return _blob_array(self.arrow, cur.bytes, self.start[keep], self.length[keep], valid, bitmap, nulls, n, pa)
        if self.kind == "enum":
            symbols = pa.array([self.names[k] for k in self.numbers.tolist()], pa.string())
            index = np.searchsorted(self.numbers, self.values).astype(np.int32)
            return symbols.take(pa.Array.from_buffers(pa.int32(), n, [bitmap, pa.py_buffer(index)], nulls)).cast(self.arrow)
        if self.kind == "bool":
            return pa.Array.from_buffers(self.arrow, n, [bitmap, pa.py_buffer(np.packbits(self.values, bitorder="little"))],
                                         nulls)
        return pa.Array.from_buffers(self.arrow, n, [bitmap, pa.py_buffer(np.ascontiguousarray(self.values))], nulls)

    def _timestamps(self, cur: _Cursor, valid: np.ndarray | None, bitmap: Any, nulls: int, n: int, pa: Any) -> Any:
        """google.protobuf.Timestamp (seconds, nanos) as micros since the epoch, as the row path's `_ts`."""
        seconds = _Column("int64", 1, False, False, None, 0)
        nanos = _Column("int32", 2, False, False, None, 0)
        rows = np.flatnonzero(self.seen)
        _parse(cur, self.start[rows], self.start[rows] + self.length[rows], {1: seconds, 2: nanos}, len(rows))
        micros = np.zeros(n, np.int64)
        s = seconds.values
        if len(s) and (s.min() < -_SECONDS or s.max() > _SECONDS):
            raise _Bad("a Timestamp too far from 1970 for int64 arithmetic")  # the row path's Python ints are exact
        micros[rows] = s * 1_000_000 + nanos.values.astype(np.int64) // 1000  # floor division, as Python's
        return pa.Array.from_buffers(self.arrow, n, [bitmap, pa.py_buffer(micros)], nulls)


def _parse(cur: _Cursor, pos: np.ndarray, end: np.ndarray, columns: dict[int, _Column], n: int) -> None:
    """Reads messages `[pos, end)` into the columns (by field number), round by round."""
    for column in columns.values():
        column.reset(n)
    pos = pos.astype(np.int64, copy=True)
    active = np.flatnonzero(pos < end)
    while len(active):
        p, e = pos[active], end[active]
        tags, after = _uvarints(cur, p, e)
        if len(tags) and tags.max() > _U(0xFFFFFFFF):
            raise _Bad("a tag beyond 32 bits")
        wire = (tags & _U(7)).astype(np.int64)
        number = (tags >> _U(3)).astype(np.int64)
        first = int(number[0])
        groups = [first] if (number == first).all() else np.unique(number).tolist()
        for field in groups:
            sel = None if len(groups) == 1 else np.flatnonzero(number == field)
            rows = active if sel is None else active[sel]
            q, qe, w = (after, e, wire) if sel is None else (after[sel], e[sel], wire[sel])
            column = columns.get(field)
            if field == 0:
                raise _Bad("a field number 0")
            if column is not None:
                if not (w == _WIRE[column.kind]).all():
                    raise _Bad(f"field {field} with another wire type")
                pos[rows] = column.read(cur, rows, q, qe)
            else:
                pos[rows] = _skip(cur, q, qe, w)
        if not (pos[active] <= end[active]).all():
            raise _Bad("a message is cut short")
        active = active[pos[active] < end[active]]


def _skip(cur: _Cursor, pos: np.ndarray, end: np.ndarray, wire: np.ndarray) -> np.ndarray:
    """The positions after unknown fields' values, by wire type; _Bad for a group or an undefined wire type."""
    out = np.empty_like(pos)
    for kind in np.unique(wire).tolist():
        sel = wire == kind
        p, e = pos[sel], end[sel]
        if kind == _VARINT:
            out[sel] = _uvarints(cur, p, e)[1]
        elif kind == _I64:
            out[sel] = p + 8
        elif kind == _I32:
            out[sel] = p + 4
        elif kind == _LEN:
            length, start = _uvarints(cur, p, e)
            if (length > (e - start).astype(np.uint64)).any():
                raise _Bad("a length past its message")
            out[sel] = start + length.astype(np.int64)
        else:
            raise _Bad(f"wire type {kind} (a group, or none)")
    return out


def _kind(field: Any) -> str | None:
    """The flat kind of a writer field; None for one this decoder does not read."""
    from google.protobuf.descriptor import FieldDescriptor as F

    repeated = getattr(field, "is_repeated", None)
    if (repeated if repeated is not None else field.label == field.LABEL_REPEATED):
        return None
    if getattr(field, "is_required", None) or getattr(field, "label", None) == F.LABEL_REQUIRED:
        return None
    oneof = field.containing_oneof
    if oneof is not None and len(oneof.fields) > 1:
        return None
    if field.type == F.TYPE_MESSAGE:
        return "timestamp" if field.message_type.full_name == TIMESTAMP else None
    return {F.TYPE_INT32: "int32", F.TYPE_INT64: "int64", F.TYPE_UINT32: "uint32", F.TYPE_UINT64: "uint64",
            F.TYPE_SINT32: "sint32", F.TYPE_SINT64: "sint64", F.TYPE_FIXED32: "fixed32", F.TYPE_FIXED64: "fixed64",
            F.TYPE_SFIXED32: "sfixed32", F.TYPE_SFIXED64: "sfixed64", F.TYPE_FLOAT: "float", F.TYPE_DOUBLE: "double",
            F.TYPE_BOOL: "bool", F.TYPE_STRING: "string", F.TYPE_BYTES: "bytes", F.TYPE_ENUM: "enum"}.get(field.type)


class ProtobufColumnsDecoder(SpanDecoder):
    """Decodes the payloads of one flat writer message into the output record's Arrow columns (see the module doc)."""

    def __init__(self, columns: list[_Column], arrow_schema: Any) -> None:
        self._columns = columns
        self._by_number = {c.number: c for c in columns if not c.const}
        self.arrow_schema = arrow_schema

    @classmethod
    def for_message(cls, message: Any, output_schema: dict[str, Any]) -> ProtobufColumnsDecoder | None:
        """The decoder of `message` (a Descriptor) into `output_schema` (the Avro record of the row path); None where
        the row path must read it."""

        from gobblin_py.builtin.schemas.arrow import arrow_mapping
        from gobblin_py.errors import ConfigError

        try:
            mapping = arrow_mapping(output_schema).schema
        except ConfigError:
            return None
        wanted = {f["name"] for f in output_schema.get("fields", [])}
        if any(f.name not in wanted for f in message.fields):
            return None  # a writer field the output lacks: the row path decides whether that read is lossy
        by_name = message.fields_by_name
        columns = []
        for field, arrow in zip(output_schema["fields"], mapping):
            kind = field["type"]
            nullable = isinstance(kind, list)
            if nullable:
                rest = [k for k in kind if k != "null"]
                if len(rest) != 1:
                    return None
                kind = rest[0]
            writer = by_name.get(field["name"])
            if writer is None:
                default = None if nullable else field.get("default")
                if not nullable and (default is None or kind not in ("int", "long", "float", "double", "boolean",
                                                                      "string")):
                    return None
                columns.append(_Column(None, 0, False, nullable, arrow.type, default))
                continue
            wkind = _kind(writer)
            if wkind is None:
                return None
            if wkind == "timestamp":
                if kind != {"type": "long", "logicalType": "timestamp-micros"} or not nullable:
                    return None
                columns.append(_Column("timestamp", writer.number, True, True, arrow.type, None))
                continue
            if _AVRO[wkind] != kind:
                return None
            names = None
            default = writer.default_value
            if wkind == "enum":
                names = {v.number: v.name for v in writer.enum_type.values}
                if default not in names:
                    return None
            elif wkind in ("string", "bytes") and default not in ("", b""):
                return None
            columns.append(_Column(wkind, writer.number, writer.has_presence, nullable, arrow.type, default, names))
        return cls(columns, mapping)

    def decode(self, data: Any, starts: np.ndarray, ends: np.ndarray) -> Any | None:
        """The messages `data[starts[i]:ends[i]]` as one `pyarrow.RecordBatch` of `arrow_schema`; None when any of
        them does not decode exactly as the row path would."""
        import pyarrow as pa

        n = len(starts)
        cur = _Cursor.over(data, starts, ends)
        if cur is None:
            return None
        try:
            _parse(cur, cur.pos, cur.end, self._by_number, n)
            columns = [c.array(cur, n, pa) for c in self._columns]
        except _Bad:
            return None
        return pa.RecordBatch.from_arrays(columns, schema=self.arrow_schema)
