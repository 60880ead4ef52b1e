"""Arrow record batches → Avro binary records, a column at a time (numpy and Arrow compute), for the avro writer's
columnar path: each record's bytes are exactly those fastavro writes for the same values row by row (tested byte
for byte), so a block made of them is the block fastavro would make.

Written here because no maintained library encodes Arrow as Avro from Python: fastavro encodes Python objects
one record at a time (about 1 µs per field, 13 µs for a 10-column row), and pyarrow has no Avro writer. It covers
the flat records the sources make (primitives, their nullable unions, enums, fixed, and the timestamp, date, time
and decimal(≤18 digits) logical types); a schema with anything else (a nested record, an array, a map, a union of
two types) has no encoder, and its writer takes records one at a time as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

Piece = tuple[np.ndarray, bytes]
"""One part of every record: its length in each row (0 where the part is absent) and the rows' bytes, in order."""

_DECIMAL_DIGITS = 18  # a decimal128 of up to 18 digits has its unscaled value in the low 64 bits
_TIMESTAMPS = {"timestamp-millis": "ms", "timestamp-micros": "us", "local-timestamp-millis": "ms",
               "local-timestamp-micros": "us"}


@dataclass(frozen=True)
class EncodedRows:
    """Avro-encoded records: record `i` is `data[offsets[i]:offsets[i + 1]]`."""

    data: memoryview
    offsets: np.ndarray  # int64, one more than the records

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def span(self, start: int, end: int) -> bytes:
        """The bytes of records `start` to `end` (exclusive)."""
        return bytes(self.data[int(self.offsets[start]):int(self.offsets[end])])


class AvroArrowEncoder:
    """Encodes Arrow record batches of `arrow_schema` (the writer's Arrow mapping of `avro_schema`) as Avro records.

    `for_schema` gives None for a schema it cannot encode; `encode` gives None for a batch it cannot encode exactly
    as fastavro would (a null where the field takes none, a decimal beyond 18 digits, an enum symbol not in the
    schema): the writer then takes that batch's records one at a time, and fastavro refuses or writes each.
    """

    def __init__(self, fields: list[tuple[str, Callable[[Any], list[Piece] | None]]], arrow_schema: Any) -> None:
        self._fields = fields
        self.arrow_schema = arrow_schema

    @classmethod
    def for_schema(cls, avro_schema: dict[str, Any], arrow_schema: Any) -> AvroArrowEncoder | None:
        if not isinstance(avro_schema, dict) or avro_schema.get("type") != "record":
            return None
        named: dict[str, Any] = {}
        fields = []
        for f in avro_schema.get("fields", []):
            encode = _field_encoder(f["type"], named)
            if encode is None:
                return None
            fields.append((f["name"], encode))
        return cls(fields, arrow_schema)

    def encode(self, batch: Any) -> EncodedRows | None:
        import pyarrow as pa
        import pyarrow.compute as pc

        if not batch.schema.equals(self.arrow_schema, check_metadata=False):
            return None
        n = batch.num_rows
        pieces: list[Any] = []
        for (_name, encode), column in zip(self._fields, batch.columns):
            parts = encode(column)
            if parts is None:
                return None
            for part in parts:
                pieces.append(part if isinstance(part, (pa.Array, pa.ChunkedArray)) else _binary(pa, n, part))
        if not pieces:  # a record without fields is zero bytes
            return EncodedRows(memoryview(b""), np.zeros(n + 1, np.int64))
        rows = pieces[0] if len(pieces) == 1 else pc.binary_join_element_wise(*pieces, pa.scalar(b"", pa.large_binary()))
        _, offsets, data = rows.buffers()
        offsets = np.frombuffer(offsets, np.int64)[rows.offset:rows.offset + n + 1]
        return EncodedRows(memoryview(data) if data is not None else memoryview(b""), offsets)


def _binary(pa: Any, n: int, piece: Piece) -> Any:
    lengths, data = piece
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


# --- the encoders of one field ---------------------------------------------------------------------------------

def _field_encoder(avro: Any, named: dict[str, Any]) -> Callable[[Any], list[Piece] | None] | None:
    """A function from an Arrow column to its pieces, or None for a type it cannot encode."""
    if isinstance(avro, list):
        rest = [b for b in avro if b != "null"]
        if len(rest) != 1 or len(avro) != 2:
            return None
        inner = _value_encoder(rest[0], named)
        if inner is None:
            return None
        null_index = avro.index("null")
        return lambda column: _nullable(column, inner, null_index)
    inner = _value_encoder(avro, named)
    if inner is None:
        return None
    return lambda column: None if column.null_count else inner(column, None)


def _nullable(column: Any, inner: Callable[[Any, Any], list[Any] | None], null_index: int) -> list[Any] | None:
    """The union's branch index (zigzag 0 or 2, one byte), then the value where there is one."""
    n = len(column)
    valid = np.ones(n, bool) if not column.null_count else column.is_valid().to_numpy(zero_copy_only=False)
    value_index = 1 - null_index
    index = np.where(valid, 2 * value_index, 2 * null_index).astype(np.uint8)
    parts = inner(column, valid if column.null_count else None)
    if parts is None:
        return None
    return [(np.ones(n, np.int64), index.tobytes()), *parts]


