"""Avro binary datums of one flat record schema → one Arrow record batch, a field at a time for all datums at once
(numpy), with no Python object per datum: the decoding side of `writers/avro_arrow.py`.

Every datum's position is one int64 array; each field is read for all datums together: zig-zag varints from 8-byte
words gathered at the positions (continuation bits found with bit arithmetic, the rare longer ones apart), strings
and bytes as their lengths then one gather into the Arrow data buffer, a nullable union's branch first and then its
value only in the datums that have one. The result holds exactly what fastavro's `schemaless_reader` gives for each
datum, in the writers' Arrow mapping (`schemas.arrow.ArrowMapping`), timestamps as the instants fastavro's datetimes
are. Anything this cannot prove the same is refused for the whole batch (None): a schema with a type it lacks
(`for_schema` gives None), and, in `decode`, a varint past 64 bits, a negative length, a union branch or enum index
out of range, a boolean byte other than 0 or 1, a value the row path refuses or cannot hold (an int beyond 32 bits,
a date or timestamp beyond years 1..9999, a time of day past midnight), invalid UTF-8, a datum cut short or longer
than its fields. The caller then decodes that batch value by value, where each bad one is rejected on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from gobblin_py.api.batches import ROW_VALUES

_U = np.uint64
_HIGH_BITS = _U(0x8080808080808080)
_LOW_BITS = _U(0x7F7F7F7F7F7F7F7F)
_SEVEN = [(_U(k), _U(0x7F << (7 * k))) for k in range(8)]  # (shift, mask) folding byte k's 7 bits into place
_INT32 = (-(2**31), 2**31 - 1)
_DAYS = (-719162, 2932896)  # date(1, 1, 1) and date(9999, 12, 31) in days since 1970-01-01
_MICROS = (-62135596800_000000, 253402300799_999999)  # datetime(1, 1, 1) and the last microsecond of 9999, since 1970
_TIMESTAMPS = {"timestamp-millis": 1000, "timestamp-micros": 1, "local-timestamp-millis": 1000,
               "local-timestamp-micros": 1}  # micros a unit of each
_TIMES = {("time-millis", "int"): 86_400_000, ("time-micros", "long"): 86_400_000_000}  # the first value past midnight
_PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")


class _Bad(Exception):
    """A datum of the batch does not decode exactly as fastavro would decode it: the batch takes the row path."""


class _Cursor:
    """The batch's bytes, padded, as bytes and as the little-endian 8-byte word at every offset; each datum's end and
    current position (never past its end)."""

    __slots__ = ("bytes", "end", "pos", "words")

    def __init__(self, data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> None:
        self.bytes = np.concatenate([data, np.zeros(16, np.uint8)])
        self.words = np.ndarray(shape=(len(self.bytes) - 7,), dtype="<u8", buffer=self.bytes, strides=(1,))
        self.pos = starts.astype(np.int64, copy=True)
        self.end = ends.astype(np.int64, copy=False)

    @classmethod
    def over(cls, data: Any, starts: np.ndarray, ends: np.ndarray) -> _Cursor | None:
        """A cursor over the spans `data[starts[i]:ends[i]]` of a bytes-like `data`; None when a span is not inside it."""
        raw = np.frombuffer(data, np.uint8)
        if len(starts) and (starts.min() < 0 or ends.max() > len(raw) or (starts > ends).any()):
            return None
        return cls(raw, starts, ends)

    def at(self, rows: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """The positions and ends of `rows` (None: every datum)."""
        if rows is None:
            return self.pos, self.end
        return self.pos[rows], self.end[rows]

    def advance(self, rows: np.ndarray | None, pos: np.ndarray, end: np.ndarray) -> None:
        if len(pos) and not (pos <= end).all():
            raise _Bad("a datum is cut short")
        if rows is None:
            self.pos = pos
        else:
            self.pos[rows] = pos


def _varints(cur: _Cursor, pos: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The zig-zag longs at `pos` (int64) and the positions after them; _Bad for one past 64 bits or past its end."""
    if len(pos) and not (pos < end).all():
        raise _Bad("a datum is cut short")
    words = cur.words[pos]
    stops = ~words & _HIGH_BITS  # the high bit of each byte that ends the varint (the lowest one counts)
    long_ones = stops == 0  # no end in 8 bytes: 9 or 10 bytes, or a bad one
    lowest = stops & (~stops + _U(1))
    x = words & ((lowest << _U(1)) - _U(1)) & _LOW_BITS  # its bytes' 7-bit groups (all 8 when it ends in the 8th)
    n = x & _U(0x7F)
    for shift, mask in _SEVEN[1:]:
        n |= (x >> shift) & mask
    size = np.bitwise_count((lowest - _U(1)) & _HIGH_BITS).astype(np.int64) + 1  # the high bits below its end, plus it
    if long_ones.any():
        where = np.flatnonzero(long_ones)
        n[where], size[where] = _long_varints(cur, pos[where])
    after = pos + size
    if not (after <= end).all():
        raise _Bad("a varint runs past its datum")
    values = (n >> _U(1)).view(np.int64) ^ -(n & _U(1)).view(np.int64)
    return values, after


