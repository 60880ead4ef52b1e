"""Database rows as Arrow, shared by the sources that read tables (jdbc, postgres_cdc, mysql_cdc): the Arrow mapping of
a rows' Avro schema, a native reader's batch cast to it exactly (or refused, for the row path to decide), batches cut
to a fixed row count, records already made batched and made Arrow at once, and a batch's last row for messages."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from gobblin_py.api.batches import ROW_VALUES, RawBatch
from gobblin_py.api.types import Record

RECORDS = "records"
"""The format of a batch of records already made (`values`: (record, where it came from) pairs): the row path."""


def row_schema(avro_schema: dict[str, Any]) -> Any:
    """The Arrow mapping of the rows' schema, its timestamp columns marked as holding datetimes (so a batch is split
    by time partition as the row path places each row's datetime)."""
    import pyarrow as pa

    from gobblin_py.builtin.schemas.arrow import arrow_mapping

    schema = arrow_mapping(avro_schema).schema
    return pa.schema([f.with_metadata({ROW_VALUES: b"datetime"}) if pa.types.is_timestamp(f.type) else f for f in schema])


def record_batches(records: Iterable[tuple[Record, str]], size: int = 1000) -> Iterator[RawBatch]:
    """Records already made, with where each came from, `size` a batch (format `RECORDS`)."""
    held: list[tuple[Record, str]] = []
    for pair in records:
        held.append(pair)
        if len(held) == size:
            yield RawBatch(RECORDS, held)
            held = []
    if held:
        yield RawBatch(RECORDS, held)


def records_arrow(batch: RawBatch, schema: Any) -> Any | None:
    """A `RECORDS` batch as one Arrow record batch of `schema` (its records' values converted by pyarrow, as the
    writers convert a record), made at once instead of record by record; None when pyarrow refuses a value (the row
    path then decides, naming the record) or for another format."""
    import pyarrow as pa

    if batch.format != RECORDS:
        return None
    try:
        return pa.RecordBatch.from_pylist([record for record, _ in batch.values], schema=schema)
    except (pa.ArrowException, ValueError, TypeError, OverflowError):
        return None


def is_decimal(t: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_decimal(t))


def last_row(arrow: Any) -> Record | None:
    """The batch's last row, for `location()`; None when Python cannot hold one of its values."""
    try:
        return arrow.slice(arrow.num_rows - 1).to_pylist()[0] if arrow.num_rows else None
    except (OverflowError, ValueError):
        return None


def conform(arrow: Any, schema: Any, whole: bool = True) -> Any | None:
    """A native reader's batch cast to the schema's Arrow mapping (smallint → int32, numeric text → decimal, timestamp →
    UTC micros); None when a value does not cast exactly (NaN, a scale it would lose, a NULL in a NOT NULL field)
    or holds a time Python cannot (the row path then decides as it would). Not `whole`: each column that casts is
    cast and the others kept as they came, for the row path."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arrays, fields = [], []
    for column, field in zip(arrow.columns, schema):
        if isinstance(column.type, pa.ExtensionType):
            column = column.storage  # numeric, uuid, json: their text
        try:
            if column.type != field.type:
                column = column.cast(field.type, safe=True)
            if whole and pa.types.is_timestamp(field.type) and column.null_count < len(column):
                low, high = pc.min_max(column).values()
                if not (low.cast(pa.int64()).as_py() >= _PY_MIN_US and high.cast(pa.int64()).as_py() <= _PY_MAX_US):
                    return None
        except (pa.ArrowException, OverflowError, TypeError, ValueError):
            if whole:
                return None
            arrays.append(column)
            fields.append(pa.field(field.name, column.type))
            continue
        arrays.append(column)
        fields.append(field)
    try:
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
    except (pa.ArrowException, ValueError):
        if whole:
            return None
        return pa.RecordBatch.from_arrays(arrays, names=[f.name for f in fields])


_PY_MIN_US = -62135596800 * 1_000_000  # 0001-01-01T00:00:00, Python's datetime.min, in microseconds since 1970
_PY_MAX_US = 253402300799 * 1_000_000 + 999_999  # 9999-12-31T23:59:59.999999


def rebatch(batches: Iterator[Any], rows: int) -> Iterator[Any]:
    """Arrow record batches of exactly `rows` rows (the last one shorter), whatever sizes `batches` come in: a native
    reader's batches cut as the row stream's round trips are, so both paths hand the writer the same batches."""
    def joined(pieces: list[Any]) -> Any:
        return pieces[0] if len(pieces) == 1 else pa.Table.from_batches(pieces).combine_chunks().to_batches()[0]

    import pyarrow as pa

    held: list[Any] = []
    count = 0
    for batch in batches:
        while batch.num_rows:
            take = min(rows - count, batch.num_rows)
            held.append(batch.slice(0, take))
            count += take
            batch = batch.slice(take)
            if count == rows:
                yield joined(held)
                held, count = [], 0
    if count:
        yield joined(held)