def _value_encoder(avro: Any, named: dict[str, Any]) -> Callable[[Any, Any], list[Any] | None] | None:
    """A function from (column, validity or None) to the pieces of its non-null values."""
    if isinstance(avro, str):
        if avro in named:
            return _value_encoder(named[avro], named)
        return _PRIMITIVES.get(avro)
    if not isinstance(avro, dict):
        return None
    kind, logical = avro.get("type"), avro.get("logicalType")
    if (logical in _TIMESTAMPS and kind == "long") or (logical == "time-micros" and kind == "long"):
        return _ints
    if logical in ("date", "time-millis") and kind == "int":
        return _ints
    if logical == "decimal" and kind == "bytes":
        precision = avro.get("precision")
        return _decimals if isinstance(precision, int) and 0 < precision <= _DECIMAL_DIGITS else None
    if logical == "decimal":
        return None  # a fixed decimal
    if kind == "enum":
        if avro.get("name"):
            named[avro["name"]] = avro
        symbols = list(avro.get("symbols", []))
        return lambda column, valid: _enum(column, valid, symbols)
    if kind == "fixed":
        if avro.get("name"):
            named[avro["name"]] = avro
        return _fixed
    if isinstance(kind, str) and kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    return None


def _ints(column: Any, valid: Any) -> list[Piece]:
    """int, long and the logical types over them: a zigzag varint of the 64-bit value."""
    import pyarrow as pa

    if not pa.types.is_integer(column.type):  # a timestamp, date or time: its integer as it is stored
        column = column.view(pa.int32() if column.type.bit_width == 32 else pa.int64())
    return [_varints(column.fill_null(0).to_numpy(), valid)]


def _floats(dtype: str) -> Callable[[Any, Any], list[Piece]]:
    def encode(column: Any, valid: Any) -> list[Piece]:
        values = column.fill_null(0).to_numpy().astype(dtype)
        return [_fixed_width(values, valid)]
    return encode


def _booleans(column: Any, valid: Any) -> list[Piece]:
    values = column.fill_null(False).to_numpy(zero_copy_only=False).astype(np.uint8)
    return [_fixed_width(values, valid)]


def _strings(column: Any, valid: Any) -> list[Any]:
    """A string or bytes value: its length as a varint, then its bytes."""
    import pyarrow as pa
    import pyarrow.compute as pc

    data = column.cast(pa.large_binary()).fill_null(b"")
    lengths = pc.binary_length(data).to_numpy()
    return [_varints(lengths, valid), data]


def _fixed(column: Any, valid: Any) -> list[Piece]:
    width = column.type.byte_width
    values = np.frombuffer(column.buffers()[1], np.uint8)[column.offset * width:(column.offset + len(column)) * width]
    return [_fixed_width(values.reshape(len(column), width), valid)] if width else [(np.zeros(len(column), np.int64), b"")]


def _enum(column: Any, valid: Any, symbols: list[str]) -> list[Piece] | None:
    import pyarrow as pa
    import pyarrow.compute as pc

    index = pc.index_in(column, value_set=pa.array(symbols, pa.string()))
    if index.null_count != column.null_count:
        return None  # a symbol the schema does not have: the row path refuses that record
    return [_varints(index.fill_null(0).to_numpy().astype(np.int64), valid)]


def _decimals(column: Any, valid: Any) -> list[Piece]:
    """A decimal as Avro bytes: the unscaled value big-endian in two's complement, in as many bytes as fastavro
    uses (ceil((bit length of |value| + 1) / 8)), after its length."""
    n = len(column)
    words = np.frombuffer(column.buffers()[1], np.int64)
    unscaled = words[2 * column.offset:2 * (column.offset + n):2].copy()  # the low 64 bits, little-endian
    if valid is not None:
        unscaled[~valid] = 0
    magnitude = np.abs(unscaled)
    widths = np.ones(n, np.int64)
    for j in range(1, 8):
        widths += magnitude >= (1 << (8 * j - 1))
    big_endian = unscaled.astype(">i8").view(np.uint8).reshape(n, 8)
    keep = np.arange(8) >= (8 - widths)[:, None]
    if valid is not None:
        keep &= valid[:, None]
        widths = np.where(valid, widths, 0)
    return [_varints(widths, valid), (widths, big_endian[keep].tobytes())]


_PRIMITIVES: dict[str, Callable[[Any, Any], list[Any] | None]] = {
    "int": _ints, "long": _ints, "float": _floats("<f4"), "double": _floats("<f8"), "boolean": _booleans,
    "string": _strings, "bytes": _strings,
}


# --- bytes ------------------------------------------------------------------------------------------------------

def _varints(values: np.ndarray, valid: Any) -> Piece:
    """Zigzag varints of int64 `values` (Avro's int and long), none where `valid` is False."""
    v = values.astype(np.int64, copy=False)
    zigzag = ((v << 1) ^ (v >> 63)).view(np.uint64)
    n = len(zigzag)
    lengths = np.ones(n, np.int64)
    for j in range(1, 10):
        step = zigzag >= np.uint64(1 << (7 * j))
        if not step.any():
            break
        lengths += step
    width = int(lengths.max()) if n else 1
    table = np.empty((n, width), np.uint8)
    for j in range(width):
        table[:, j] = ((zigzag >> np.uint64(7 * j)) & np.uint64(0x7F)).astype(np.uint8) | ((lengths > j + 1) << 7).astype(np.uint8)
    keep = np.arange(width) < lengths[:, None]
    if valid is not None:
        keep &= valid[:, None]
        lengths = np.where(valid, lengths, 0)
    return lengths, table[keep].tobytes()


def _fixed_width(values: np.ndarray, valid: Any) -> Piece:
    """Values of one width each (a float, a double, a boolean's byte, a fixed), none where `valid` is False."""
    n = len(values)
    width = values.itemsize if values.ndim == 1 else values.shape[1]
    if valid is None:
        return np.full(n, width, np.int64), np.ascontiguousarray(values).tobytes()
    return np.where(valid, width, 0), np.ascontiguousarray(values[valid]).tobytes()