def _long_varints(cur: _Cursor, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Varints of 9 or 10 bytes, as unsigned 64-bit values and sizes; _Bad for a longer one or one past 64 bits."""
    b = cur.bytes[pos[:, None] + np.arange(10)].astype(np.uint64)
    more = b >= _U(0x80)
    if more.all(axis=1).any():
        raise _Bad("a varint longer than 10 bytes")
    size = np.argmin(more, axis=1) + 1
    if ((size == 10) & (b[:, 9] > _U(1))).any():
        raise _Bad("a varint past 64 bits")
    taken = np.arange(10) < size[:, None]
    groups = np.where(taken, (b & _U(0x7F)) << (_U(7) * np.arange(10, dtype=np.uint64)), _U(0))
    return np.bitwise_or.reduce(groups, axis=1), size.astype(np.int64)


# --- one field's reader: (cursor, rows or None) → its values for those rows ------------------------------------------

Reader = Callable[[_Cursor, "np.ndarray | None"], Any]


def _long(cur: _Cursor, rows: np.ndarray | None) -> np.ndarray:
    pos, end = cur.at(rows)
    values, after = _varints(cur, pos, end)
    cur.advance(rows, after, end)
    return values


def _ranged(lo: int, hi: int, dtype: Any) -> Reader:
    """A varint whose values must lie in [lo, hi] (what the row path can hold), as `dtype`."""
    def read(cur: _Cursor, rows: np.ndarray | None) -> np.ndarray:
        values = _long(cur, rows)
        if len(values) and (values.min() < lo or values.max() > hi):
            raise _Bad("a value beyond what the row path holds")
        return values.astype(dtype)
    return read


def _fixed_width(size: int, convert: Callable[[np.ndarray], np.ndarray]) -> Reader:
    def read(cur: _Cursor, rows: np.ndarray | None) -> np.ndarray:
        pos, end = cur.at(rows)
        cur.advance(rows, pos + size, end)
        return convert(cur.words[pos])
    return read


def _as_float(words: np.ndarray) -> np.ndarray:
    # through float64 and back, as fastavro's Python float and pyarrow's conversion to float32 take it (a signalling
    # NaN comes out quiet, as it does on the row path)
    with np.errstate(invalid="ignore"):
        return (words & _U(0xFFFFFFFF)).astype(np.uint32).view(np.float32).astype(np.float64).astype(np.float32)


def _as_bool(words: np.ndarray) -> np.ndarray:
    b = words & _U(0xFF)
    if len(b) and b.max() > 1:
        raise _Bad("a boolean byte other than 0 or 1")
    return b.astype(bool)


def _blob(cur: _Cursor, rows: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Strings and bytes: each one's start and length (a long, then that many bytes)."""
    pos, end = cur.at(rows)
    lengths, start = _varints(cur, pos, end)
    if len(lengths) and (lengths.min() < 0 or (lengths > end - start).any()):
        raise _Bad("a negative length, or one past its datum")
    cur.advance(rows, start + lengths, end)
    return start, lengths


def _fixed(size: int) -> Reader:
    def read(cur: _Cursor, rows: np.ndarray | None) -> np.ndarray:
        pos, end = cur.at(rows)
        cur.advance(rows, pos + size, end)
        return cur.bytes[pos[:, None] + np.arange(size)]
    return read


def _enum(count: int) -> Reader:
    return _ranged(0, count - 1, np.int32)


def _nothing(cur: _Cursor, rows: np.ndarray | None) -> None:
    return None


# --- a field: its reader, and how its values become an Arrow array ---------------------------------------------------


class _Field:
    """One top-level field: how to read its non-null values, its union (None: no union), and its Arrow type."""

    __slots__ = ("arrow", "build", "name", "null_branch", "read", "symbols", "value_branch", "width")

    def __init__(self, name: str, read: Reader, build: str, arrow: Any, width: int = 0, symbols: Any = None) -> None:
        self.name, self.read, self.build, self.arrow, self.width, self.symbols = name, read, build, arrow, width, symbols
        self.null_branch: int | None = None
        self.value_branch: int | None = None

    def column(self, cur: _Cursor, n: int, pa: Any) -> Any:
        """The field's Arrow array for all `n` datums, read from the cursor."""
        if self.value_branch is None:
            return self._array(cur, self.read(cur, None), None, n, pa)
        branch = _long(cur, None)
        if self.null_branch is None:
            if len(branch) and not (branch == self.value_branch).all():
                raise _Bad("a union branch out of range")
            return self._array(cur, self.read(cur, None), None, n, pa)
        valid = branch == self.value_branch
        if not (valid | (branch == self.null_branch)).all():
            raise _Bad("a union branch out of range")
        if valid.all():
            return self._array(cur, self.read(cur, None), None, n, pa)
        rows = np.flatnonzero(valid)
        return self._array(cur, self.read(cur, rows), valid, n, pa)

    def _array(self, cur: _Cursor, values: Any, valid: np.ndarray | None, n: int, pa: Any) -> Any:
        """An array of `n` slots from the values of the valid ones (all, for `valid` None)."""
        nulls = 0 if valid is None else n - int(np.count_nonzero(valid))
        bitmap = None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))
        if self.build == "null":
            return pa.nulls(n)
        if self.build == "blob":
            start, lengths = values
            return _blob_array(self.arrow, cur.bytes, start, lengths, valid, bitmap, nulls, n, pa)
        if self.build == "enum":
            indices = _spread(values, valid, n, np.int32)
            return self.symbols.take(pa.Array.from_buffers(pa.int32(), n, [bitmap, pa.py_buffer(indices)], nulls))
        if self.build == "fixed":
            data = np.zeros((n, self.width), np.uint8)
            data[slice(None) if valid is None else valid] = values
            return pa.Array.from_buffers(self.arrow, n, [bitmap, pa.py_buffer(data)], nulls)
        full = _spread(values, valid, n, values.dtype)
        if self.build == "bool":
            return pa.Array.from_buffers(self.arrow, n, [bitmap, pa.py_buffer(np.packbits(full, bitorder="little"))], nulls)
        return pa.Array.from_buffers(self.arrow, n, [bitmap, pa.py_buffer(full)], nulls)


