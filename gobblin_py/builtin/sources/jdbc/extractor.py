"""Reads one sub-range `(lo, hi]` of a table through the dialect's streaming cursor (PostgreSQL server-side, MySQL
unbuffered), `fetch_rows` rows per round trip, ordered by watermark and primary key: never the whole range in memory.
Each round trip is a batch: on the columnar path its rows become one Arrow record batch (`to_arrow`).

On the columnar path with a native reader (`reader: auto|native`), the rows come as Arrow record batches of the
driver's types, cut to `fetch_rows` rows, and `to_arrow` casts them to the schema's Arrow mapping; a batch a cast
refuses (a NaN numeric, a timestamp past year 9999) takes the row path from the same values as Python rows, equal to
what the row driver gives, so the writer accepts or refuses each row as it would on that path."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from gobblin_py import crashpoints
from gobblin_py.api import TaskContext, WorkUnit
from gobblin_py.api.batches import BatchExtractor, RawBatch
from gobblin_py.api.types import Record, Schema, WatermarkValue
from gobblin_py.builtin.schemas.arrow_rows import conform, is_decimal, last_row, rebatch, row_schema
from gobblin_py.builtin.sources.jdbc.dialect import REMEDY, Failure, NativeReadError, timeout_error
from gobblin_py.builtin.sources.jdbc.ranges import KeyRange, Range, decode
from gobblin_py.builtin.sources.jdbc.settings import JdbcSettings
from gobblin_py.builtin.sources.jdbc.split import JdbcSplit
from gobblin_py.errors import ConfigError, SourceError, UnreachableError

log = logging.getLogger(__name__)


class JdbcExtractor(BatchExtractor):
    """Yields the rows of one planned sub-range as dicts of Python values the Avro writer encodes."""

    makes_arrow = True

    def __init__(self, settings: JdbcSettings, workunit: WorkUnit, context: TaskContext) -> None:
        self.settings = settings
        self.workunit = workunit
        self.context = context
        self.split = p = JdbcSplit.of(workunit)
        self.table = p.table
        [self.table_settings] = [t for t in settings.tables if t.table == self.table]
        self.range = Range(decode(p.kind, p.lo, self.table), decode(p.kind, p.hi, self.table))
        self.keys = KeyRange(p.key_lo, p.key_hi) if p.key_column is not None else None  # a first load's slice
        self.dialect = settings.dialect
        self.queries = self.dialect.queries(self.table_settings, p.schema_name, p.table_name, p.columns,
                                            p.kind, self.table, p.casts, watermark_not_null=p.watermark_not_null)
        self.conn: Any = None
        self.last: Record | None = None
        self.rows = 0
        self._arrow_schema: Any = None
        self.native = False  # set when the task takes the columnar path and the native reader may serve it
        self._taken: Any = None  # the last batch the native reader handed on (where the row path would go on)

    def get_schema(self) -> Schema:
        return self.split.avro_schema

    def actual_high_watermark(self) -> WatermarkValue:
        return self.workunit.expected_high_watermark  # only a task that read its whole range is ever committed

    def location(self) -> str:
        t = self.table_settings
        if self.last is None:
            p = self.split
            sliced = "" if p.key_column is None else f" {p.key_column} ({p.key_lo}, {p.key_hi}]"
            return f"{self.table} ({p.lo}, {p.hi}]{sliced}"
        keys = ", ".join(f"{k}={self.last.get(k)!r}" for k in t.key_columns)
        return f"{self.table} row {self.rows} ({t.watermark_column}={self.last.get(t.watermark_column)!s}, {keys})"

    def columnar_path(self) -> None:
        self.native = self.dialect.reads_natively(self.settings.reader, self.split.native)

    def read_batches(self) -> Iterator[RawBatch]:
        s = self.settings
        self.conn = conn = self.dialect.connect(s, in_task=True)
        query, params = self._select()
        names = self.split.columns
        try:
            if self.native:
                try:
                    yield from self._native_batches(conn, query, params)
                    return
                except NativeReadError as exc:
                    query, params = self._rest_by_rows(conn, exc)
            batches = self.dialect.stream(conn, query, params, s.fetch_rows, f"gobblin_{self.workunit.id[-32:]}", names,
                                          self.split.casts)
            for rows in batches:
                before = self.rows
                yield RawBatch("rows", rows)
                self.rows = before + len(rows)  # whichever path took the batch
                self.last = dict(zip(names, rows[-1]))
                crashpoints.crash_point("jdbc.batch_read")  # a test's kill mid-read (N-th batch)
        except Exception as exc:
            failure = exc.failure if isinstance(exc, NativeReadError) else self.dialect.failure(exc)
            if failure is None:
                raise
            raise self._read_error(failure, exc) from None

    def _native_batches(self, conn: Any, query: Any, params: list[Any]) -> Iterator[RawBatch]:
        """The sub-range by the native reader, noting after each batch where the row path would go on from."""
        s = self.settings
        log.debug("%s: read by %s's native reader", self.location(), self.dialect.name)
        for arrow in rebatch(self.dialect.read_arrow(conn, s, query, params), s.fetch_rows):
            before = self.rows
            yield RawBatch("arrow", arrow)
            self.rows = before + arrow.num_rows
            self.last = last_row(arrow)
            self._taken = arrow
            crashpoints.crash_point("jdbc.batch_read")

    def _select(self) -> tuple[Any, list[Any]]:
        """The sub-range's query: a slice of the primary key (a first load's) or a range of the watermark column."""
        if self.keys is not None:
            return self.queries.select_keys(self.range, self.keys)
        return self.queries.select(self.range)

    def _rest_by_rows(self, conn: Any, exc: NativeReadError) -> tuple[Any, list[Any]]:
        """Under `reader: auto`, a value the native reader cannot read (a zero date) does not fail the task: the rest
        of the sub-range, from the row after the last one taken, is read as rows, which send such a row to the
        error file. Anything else, or a place the row path cannot go on from exactly, re-raises `exc`."""
        if self.settings.reader != "auto" or exc.failure is not Failure.BAD_VALUE:
            raise exc
        t = self.table_settings
        order = [t.watermark_column, *t.key_columns] if self.keys is None else [self.split.key_column]
        last = None
        if self.rows and all(c in self._taken.schema.names for c in order):
            last = last_row(self._taken.select(order))  # as the reader gave them: the values the query compares
        if not self.rows:
            rest = self._select()
        elif last is None:
            rest = None
        elif self.keys is not None:  # a slice in key order: the rest is the slice after the last key taken
            rest = self.queries.select_keys(self.range, KeyRange(int(last[order[0]]), self.keys.hi))
        else:
            rest = self.queries.select_after(conn, self.range, [last[c] for c in order])
        if rest is None:
            raise exc
        log.warning("%s: the native reader cannot read a value (%s); the rest of the range is read as rows",
                    self.location(), exc.reason)
        return rest

    def records_of(self, batch: RawBatch) -> Iterator[Record]:
        if batch.format == "arrow":
            yield from self._native_records(batch.values)
            return
        names = self.split.columns
        for row in batch.values:
            record = dict(zip(names, row))
            self.last = record
            self.rows += 1
            yield record

    def _native_records(self, arrow: Any) -> Iterator[Record]:
        """A native batch's rows as the row driver gives them: each column cast to the schema's type where it casts
        exactly, numeric text as Decimals; a value Python cannot hold (a timestamp past year 9999) is the SourceError
        the row driver's refusal would be."""
        schema = self._schema()
        try:
            records = conform(arrow, schema, whole=False).to_pylist()
        except (OverflowError, ValueError) as exc:
            raise self._read_error(Failure.BAD_VALUE, exc) from None
        decimals = [f.name for f in schema if is_decimal(f.type)]
        for record in records:
            for name in decimals:
                if isinstance(record[name], str):  # PostgreSQL's NaN or Infinity, which no Arrow decimal holds
                    record[name] = Decimal(record[name])
            self.last = record
            self.rows += 1
            yield record

    def _schema(self) -> Any:
        if self._arrow_schema is None:
            self._arrow_schema = row_schema(self.get_schema())
        return self._arrow_schema

    def to_arrow(self, batch: RawBatch) -> Any | None:
        """The batch's rows as one Arrow record batch of the schema's Arrow mapping, each value converted by
        pyarrow as the Avro writer would encode it; None when pyarrow refuses one (an int out of range, a decimal
        with more digits than its scale): the row path then refuses or writes that row itself."""
        import pyarrow as pa

        schema = self._schema()
        if batch.format == "arrow":
            return conform(batch.values, schema)
        columns = list(zip(*batch.values))
        try:
            arrays = [pa.array(values, type=field.type, from_pandas=False) for values, field in zip(columns, schema)]
        except (pa.ArrowException, OverflowError, TypeError, ValueError):
            return None
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    def _read_error(self, failure: Failure, exc: BaseException) -> Exception:
        """A driver failure while reading, named with the row it stopped after."""
        s, text = self.settings, self.dialect.message(exc)
        if failure is Failure.TIMEOUT:
            return timeout_error(s, self.table, f"reading ({self.split.lo}, {self.split.hi}]")
        if failure is Failure.UNKNOWN_COLUMN:
            return ConfigError(f"table {self.table}: {text} (changed since planning?); the next run plans from the table "
                               "as it is then")
        if failure is Failure.CONNECTION_LOST:
            return UnreachableError(f"lost the connection to {s.endpoint} reading {self.location()}: {text}",
                                    s.endpoint, REMEDY)
        if failure is Failure.BAD_VALUE:
            return SourceError(f"{self.location()}: a value cannot be read ({text}); leave the column out with "
                               "source.tables[].columns or filter the row with where")
        return SourceError(f"{self.location()}: reading failed: {text}")

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.dialect.close(self.conn)
            except Exception:  # noqa: BLE001 - closing after a lost connection must not hide the read's error
                log.debug("closing the connection to %s failed", self.settings.endpoint, exc_info=True)
            self.conn = None
