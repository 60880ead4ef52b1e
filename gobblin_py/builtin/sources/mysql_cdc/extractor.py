"""Reads one WorkUnit: a snapshot chunk of a table (`snapshot.py`), or the table's changes in transactions committing
in `(low, end]` (`binlog.py`), after its chunks' high positions when its snapshot just ended.

A record is the table's columns and `_op`, `_pos`, `_seq`, `_commit_ts`, `_xid`:
- insert, update: the row after; delete: the whole row before (binlog_row_image FULL). An update that changes the
  primary key is two records, a delete of the old key then the update, at consecutive `_seq`, so a consumer kept by
  key drops the old key; truncate (a `TRUNCATE TABLE` in the binlog): every column null. read: a snapshot row, after
  one truncate record in its first chunk (`_seq` -1): a snapshot replaces what a consumer held of the table.
- `_pos` is the binlog position where the change's transaction commits (`(file number << 32) | offset`, see
  `position.py`) and `_seq` the record's place in its work unit's records: (_pos, _seq) orders the table's
  changes as they committed. Snapshot rows have `_pos` = the high position of their chunk and `_seq` = (the chunk's
  number << 32) + their row number in it.
- `_commit_ts` is when the commit event was written (the binlog keeps seconds); `_xid` the XID event's transaction id
  (null for snapshot rows, truncates and non-transactional tables).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from gobblin_py.api import TaskContext, WorkUnit
from gobblin_py.api.batches import BatchExtractor, RawBatch
from gobblin_py.api.types import Record, Schema, WatermarkValue
from gobblin_py.builtin.schemas.arrow_rows import conform, record_batches, records_arrow, row_schema
from gobblin_py.builtin.schemas.mysql_columns import CONVERT
from gobblin_py.builtin.sources.mysql_cdc import binlog, decode, position
from gobblin_py.builtin.sources.mysql_cdc.settings import MysqlCdcSettings, connect
from gobblin_py.builtin.sources.mysql_cdc.snapshot import Chunks, read_chunk, read_chunk_native
from gobblin_py.builtin.sources.mysql_cdc.split import MysqlCdcSplit
from gobblin_py.errors import SourceError, UnreachableError, describe

log = logging.getLogger(__name__)

CHUNK, CHUNK_BATCH = "mysql_cdc.chunk", 1000  # a batch of a snapshot chunk's rows (`ChunkRows`), and its size


class ChunkRows(list):  # type: ignore[type-arg]
    """Consecutive rows of a snapshot chunk (dicts by column), numbered from `first`, as of binlog position `high`;
    `arrow`: the same rows as ConnectorX read them (`snapshot.read_chunk_native`), whose Python values are the row
    path's (`mysql_columns.native_reads`), made dicts only where a batch takes the row path."""

    def __init__(self, rows: list[dict[str, Any]], first: int, high: int, arrow: Any = None) -> None:
        super().__init__(rows)
        self.first, self.high, self.arrow = first, high, arrow

    def dicts(self) -> list[dict[str, Any]]:
        return self.arrow.to_pylist() if self.arrow is not None else self