def _spread(values: np.ndarray, valid: np.ndarray | None, n: int, dtype: Any) -> np.ndarray:
    if valid is None:
        return np.ascontiguousarray(values, dtype=dtype)
    full = np.zeros(n, dtype)
    full[valid] = values
    return full


def _blob_array(arrow: Any, buffer: np.ndarray, start: np.ndarray, lengths: np.ndarray, valid: np.ndarray | None,
                bitmap: Any, nulls: int, n: int, pa: Any) -> Any:
    """A string or binary array of the bytes at `start` (`lengths` each), gathered into one data buffer; _Bad beyond
    2 GiB (the mapping's 32-bit offsets) or for invalid UTF-8 in a string."""
    total = int(lengths.sum())
    if total >= 2**31:
        raise _Bad("more than 2 GiB of strings in a batch")
    sizes = _spread(lengths, valid, n, np.int64)
    offsets = np.zeros(n + 1, np.int32)
    offsets[1:] = np.cumsum(sizes)
    inner = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=inner[1:])
    gather = np.repeat(start - inner[:-1], lengths) + np.arange(total, dtype=np.int64)
    data = buffer[gather]
    array = pa.Array.from_buffers(arrow, n, [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)], nulls)
    if pa.types.is_string(arrow) and total and not data.max() < 0x80:
        try:
            array.validate(full=True)
        except pa.ArrowInvalid as exc:
            raise _Bad("invalid UTF-8") from exc
    return array


