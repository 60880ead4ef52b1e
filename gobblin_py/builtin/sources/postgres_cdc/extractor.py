"""Reads one table's WorkUnit: its snapshot first when it has none committed, then its changes of the transactions
committing in [low, end), decoded from `pgoutput` and parsed by psycopg's own loaders by type OID.

A record is the table's columns and `_op`, `_lsn`, `_seq`, `_commit_ts`, `_xid`:
- insert, update: the row after; delete: the old key (REPLICA IDENTITY DEFAULT/INDEX) or the whole old row (FULL),
  the other columns null. An update that changes the key (the primary key; under FULL without one, any column) is two
  records: a delete of the old key, then the update, at consecutive `_seq` (as Debezium emits a delete and a create),
  so a consumer kept by key drops the old key. Under REPLICA IDENTITY USING INDEX on another index than the primary
  key pgoutput never sends the old primary key: an update of such a table fails the task naming it and the fix
  (NOTHING, or DEFAULT without a primary key: PostgreSQL itself refuses the update of a published table);
  truncate: one record, every column null (the table was emptied by that transaction);
  read: a snapshot row, after one truncate record (`_seq` -1): a snapshot replaces what a consumer held of the table
  (a table snapshotted again after `state reset` loses, in an upsert table too, the rows deleted meanwhile). So every
  column is nullable in the change records.
- `_lsn` is the transaction's commit LSN and `_seq` the change's place in it: (_lsn, _seq) orders all changes of the
  slot totally, as they committed (a key updated many times in one transaction: ordered by `_seq`). Snapshot rows
  have `_lsn` = the slot's position − 1 (the snapshot holds everything committed before it) and `_seq` = their row
  number.
- An unchanged TOASTed value (an update that did not touch a large value) is not sent by pgoutput: with REPLICA
  IDENTITY FULL it is taken from the old row; otherwise the task fails naming the table and column (ALTER TABLE …
  REPLICA IDENTITY FULL), never a record with the value missing.
- A Relation message whose columns differ from the planned ones (ALTER TABLE in the range): columns added since the
  change read as null (the plan has them, the change does not); a column dropped, renamed or retyped fails the task
  naming the table, the change and the LSN (the next run plans with the columns as they are then; when changes of the
  old shape remain in the range, snapshot the table again).
- On the columnar path (a task without converters into a writer that takes Arrow), a snapshot is read through ADBC in
  the same exported snapshot (`native.py`) and handed to the writer as Arrow batches; changes take the row path.
- A change holding a value its column's type cannot give in Python (a date at `infinity`, a year beyond 9999) is a
  bad record: the error file names the table, the change, the column and the value, and the other changes go on.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from gobblin_py.api import TaskContext, WorkUnit
from gobblin_py.api.batches import BatchExtractor, RawBatch
from gobblin_py.api.types import Record, Schema, WatermarkValue
from gobblin_py.builtin.schemas.arrow_rows import (
    RECORDS,
    conform,
    is_decimal,
    record_batches,
    records_arrow,
    row_schema,
)
from gobblin_py.builtin.sources.postgres_cdc import decode, native, pgoutput
from gobblin_py.builtin.sources.postgres_cdc.chunks import ChunkFilter
from gobblin_py.builtin.sources.postgres_cdc.columns import checked_primary
from gobblin_py.builtin.sources.postgres_cdc.settings import (
    PostgresCdcSettings,
    flushed_after_sync_commit,
    lsn_text,
    open_source,
)
from gobblin_py.builtin.sources.postgres_cdc.snapshot import read_chunk
from gobblin_py.builtin.sources.postgres_cdc.split import CdcSplit
from gobblin_py.builtin.sources.postgres_cdc.visibility import Snapshot
from gobblin_py.errors import SourceError, UnreachableError, describe

log = logging.getLogger(__name__)

TEXT_OID, TEXT_ARRAY_OID = 25, 1009

class BadValue(ValueError):
    """A change's value that psycopg's loader of its type cannot read (PostgreSQL's `infinity` dates, years > 9999)."""

    def __init__(self, column: str, text: str, reason: str, row: dict[str, Any]) -> None:
        super().__init__(f"column {column}: value {text!r} cannot be read: {reason}")
        self.row = row


@dataclass(frozen=True)
class SnapshotRows(RawBatch):
    """Snapshot rows as the native reader gave them (`values`: one Arrow record batch of the table's columns); `first`
    is the first row's number, its `_seq`."""

    first: int = 0


CHANGES_PER_BATCH = 1000


class PostgresCdcExtractor(BatchExtractor):
    """One table's snapshot (first run) and changes in [low, end)."""

    makes_arrow = True

    def __init__(self, settings: PostgresCdcSettings, workunit: WorkUnit, context: TaskContext) -> None:
        self.settings, self.workunit, self.context = settings, workunit, context
        self.split = p = CdcSplit.of(workunit)
        self.table: str = p.table
        self.names: list[str] = p.columns
        self.types: list[list[int]] = p.types
        self.low, self.end = p.low, p.end
        self.conn: Any = None
        self.at = ""  # where the current record came from
        self._loaders: list[Any] = []
        self._shapes: dict[int, list[int | None]] = {}  # relation message id → planned column i → its index there
        self._keys: dict[pgoutput.Relation, list[int]] = {}  # a relation → the indexes of its key columns there
        self._primary: list[str] = []  # the table's primary key columns (empty: none)
        self.native = False  # the columnar path, with ADBC installed: the snapshot comes as Arrow
        self._arrow: Any = None  # the Arrow mapping of the records' schema
        self._stamp: tuple[int | None, datetime | None] = (None, None)  # the last commit time and its datetime
        self._where = ""  # the transaction being read, as an error or a bad record names it
        self._chunk_seen: str | None = None  # a chunk task: its snapshot, once read
        self._read_whole = False  # the stream read to its end: the connection may serve the task's next table
        self._filter = ChunkFilter(p.table, p.chunks) if p.chunks is not None else None  # during a chunked snapshot

    def get_schema(self) -> Schema:
        return self.split.avro_schema

    def actual_high_watermark(self) -> WatermarkValue:
        chunk = self.split.chunk  # a chunk task's: its snapshot, kept for the stream's filter (`chunks.py`)
        if chunk is not None:
            return f"{chunk['plan']}:{chunk['index']}:{self._chunk_seen}"
        return self.end  # only a task that read its whole range is committed

    def location(self) -> str:
        return f"{self.table} {self.at}"

    def close(self) -> None:
        """Give the connection back to the task (`TaskResources`) when the read ended and left it as opened (autocommit,
        no transaction, not broken), for the next table of the slot's MultiWorkUnit; else close it."""
        conn, self.conn = self.conn, None
        if conn is None:
            return
        if self._read_whole and self.context.resources is not None and _as_opened(conn):
            self.context.resources.give_back(self._connection_key(), conn, lambda c: c.close())
            return
        conn.close()

    def _connection_key(self) -> str:
        """What a shared connection must agree on: the database, the password's variable (never its value), the
        statement timeout and the connect timeout the settings open it with."""
        s = self.settings
        return f"postgres_cdc {s.url} {s.password_env} {s.statement_timeout} {s.connect_timeout_s}"

    def _open(self) -> Any:
        """The task's connection given back by the extractor of an earlier table (one connection for the slot's
        MultiWorkUnit, not one a table), else a new one."""
        resources = self.context.resources
        conn = resources.borrow(self._connection_key()) if resources is not None else None
        if conn is not None and _as_opened(conn):
            return conn
        if conn is not None:
            conn.close()
        return open_source(self.settings, in_task=True)

    def columnar_path(self) -> None:
        self.native = native.installed()

    def read_batches(self) -> Iterator[RawBatch]:
        import psycopg

        s = self.settings
        self.conn = conn = self._open()
        self._loaders = [self._loader(conn, i) for i in range(len(self.names))]
        try:
            seen = None
            if self.split.chunk is not None:  # its key checked in the chunk's own snapshot (`read_chunk`)
                self._chunk_seen = yield from self._chunk(conn)
                return
            self._primary = checked_primary(conn, self.split)
            if self.split.chunks is not None and self.split.chunks.get("fresh"):  # before every chunk's rows (T - 1)
                yield RawBatch(RECORDS, [(self._record([None] * len(self.names), "truncate", self.end - 1, -1, None,
                                                       None), "chunked snapshot start")])
            if self.split.snapshot:
                seen = yield from self._snapshot(conn)
            yield from record_batches(((record, self.at) for record in self._changes(conn, seen)), CHANGES_PER_BATCH)
            self._read_whole = True
        except psycopg.OperationalError as exc:
            raise UnreachableError(f"{s.endpoint}: lost the connection reading {self.table}: {describe(exc)}",
                                   s.endpoint, "the next attempt (or run) reads the range again") from None
        except psycopg.Error as exc:
            raise SourceError(f"{s.endpoint}, slot {s.slot}, table {self.table}: {describe(exc)}") from None

    def records_of(self, batch: RawBatch) -> Iterator[Record]:
        if isinstance(batch, SnapshotRows):
            yield from self._snapshot_records(batch)
            return
        for record, at in batch.values:
            self.at = at
            yield record

    def _snapshot_records(self, batch: SnapshotRows) -> Iterator[Record]:
        """Native snapshot rows as the row cursor gives them: each column cast to the schema's type where it casts
        exactly, numeric text (NaN, Infinity) as Decimals; a value Python cannot hold fails as the cursor would."""
        import pyarrow as pa

        values = pa.schema(list(self._schema())[:len(self.names)])
        try:
            rows = conform(batch.values, values, whole=False).to_pylist()
        except (OverflowError, ValueError) as exc:
            raise SourceError(f"table {self.table}: a snapshot row holds a value Python cannot ({describe(exc)})") from None
        decimals = [f.name for f in values if is_decimal(f.type)]
        for n, row in enumerate(rows, start=batch.first):
            for name in decimals:
                if isinstance(row[name], str):
                    row[name] = Decimal(row[name])
            self.at = f"snapshot row {n}"
            yield self._record([row[c] for c in self.names], "read", self.low - 1, n, None, None)

    def to_arrow(self, batch: RawBatch) -> Any | None:
        """Native snapshot rows as one Arrow batch of the records' schema (the change fields of a snapshot row added as
        columns), and a batch of change records made one Arrow batch at once (not record by record through the row
        path: issue 45's profile); None for rows a cast refuses (the row path then decides, naming the record)."""
        import numpy as np
        import pyarrow as pa

        if not isinstance(batch, SnapshotRows):
            return records_arrow(batch, self._schema())
        schema = self._schema()
        width = len(self.names)
        columns = conform(batch.values, pa.schema(list(schema)[:width]))
        if columns is None:
            return None
        n = batch.values.num_rows
        # made in Arrow, not from n Python objects each (0.7 s of held lock per 2M rows: issue 45's chunk profile)
        meta = [pa.repeat(pa.scalar("read", schema.field("_op").type), n),
                pa.repeat(pa.scalar(self.low - 1, schema.field("_lsn").type), n),
                pa.array(np.arange(batch.first, batch.first + n, dtype=np.int64), schema.field("_seq").type),
                pa.nulls(n, schema.field("_commit_ts").type), pa.nulls(n, schema.field("_xid").type)]
        return pa.RecordBatch.from_arrays([*columns.columns, *meta], schema=schema)

    def _schema(self) -> Any:
        if self._arrow is None:
            self._arrow = row_schema(self.get_schema())
        return self._arrow

    def _loader(self, conn: Any, i: int) -> Any:
        """psycopg's text loader of column i's type (its base type for a domain); None: keep the text."""
        import psycopg

        cast = self.split.casts.get(self.names[i])
        if cast == "text":
            return None
        oid = TEXT_ARRAY_OID if cast == "text[]" else self.types[i][2]
        return conn.adapters.get_loader(oid, psycopg.pq.Format.TEXT)(oid, conn)

    def _record(self, values: list[Any], op: str, lsn: int, seq: int, commit_us: int | None, xid: int | None) -> Record:
        record = dict(zip(self.names, values))
        if commit_us is not None and commit_us != self._stamp[0]:  # one datetime a transaction, not one a change
            self._stamp = (commit_us, datetime.fromtimestamp(commit_us / 1e6, UTC))
        record.update(_op=op, _lsn=lsn, _seq=seq, _xid=xid, _commit_ts=self._stamp[1] if commit_us is not None else None)
        return record

    def _snapshot(self, conn: Any) -> Iterator[RawBatch]:
        """Every row as a REPEATABLE READ snapshot sees it, after a truncate record; returns which transactions it
        sees. Natively (ADBC, in the snapshot exported) on the columnar path, else by psycopg's row cursor."""
        import psycopg
        from psycopg import sql

        p, s = self.split, self.settings
        casts = p.casts
        conn.autocommit = False
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        conn.read_only = True
        seen_text, exported = conn.execute("SELECT pg_current_snapshot()::text, pg_export_snapshot()").fetchone()
        seen = Snapshot(seen_text)
        columns = sql.SQL(", ").join(sql.SQL("{}::{}").format(sql.Identifier(c), sql.SQL(casts[c])) if c in casts
                                     else sql.Identifier(c) for c in self.names)
        query = sql.SQL("SELECT {} FROM {}").format(columns, sql.Identifier(p.schema_name, p.table_name))
        # the snapshot replaces what a consumer held of the table (a reset table's old rows, in an upsert table too)
        yield RawBatch(RECORDS, [(self._record([None] * len(self.names), "truncate", self.low - 1, -1, None, None),
                                  "snapshot start")])
        n = 0
        if self.native:
            log.info("%s: snapshot read through ADBC in exported snapshot %s", self.table, exported)
            for arrow in native.snapshot_batches(s, exported, query.as_string(conn), s.fetch_rows, self.table):
                yield SnapshotRows("arrow", arrow, first=n)
                n += arrow.num_rows
        else:
            with conn.cursor(name=f"gobblin_snap_{self.workunit.id[-32:]}") as cur:
                cur.itersize = s.fetch_rows
                cur.execute(query)
                while rows := cur.fetchmany(s.fetch_rows):
                    yield RawBatch(RECORDS, [(self._record(list(row), "read", self.low - 1, n + i, None, None),
                                              f"snapshot row {n + i}") for i, row in enumerate(rows)])
                    n += len(rows)
        conn.rollback()
        conn.autocommit, conn.read_only = True, False
        conn.isolation_level = None
        self._cover(conn)
        log.info("%s: snapshot of %d row(s) (sees transactions below %d but %d); changes read up to %s", self.table, n,
                 seen.xmax, len(seen.xip), lsn_text(self.end))
        return seen

    def _chunk(self, conn: Any) -> Iterator[RawBatch]:
        """One chunk of a chunked snapshot (`snapshot.py`) as snapshot rows at `_lsn` = the run's end - 1, `_seq` = the
        chunk's index << 32 + the row's number in it (unique over the chunks a run reads)."""
        index = self.split.chunk["index"] if self.split.chunk else 0
        n, base = 0, index << 32
        reader = read_chunk(self.settings, conn, self.split, self.native, f"gobblin_chunk_{self.workunit.id[-32:]}")
        while True:
            try:
                kind, values = next(reader)
            except StopIteration as stop:
                return str(stop.value)
            if kind == "arrow":
                yield SnapshotRows("arrow", values, first=base + n)
            else:
                yield RawBatch(RECORDS, [(self._record(list(row), "read", self.low - 1, base + n + i, None, None),
                                          f"chunk {index} row {n + i}") for i, row in enumerate(values)])
            n += values.num_rows if kind == "arrow" else len(values)

    def _cover(self, conn: Any) -> None:
        """Moves this table's end past every commit the snapshot saw. The snapshot was taken after planning, so it may
        hold transactions committing at or after the planned end; read only up to that end, the next run (which has no
        snapshot to tell them by) would read their changes again. Every transaction the snapshot saw committed before
        it; once a transaction of our own has committed synchronously, the flushed WAL holds all their commit records,
        so the changes up to it are read now, those the snapshot holds left out by the visibility rule."""
        self.end = max(self.end, flushed_after_sync_commit(conn))

    def _messages(self, conn: Any) -> Iterator[bytes]:
        """The slot's messages up to `end`: this table's share of the run's one decode (`decode.py`), or, for a table
        snapshotted in this run (its end moved past the run's), a peek of its own."""
        p, root = self.split, self.context.staging_dir.parents[1]
        if self.table in p.routed and not p.snapshot and root.name == self.context.run_id:
            yield from decode.RoutedDecode(root, self.settings, p.routed, p.decode_low, self.end).messages(conn, self.table)
        else:
            yield from decode.peek(conn, self.settings, self.end, f"gobblin_cdc_{self.workunit.id[-32:]}")

    def _changes(self, conn: Any, seen: Snapshot | None) -> Iterator[Record]:
        oid = self.split.oid
        relations: dict[int, pgoutput.Relation] = {}
        begin: pgoutput.Begin | None = None
        keep, seq, count = False, 0, 0
        for data in self._messages(conn):
            kind = data[:1]
            if kind == b"B":
                begin = pgoutput.decode(data)  # type: ignore[assignment]
                assert isinstance(begin, pgoutput.Begin)
                keep = self.low <= begin.final_lsn < self.end and (seen is None or not seen.sees(begin.xid)) and not (
                    self._filter is not None and self._filter.skips(begin.xid))
                seq = 0
                if keep:
                    self._where = f"transaction {begin.xid} committed at {lsn_text(begin.final_lsn)}"
            elif kind == b"R":
                rel = pgoutput.decode(data)
                assert isinstance(rel, pgoutput.Relation)
                relations[rel.oid] = rel
            elif kind == b"C":
                begin, keep = None, False
            elif keep and kind in (b"I", b"U", b"D", b"T"):
                assert begin is not None
                message = pgoutput.decode(data)
                for record in self._of(message, relations, oid, begin, seq):
                    seq += 1
                    if self._filter is None or self._filter.keeps(record, begin.xid, self.at):
                        yield record
                        count += 1
        log.info("%s: %d change(s) in [%s, %s)", self.table, count, lsn_text(self.low), lsn_text(self.end))

    def _of(self, m: Any, relations: dict[int, pgoutput.Relation], oid: int, b: pgoutput.Begin, seq: int) -> Iterator[Record]:
        """The records of one change message, if it is of this table."""
        where = self._where
        if isinstance(m, pgoutput.Truncate):
            if oid in m.relations:
                self.at = f"truncate in {where}"
                yield self._record([None] * len(self.names), "truncate", b.final_lsn, seq, b.commit_us, b.xid)
            return
        rel = relations.get(m.relation)
        if rel is None:
            raise SourceError(f"{self.table}: a change of relation {m.relation} with no Relation message before it, in {where}")
        if rel.table != self.table:
            return
        if m.relation != oid:
            raise SourceError(f"table {self.table} was dropped and created again (relation {oid} is now {m.relation}), "
                              f"seen in {where}: its changes cannot be told apart. Snapshot it again: `gobblin-py state "
                              f"reset JOB.yaml --dataset {self.table} --yes`, then run")
        shape = self._shape(rel, where)
        self.at = f"{type(m).__name__.lower()} in {where}"
        try:
            yield from self._change(m, shape, rel, b, seq)
        except BadValue as exc:
            self.context.reject(exc.row, str(exc), self.location())

    def _change(self, m: Any, shape: list[int | None], rel: pgoutput.Relation, b: pgoutput.Begin, seq: int) -> Iterator[Record]:
        if isinstance(m, pgoutput.Insert):
            yield self._record(self._values(m.new, shape, None, rel), "insert", b.final_lsn, seq, b.commit_us, b.xid)
        elif isinstance(m, pgoutput.Update):
            old = m.old if m.old_kind == "O" else None
            after = self._record(self._values(m.new, shape, old, rel), "update", b.final_lsn, seq + 1, b.commit_us, b.xid)
            key = self._key(rel)  # fails closed where a key update cannot be known
            if m.old is None or not self._key_changed(m, key):
                after["_seq"] = seq
                yield after
                return
            yield self._record(self._values(m.old, shape, None, rel), "delete", b.final_lsn, seq, b.commit_us, b.xid)
            yield after
        elif isinstance(m, pgoutput.Delete):
            yield self._record(self._values(m.old, shape, None, rel), "delete", b.final_lsn, seq, b.commit_us, b.xid)

    @staticmethod
    def _key_changed(m: pgoutput.Update, key: list[int]) -> bool:
        """Whether the update, which carries its old key or row, moved the row to another key (a value pgoutput left
        out as an unchanged TOASTed one is unchanged)."""
        assert m.old is not None
        return any(m.new[j] is not pgoutput.UNCHANGED and m.new[j] != m.old[j] for j in key)

    def _key(self, rel: pgoutput.Relation) -> list[int]:
        """The indexes in the relation's tuples of the columns whose change is a key update: the primary key (under
        FULL, every column without one). SourceError where pgoutput cannot tell a primary key update: REPLICA IDENTITY
        USING INDEX on another index (it sends only that index's old columns), or no identity at all."""
        found = self._keys.get(rel)
        if found is not None:
            return found
        index = {c.name: j for j, c in enumerate(rel.columns)}
        flagged = [c.name for c in rel.columns if c.key]
        if rel.replica_identity == "f":
            names = self._primary if all(n in index for n in self._primary) and self._primary else list(index)
        elif flagged and (rel.replica_identity == "d" or not self._primary or set(flagged) == set(self._primary)):
            names = flagged
        else:
            has = (f"REPLICA IDENTITY USING INDEX on ({', '.join(flagged)}), not its primary key "
                   f"({', '.join(self._primary)})") if flagged else "no replica identity"
            raise SourceError(f"table {self.table} has {has}: pgoutput sends an update without the old primary key, so "
                              f"an update that changes the primary key (seen at {self.at}) cannot be known, and a "
                              "consumer kept by key would keep the old row. Nothing of this run is committed for it. "
                              f"ALTER TABLE {self.table} REPLICA IDENTITY DEFAULT (or FULL), then snapshot it again: "
                              f"`gobblin-py state reset JOB.yaml --dataset {self.table} --yes`")
        self._keys[rel] = found = [index[n] for n in names]
        return found

    def _shape(self, rel: pgoutput.Relation, where: str) -> list[int | None]:
        """Where each planned column is in the relation's tuples; a change of the columns beyond an added one fails."""
        found = self._shapes.get(id(rel))
        if found is not None:
            return found
        planned = {n: (t[0], t[1]) for n, t in zip(self.names, self.types)}
        have = {c.name: (c.type_oid, c.typmod) for c in rel.columns}
        changes = [f"column {n} is not in the plan (added after it was made, or renamed)" for n in have if n not in planned]
        changes += [f"column {n} changed type (oid {planned[n][0]} typmod {planned[n][1]} → oid {have[n][0]} typmod "
                    f"{have[n][1]})" for n in have if n in planned and planned[n] != have[n]]
        if changes:
            raise SourceError(f"table {self.table} changed in the range read (ALTER TABLE): {'; '.join(changes)}, at "
                              f"{where}. Nothing of this run is committed for it; the next run plans with the columns as "
                              "they are then. If changes of the old columns remain in its range, snapshot the table "
                              f"again: `gobblin-py state reset JOB.yaml --dataset {self.table} --yes`")
        index = {c.name: i for i, c in enumerate(rel.columns)}
        shape = [index.get(n) for n in self.names]
        self._shapes[id(rel)] = shape
        return shape

    def _values(self, tup: tuple, shape: list[int | None], old: tuple | None, rel: pgoutput.Relation) -> list[Any]:
        import psycopg

        out: list[Any] = []
        for i, j in enumerate(shape):
            raw = tup[j] if j is not None else None
            if raw is pgoutput.UNCHANGED:
                raw = old[j] if old is not None and j is not None else pgoutput.UNCHANGED
                if raw is pgoutput.UNCHANGED:
                    raise SourceError(f"table {self.table}, column {self.names[i]}: an update at {self.at} left a large "
                                      "(TOASTed) value unchanged, and pgoutput does not send it: the change cannot be "
                                      f"written whole. ALTER TABLE {self.table} REPLICA IDENTITY FULL, then snapshot "
                                      f"it again (`gobblin-py state reset JOB.yaml --dataset {self.table} --yes`)")
            if raw is None:
                out.append(None)
                continue
            loader = self._loaders[i]
            if loader is None:
                out.append(bytes(raw).decode("utf-8"))
                continue
            try:
                out.append(loader.load(raw))
            except (ValueError, OverflowError, psycopg.DataError) as exc:  # psycopg's DataError: "date too large"
                text = {n: None if v is None or v is pgoutput.UNCHANGED else bytes(v).decode("utf-8", "replace")
                        for n, v in zip(self.names, (tup[k] if k is not None else None for k in shape))}
                raise BadValue(self.names[i], bytes(raw).decode("utf-8", "replace"), describe(exc), text) from None
        return out


def _as_opened(conn: Any) -> bool:
    """Whether `conn` is as `open_source` made it: open, in autocommit, writable, no transaction in progress."""
    from psycopg.pq import TransactionStatus

    return (not conn.closed and conn.autocommit and not conn.read_only
            and conn.info.transaction_status == TransactionStatus.IDLE)