class MysqlCdcExtractor(BatchExtractor):
    """One snapshot chunk of a table, or the table's changes in (low, end]."""

    makes_arrow = True

    def __init__(self, settings: MysqlCdcSettings, workunit: WorkUnit, context: TaskContext) -> None:
        self.settings, self.workunit, self.context = settings, workunit, context
        self.split = p = MysqlCdcSplit.of(workunit)
        self.names: list[str] = p.columns
        self.end = p.end
        self.at: str | tuple[str, int] = ""  # where the reader is: text, or a change's (op, position)
        self._columnar = False
        self._ts: tuple[int | None, datetime | None] = (None, None)  # the last commit second and its datetime
        self.seq = 0
        self._convert: list[tuple[str, Callable[[Any], Any]]] = [(c, CONVERT[k]) for c, k in p.casts.items()]
        self._arrow: Any = None  # the Arrow mapping of the records' schema
        self._binary = [f["name"] for f in p.avro_schema["fields"]
                        if f["type"] == "bytes" or (isinstance(f["type"], list) and "bytes" in f["type"])]

    def columnar_path(self) -> None:
        self._columnar = True  # a chunk may then be read by ConnectorX (`split.native`), its batches Arrow already

    def get_schema(self) -> Schema:
        return self.split.avro_schema

    def actual_high_watermark(self) -> WatermarkValue:
        return self.end  # only a task that read its whole range is committed

    def location(self) -> str:
        at = self.at  # a change's (op, position), made text only here: per record it was ~2 % of a run's samples
        return f"{self.split.table} {at if isinstance(at, str) else f'{at[0]} committed at {position.text(at[1], self.split.base)}'}"

    def read_batches(self) -> Iterator[RawBatch]:
        """The records (`records_of`) a thousand at a time, so a task without converters writes each thousand as one
        Arrow batch (`to_arrow`) instead of record by record (issue 45's profile)."""
        import pymysql

        p, s = self.split, self.settings
        try:
            if p.chunk is not None:
                yield from self._chunk()
                return
            chunks = Chunks.of(p.chunks) if p.chunks else None
            count = 0
            for batch in record_batches((record, self.at) for c in self._changes() for record in self._records(c, chunks)):
                count += len(batch.values)
                yield batch
            log.info("%s: %d change record(s) in (%s, %s]", p.table, count, position.text(p.low, p.base),
                     position.text(self.end, p.base))
        except pymysql.err.OperationalError as exc:
            raise UnreachableError(f"{s.endpoint}: lost the connection reading {p.table}: {describe(exc)}", s.endpoint,
                                   "the next attempt (or run) reads the range again") from None
        except pymysql.err.Error as exc:
            raise SourceError(f"{s.endpoint}, table {p.table}: {describe(exc)}") from None

    def records_of(self, batch: RawBatch) -> Iterator[Record]:
        if isinstance(batch.values, ChunkRows):
            rows, p = batch.values, self.split
            for n, row in enumerate(rows.dicts(), rows.first):
                self.at = f"snapshot chunk {p.chunk} row {n}"
                yield self._record(row, "read", rows.high, (p.chunk << 32) + n, None, None)  # type: ignore[operator]
            return
        for record, at in batch.values:
            self.at = at
            yield record

    def to_arrow(self, batch: RawBatch) -> Any | None:
        if self._arrow is None:
            self._arrow = row_schema(self.get_schema())
        if isinstance(batch.values, ChunkRows):
            return self._chunk_arrow(batch.values)
        return records_arrow(batch, self._arrow)

    def _chunk_arrow(self, rows: ChunkRows) -> Any | None:
        """A snapshot chunk's rows as the Arrow batch `records_of` would give, made a column at a time (each column's
        values converted by pyarrow as `records_arrow` converts them): per row, a record and its conversion were most
        of a chunk's time after its SELECT (issue 45). None where pyarrow refuses a value: the row path decides."""
        import pyarrow as pa

        p, n = self.split, len(rows) if rows.arrow is None else rows.arrow.num_rows
        converts = dict(self._convert)
        binary = set(self._binary)
        fixed: dict[str, Any] = {"_op": ["read"] * n, "_pos": [rows.high] * n, "_commit_ts": [None] * n,
                                 "_xid": [None] * n,
                                 "_seq": range((p.chunk << 32) + rows.first, (p.chunk << 32) + rows.first + n)}  # type: ignore[operator]
        arrays = []
        native = conform(rows.arrow.select(self.names), pa.schema([self._arrow.field(c) for c in self.names])) \
            if rows.arrow is not None else None
        if rows.arrow is not None and native is None:
            return None  # a value that does not cast exactly: the row path decides
        try:
            for field in self._arrow:
                if native is not None and field.name in self.names:
                    arrays.append(native.column(field.name))
                    continue
                if field.name in fixed:
                    values: Any = fixed[field.name]
                elif field.name in self.names:
                    values = [row.get(field.name) for row in rows]
                    if field.name in converts:
                        convert = converts[field.name]
                        values = [convert(v) if v is not None else None for v in values]
                    if field.name in binary:
                        values = [b"" if v == "" else v for v in values]
                else:
                    return None
                arrays.append(pa.array(values, type=field.type))
            return pa.RecordBatch.from_arrays(arrays, schema=self._arrow)
        except (pa.ArrowException, ValueError, TypeError, OverflowError):
            return None

    def _changes(self) -> Iterator[binlog.Change]:
        """The table's changes in (low, end]: its share of the run's one read of the binlog (`decode.py`), or a read
        of its own when it is the run's only stream (or runs outside the run's staging)."""
        p, root = self.split, self.context.staging_dir.parents[1]
        if p.table in p.routed and root.name == self.context.run_id:
            routed = decode.RoutedDecode(root, self.settings, p.routed, p.decode_low, self.end, p.base, p.width)
            yield from binlog.changes(routed.parts(p.table), p.table, self.names, p.low, self.end, p.base)
        else:
            yield from binlog.read(self.settings, p.database, p.table_name, self.names, p.low, self.end, p.base,
                                   p.width)

    def _chunk(self) -> Iterator[RawBatch]:
        """One snapshot chunk as of its high position, which is this work unit's watermark (`chunk.<n>`), a thousand
        rows a batch (`ChunkRows`); the first chunk starts with a truncate record (a snapshot replaces what a consumer
        held of the table)."""
        p, s = self.split, self.settings
        lo = tuple(p.chunk_lo) if p.chunk_lo is not None else None
        hi = tuple(p.chunk_hi) if p.chunk_hi is not None else None
        if p.chunk == 0:
            self.at = "snapshot start"
            yield from record_batches([(self._record(None, "truncate", p.low, -1, None, None), self.at)])
        conn = connect(s, in_task=True)
        try:
            floats = frozenset(f["name"] for f in p.avro_schema["fields"]
                               if f["type"] == "float" or (isinstance(f["type"], list) and "float" in f["type"]))
            native = read_chunk_native(s, conn, p.database, p.table_name, self.names, p.key, lo, hi, floats) \
                if p.native and self._columnar else None
            if native is not None:
                high, table = native
            else:
                high, rows = read_chunk(s, conn, p.database, p.table_name, self.names, p.key, lo, hi, floats)
        finally:
            conn.close()
        if native is not None:
            first = 0
            for batch in table.to_batches(CHUNK_BATCH):
                self.at = f"snapshot chunk {p.chunk} row {first}"
                yield RawBatch(CHUNK, ChunkRows([], first, high, batch))
                first += batch.num_rows
            self.end = high
            return
        for first in range(0, len(rows), CHUNK_BATCH):
            self.at = f"snapshot chunk {p.chunk} row {first}"
            yield RawBatch(CHUNK, ChunkRows(rows[first:first + CHUNK_BATCH], first, high))
        self.end = high

    def _next(self) -> int:
        self.seq += 1
        return self.seq - 1

    def _records(self, c: binlog.Change, chunks: Chunks | None) -> Iterator[Record]:
        key = self.split.key
        self.at = (c.op, c.pos)  # `location()` makes it text

        def wanted(image: dict[str, Any]) -> bool:
            return chunks is None or chunks.after(tuple(image[k] for k in key), c.pos)

        if c.op == "truncate":
            if chunks is not None and c.pos <= max(at for _, _, at in chunks.ranges):
                raise SourceError(f"table {self.split.table} was truncated at {position.text(c.pos, self.split.base)} while its snapshot was read: "
                                  "some chunks hold the rows before it, others not. Nothing of this run is committed "
                                  f"for it. Snapshot it again: `gobblin-py state reset JOB.yaml --dataset "
                                  f"{self.split.table} --yes`, then run")
            yield self._record(None, "truncate", c.pos, self._next(), c.ts, None)
        elif c.op == "insert" and c.after is not None and wanted(c.after):
            yield self._record(c.after, "insert", c.pos, self._next(), c.ts, c.xid)
        elif c.op == "delete" and c.before is not None and wanted(c.before):
            yield self._record(c.before, "delete", c.pos, self._next(), c.ts, c.xid)
        elif c.op == "update" and c.before is not None and c.after is not None:
            moved = any(c.before[k] != c.after[k] for k in key)
            if moved and wanted(c.before):
                yield self._record(c.before, "delete", c.pos, self._next(), c.ts, c.xid)
            if wanted(c.after):
                yield self._record(c.after, "update", c.pos, self._next(), c.ts, c.xid)

    def _record(self, row: dict[str, Any] | None, op: str, pos: int, seq: int, ts: int | None, xid: int | None) -> Record:
        if row is None:
            record: dict[str, Any] = dict.fromkeys(self.names)
        elif len(row) == len(self.names):  # the planned columns (a row event's names are checked against them)
            record = dict(row)
        else:
            record = {n: row.get(n) for n in self.names}
        for name, convert in self._convert:
            if record[name] is not None:
                record[name] = convert(record[name])
        for name in self._binary:  # mysql-replication gives "" for an empty binary value (b"" decodes by any codec
            if record[name] == "":  # name), which the writers refuse for a bytes column: the record went to the errors
                record[name] = b""
        if ts is not None and ts != self._ts[0]:  # a transaction's records share their commit's second
            self._ts = (ts, datetime.fromtimestamp(ts, UTC))
        record.update(_op=op, _pos=pos, _seq=seq, _xid=xid, _commit_ts=self._ts[1] if ts is not None else None)
        return record