# --- the schema --------------------------------------------------------------------------------------------------------


class SpanDecoder:
    """A columnar decoder of the spans of one buffer into one Arrow batch (`decode`), or of a list of values."""

    def decode(self, data: Any, starts: np.ndarray, ends: np.ndarray) -> Any | None:
        raise NotImplementedError

    def decode_values(self, values: Sequence[bytes], skip: int = 0) -> Any | None:
        """`decode` of each value after its first `skip` bytes (a header); None for a value shorter than that."""
        found = payload_spans(values, skip)
        return None if found is None else self.decode(*found)


class AvroDatumDecoder(SpanDecoder):
    """Decodes the Avro binary datums of one flat record schema (its fields of primitives, enums, fixed, the date,
    time and timestamp logical types, and unions of one of those with null) into Arrow, as `module doc` says."""

    def __init__(self, fields: list[_Field], arrow_schema: Any) -> None:
        self._fields = fields
        self.arrow_schema = arrow_schema
        """The writers' Arrow mapping of the schema, its timestamp columns marked as holding datetimes on the row
        path (`api.batches.ROW_VALUES`: fastavro reads timestamps as datetimes, local-timestamps as ones without a
        zone)."""

    @classmethod
    def for_schema(cls, avro_schema: Any) -> AvroDatumDecoder | None:
        """The decoder of `avro_schema`'s datums; None for a schema with a type it does not decode (a nested record,
        an array, a map, a union of two types, decimal, uuid, a logical type on another type) or no Arrow mapping."""
        import pyarrow as pa

        from gobblin_py.builtin.schemas.arrow import arrow_mapping
        from gobblin_py.errors import ConfigError

        if not isinstance(avro_schema, dict) or avro_schema.get("type") != "record":
            return None
        try:
            mapping = arrow_mapping(avro_schema).schema
        except ConfigError:
            return None
        named: dict[str, Any] = {}
        namespace = _namespace(avro_schema, "")
        fields = []
        for field, arrow_field in zip(avro_schema.get("fields", []), mapping):
            made = _field(field.get("name"), field.get("type"), arrow_field.type, namespace, named, pa)
            if made is None:
                return None
            fields.append(made)
        marked = pa.schema([f.with_metadata({ROW_VALUES: b"datetime" if f.type.tz else b"naive-datetime"})
                            if pa.types.is_timestamp(f.type) else f for f in mapping])
        return cls(fields, marked)

    def decode(self, data: Any, starts: np.ndarray, ends: np.ndarray) -> Any | None:
        """The datums `data[starts[i]:ends[i]]` (a bytes-like `data`) as one `pyarrow.RecordBatch` of `arrow_schema`;
        None when any of them does not decode exactly as fastavro would decode it, or is not consumed to its end."""
        import pyarrow as pa

        n = len(starts)
        cur = _Cursor.over(data, starts, ends)
        if cur is None:
            return None
        try:
            columns = [field.column(cur, n, pa) for field in self._fields]
            if not (cur.pos == cur.end).all():
                raise _Bad("a datum is longer than its fields")
        except _Bad:
            return None
        return pa.RecordBatch.from_arrays(columns, schema=self.arrow_schema)


def payload_spans(values: Sequence[bytes], skip: int = 0) -> tuple[bytes, np.ndarray, np.ndarray] | None:
    """The values as one buffer, and each one's start (after its first `skip` bytes, a header) and end in it; None
    when a value is shorter than `skip`."""
    lengths = np.fromiter(map(len, values), np.int64, len(values))
    ends = np.cumsum(lengths)
    if len(values) and (lengths < skip).any():
        return None
    return b"".join(values), ends - lengths + skip, ends


def _namespace(avro: dict[str, Any], outer: str) -> str:
    name = avro.get("name") or ""
    if "." in name:
        return name.rsplit(".", 1)[0]
    return avro.get("namespace", outer) or ""


def _fullname(avro: dict[str, Any], namespace: str) -> str:
    name = avro.get("name") or ""
    if not name or "." in name:
        return name
    ns = avro.get("namespace", namespace)
    return f"{ns}.{name}" if ns else name


def _field(name: str, avro: Any, arrow: Any, namespace: str, named: dict[str, Any], pa: Any) -> _Field | None:
    """A top-level field's reader (its union unwrapped), or None for a type it does not decode."""
    if isinstance(avro, list):
        kinds = [_resolve(b, namespace, named) for b in avro]
        nulls = [i for i, b in enumerate(kinds) if b == "null"]
        values = [i for i, b in enumerate(kinds) if b != "null"]
        if len(values) != 1 or len(nulls) > 1:
            return None  # a union of two types, or of null alone: ArrowMapping refuses or maps it to nulls; not here
        field = _plain(name, avro[values[0]], arrow, namespace, named, pa)
        if field is None:
            return None
        field.value_branch = values[0]
        field.null_branch = nulls[0] if nulls else None
        return field
    return _plain(name, avro, arrow, namespace, named, pa)


def _resolve(avro: Any, namespace: str, named: dict[str, Any]) -> Any:
    """A named type's definition where `avro` refers to one defined before; `avro` itself otherwise."""
    if isinstance(avro, str) and avro not in _PRIMITIVES:
        found = (named.get(f"{namespace}.{avro}") if namespace and "." not in avro else None) or named.get(avro)
        return found if found is not None else avro
    return avro


def _plain(name: str, avro: Any, arrow: Any, namespace: str, named: dict[str, Any], pa: Any) -> _Field | None:
    avro = _resolve(avro, namespace, named)
    if isinstance(avro, dict) and isinstance(avro.get("type"), str) and avro["type"] in _PRIMITIVES:
        logical = avro.get("logicalType")
        kind = avro["type"]
        if logical is None:
            avro = kind
        elif logical in _TIMESTAMPS and kind == "long":
            per = _TIMESTAMPS[logical]
            return _Field(name, _ranged(-(-_MICROS[0] // per), _MICROS[1] // per, np.int64), "plain", arrow)
        elif logical == "date" and kind == "int":
            return _Field(name, _ranged(*_DAYS, np.int32), "plain", arrow)
        elif (logical, kind) in _TIMES:
            return _Field(name, _ranged(0, _TIMES[logical, kind] - 1, np.int32 if kind == "int" else np.int64),
                          "plain", arrow)
        else:
            return None  # decimal, uuid (fastavro makes a UUID of it), a logical type on another type
    if isinstance(avro, str):
        readers: dict[str, tuple[Reader, str]] = {
            "null": (_nothing, "null"),
            "boolean": (_fixed_width(1, _as_bool), "bool"),
            "int": (_ranged(*_INT32, np.int32), "plain"),
            "long": (_long, "plain"),
            "float": (_fixed_width(4, _as_float), "plain"),
            "double": (_fixed_width(8, lambda w: w.view(np.float64)), "plain"),
            "bytes": (_blob, "blob"),
            "string": (_blob, "blob"),
        }
        if avro not in readers:
            return None
        read, build = readers[avro]
        return _Field(name, read, build, arrow)
    if not isinstance(avro, dict) or avro.get("logicalType") is not None:
        return None
    kind = avro.get("type")
    if kind == "enum":
        symbols = avro.get("symbols") or []
        named[_fullname(avro, namespace)] = avro
        return _Field(name, _enum(len(symbols)), "enum", arrow, symbols=pa.array(symbols, pa.string()))
    if kind == "fixed":
        size = int(avro["size"])
        named[_fullname(avro, namespace)] = avro
        return _Field(name, _fixed(size), "fixed", arrow, width=size)
    return None
