"""The `mysql_cdc` source: MySQL/MariaDB change data capture from the binlog (row-based, read with mysql-replication);
each listed table (`database.table`) is a dataset of change records, kept equal by key by an upsert publisher.

Positions. A table's watermark (key `binlog`) is a binlog position P (`position.py`) meaning "every transaction whose
commit ends at or before P is in". A run plans one end E for all tables, the binlog's end (`SHOW MASTER STATUS`): each
table's WorkUnit covers the transactions committing in (P, E]. The run's streamed tables share one read of the binlog
from the lowest of their positions to E (`decode.py`): the first task to read scans it and spools each table's part;
nothing upstream moves, so a crash anywhere before the commit reads the same range again. A transaction is wholly in
one range.

First run, and a table reset: a table with no committed position is snapshotted first in primary-key chunks
(`snapshot.py`), then its changes follow; its range ends at the last chunk's high position when that is past E.

Checks before anything runs (`server.py`): log_bin on, binlog_format ROW, binlog_row_image FULL, binlog_row_metadata
FULL; each table exists, has a primary key (an upsert needs one) and only columns with an Avro type. Each table's
commit records the server's identity (`state.server`) and its columns with their declared types (`state.columns`);
the next run compares them first: another server or binlog fails the run; a committed position no longer in the binlog
(purged, reset) fails it naming the range that is gone; a column added, dropped or retyped fails that table alone (an
input problem: reading on would name values by the wrong columns or types) until it is snapshotted again.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

from gobblin_py.api import Extractor, MultiWorkUnit, Source, SourceState, TaskContext, WorkUnit
from gobblin_py.api.names import workunit_id
from gobblin_py.api.types import SchemaKind
from gobblin_py.builtin.schemas.mysql_columns import native_reads, read_columns
from gobblin_py.builtin.schemas.postgres_columns import avro_schema, check_mapped
from gobblin_py.builtin.sources.mysql_cdc import position, server
from gobblin_py.builtin.sources.mysql_cdc.decode import route
from gobblin_py.builtin.sources.mysql_cdc.settings import MysqlCdcSettings, connect, query
from gobblin_py.builtin.sources.mysql_cdc.snapshot import boundaries
from gobblin_py.builtin.sources.mysql_cdc.split import MysqlCdcSplit
from gobblin_py.errors import ConfigError, GobblinError, SourceError, describe

log = logging.getLogger(__name__)

WATERMARK_KEY = "binlog"
CHUNK_KEY = "chunk."
"""A snapshot chunk's watermark key (`chunk.<n>`): its high position; the chunk's key range is kept in `state.chunks`."""
INTEGERS = ("tinyint", "smallint", "mediumint", "int", "bigint")

META_FIELDS: list[dict[str, Any]] = [
    {"name": "_op", "type": "string", "doc": "read (snapshot), insert, update, delete or truncate"},
    {"name": "_pos", "type": "long", "doc": "the binlog position where the change's transaction commits, "
                                            "(file number << 32) | offset (a snapshot row: its chunk's high position)"},
    {"name": "_seq", "type": "long", "doc": "the change's place in the run's records of the table: (_pos, _seq) orders them"},
    {"name": "_commit_ts", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}], "default": None,
     "doc": "when the transaction's commit was written to the binlog, in seconds (null for snapshot rows)"},
    {"name": "_xid", "type": ["null", "long"], "default": None,
     "doc": "the transaction's XID in the binlog (null for snapshot rows and non-transactional tables)"},
]
"""Fields every change record has after the table's columns."""

KEY_SQL = ("SELECT column_name FROM information_schema.key_column_usage WHERE table_schema = %s AND table_name = %s "
           "AND constraint_name = 'PRIMARY' ORDER BY ordinal_position")


@dataclass(frozen=True)
class TablePlan:
    """What planning learned of one table and the server: its columns and key, the run's end and the server's identity."""

    dataset: str
    database: str
    name: str
    columns: list[Any]
    key: list[str]
    integer_key: bool
    end: position.Position
    identity: dict[str, Any]
    row_bytes: int = 0  # information_schema's avg_row_length: what a chunk's size is estimated by
    gtid: str | None = None  # the GTID position the run's end stands for (MariaDB), kept with a stream's commit


def as_list(key: Any) -> list[Any] | None:
    """A key (a tuple of its columns' values) as a split and the state keep it: a list, or None (unbounded)."""
    return list(key) if key is not None else None


def reset_hint(tables: list[str]) -> str:
    return "; ".join(f"`gobblin-py state reset JOB.yaml --dataset {t} --yes`" for t in tables)


class MysqlCdcSource(Source):
    """The listed tables as change records read from the binlog, each table's position committed with its data."""

    Settings = MysqlCdcSettings
    split_type = MysqlCdcSplit
    change_markers = {"delete": ("_op", "delete"), "truncate": ("_op", "truncate")}
    whole_datasets = True  # a run's chunk n starts at chunk n - 1's high key, and chunk 0 carries the truncate

    @classmethod
    def schema_kind(cls, settings: MysqlCdcSettings) -> SchemaKind:
        return SchemaKind.AVRO

    def endpoints(self, workunit: WorkUnit) -> list[str]:
        return [self.settings.endpoint]

    def get_workunits(self, state: SourceState) -> list[WorkUnit | MultiWorkUnit]:
        import pymysql

        s: MysqlCdcSettings = self.settings
        conn = connect(s)
        try:
            return self._plan(conn, state)
        except GobblinError:
            raise
        except pymysql.err.Error as exc:
            raise SourceError(f"{s.endpoint}: planning failed: {describe(exc)}") from None
        finally:
            conn.close()

    def _plan(self, conn: Any, state: SourceState) -> list[WorkUnit | MultiWorkUnit]:
        s: MysqlCdcSettings = self.settings
        found = server.variables(conn)
        server.check_settings(found, s.endpoint)
        end = position.current(conn)
        identity = server.identity(found, end.base)
        logs = position.binary_logs(conn)
        gtid = server.gtid_at(conn, end)
        units: list[WorkUnit | MultiWorkUnit] = []
        gone: list[SourceError] = []  # tables whose committed position this binlog cannot go on from
        state.report_listed(s.tables)  # a committed table taken out of `tables` is named, not "no new data"
        for table in s.tables:
            database, name = table.split(".")
            t = TablePlan(table, database, name, *self._table(conn, table, database, name), end, identity,
                          _row_bytes(conn, database, name), gtid)
            marks = state.watermarks(table)
            low = marks.get(WATERMARK_KEY)
            done = {int(k.split(".", 1)[1]): int(v) for k, v in marks.items() if k.startswith(CHUNK_KEY) and v is not None}
            kept = state.kept(table)
            if low is not None or done:
                oldest = int(low) if low is not None else min(done.values())
                try:
                    server.check_identity(table, kept.get("server"), identity, s.endpoint, reset_hint([table]))
                    server.check_history(conn, table, oldest, end, s.endpoint, reset_hint([table]))
                    server.check_gtid(conn, table, kept.get("gtid"), oldest, end, s.endpoint, reset_hint([table]))
                except SourceError as exc:  # the others are checked too, so one refusal names every such table
                    gone.append(exc)
                    continue
                problem = _columns_changed(table, kept.get("columns"), t.columns)
                if problem is not None:
                    state.report_input_problem(table, problem)
                    continue
            if low is not None:
                units.append(self._workunit(t, low=int(low), stop=max(end.value(), int(low)),
                                            read_bytes=_binlog_bytes(logs, int(low), end)))
                continue
            ranges = kept.get("chunks") if isinstance(kept.get("chunks"), dict) else {}
            chunks = sorted((int(n), r[0], r[1]) for n, r in ranges.items() if int(n) in done)
            if chunks and chunks[-1][2] is None:  # every chunk read: the stream starts after each one's high position
                after = [(lo, hi, done[n]) for n, lo, hi in chunks]
                units.append(self._workunit(t, low=min(done.values()), stop=end.value(), chunks=after,
                                            read_bytes=_binlog_bytes(logs, min(done.values()), end)))
                continue
            units += self._chunks(conn, t, chunks)
        if len(gone) == 1:
            raise gone[0]
        if gone:
            raise SourceError(f"{len(gone)} tables cannot go on from their committed binlog positions; nothing is "
                              "read:\n" + "\n".join(f"- {exc}" for exc in gone))
        units = route(units, end.value())  # type: ignore[arg-type]  # a list of WorkUnits: no MultiWorkUnit here
        log.info("binlog at %s: %d work unit(s) for %d table(s) (%d snapshot chunk(s))", end, len(units),
                 len(s.tables), sum(1 for u in units if MysqlCdcSplit.of(u).chunk is not None))
        return units

    def _chunks(self, conn: Any, t: TablePlan, read: list[tuple[int, Any, Any]]) -> list[WorkUnit]:
        """The table's next `snapshot.chunks_per_run` snapshot chunks after those `read` (committed before)."""
        s: MysqlCdcSettings = self.settings
        first = read[-1][0] + 1 if read else 0
        after = tuple(read[-1][2]) if read else None
        if t.integer_key:
            highs = boundaries(s, conn, t.database, t.name, t.key, after, s.snapshot.chunks_per_run)
        else:
            highs = [None]
        units = []
        for n, hi in enumerate(highs, start=first):
            units.append(self._workunit(t, low=t.end.value(), stop=t.end.value(), chunk=(n, after, hi),
                                        read_bytes=t.row_bytes * s.snapshot.chunk_rows))
            after = hi
        return units

    def _table(self, conn: Any, table: str, database: str, name: str) -> tuple[list[Any], list[str], bool]:
        columns = read_columns(conn, database, name)
        if not columns:
            raise ConfigError(f"{self.settings.endpoint}: table {table} does not exist (or the user may not read it: "
                              f"GRANT SELECT ON {database}.* TO …)")
        check_mapped(table, columns, ("leave the table out of source.tables, or rename the column",
                                      "leave the table out of source.tables, or change the column's type"))
        key = [r[0] for r in query(conn, KEY_SQL, (database, name))]
        if not key:
            raise ConfigError(f"table {table} has no primary key: its changes cannot be applied by key (an update or "
                              "delete of one of two equal rows could not be told apart). Add one (ALTER TABLE "
                              f"{table} ADD PRIMARY KEY (…)), or leave it out of source.tables")
        return columns, key, all(c.type_name in INTEGERS for c in columns if c.name in key)

    def _workunit(self, t: TablePlan, low: int, stop: int, chunk: tuple[int, Any, Any] | None = None,
                  chunks: list[tuple[Any, Any, int]] | None = None, read_bytes: int = 0) -> WorkUnit:
        """A stream of the table's changes in (low, stop] (after each chunk's high position: `chunks`), or one snapshot
        chunk (`chunk`: its number and key range), whose watermark `chunk.<n>` is its high position."""
        s: MysqlCdcSettings = self.settings
        names = [c.name for c in t.columns]
        schema = avro_schema(t.dataset, [dataclasses.replace(c, not_null=False) for c in t.columns],
                             namespace="gobblin_py.mysql_cdc")
        schema["fields"] += META_FIELDS
        types = [[c.name, c.declared] for c in t.columns]
        n, lo, hi = chunk if chunk is not None else (None, None, None)
        wu_id = workunit_id(f"{t.dataset}.{'chunk' + str(n) if chunk else 'binlog'}.{low}-{stop}", "mysql_cdc",
                            s.endpoint, t.dataset, str(types), str(low), str(stop), str(chunk), str(chunks),
                            str(t.identity))
        split = MysqlCdcSplit(table=t.dataset, database=t.database, table_name=t.name, columns=names,
                              casts={c.name: c.cast for c in t.columns if c.cast}, key=t.key, avro_schema=schema,
                              low=low, end=stop, base=t.end.base, width=t.end.width, chunk=n, chunk_lo=as_list(lo),
                              chunk_hi=as_list(hi), chunks=[(as_list(a), as_list(b), at) for a, b, at in chunks or []],
                              read_bytes=read_bytes,
                              native=chunk is not None and native_reads(t.columns, frozenset({"timestamp"})))
        props: dict[str, Any] = {"state.columns": types, "state.key": t.key, "state.server": t.identity}
        if chunk is not None:
            props["state.chunks"] = {str(n): [as_list(lo), as_list(hi)]}
        elif t.gtid is not None and stop == t.end.value():
            props["state.gtid"] = {"position": stop, "gtid": t.gtid}
        return WorkUnit(id=wu_id, dataset=t.dataset, watermark_key=f"{CHUNK_KEY}{n}" if chunk else WATERMARK_KEY,
                        low_watermark=low, expected_high_watermark=stop, split=split.packed(), props=props)

    def estimated_bytes(self, workunit: WorkUnit, state: SourceState) -> float:
        """A chunk: its rows at the table's average row length; a stream: the binlog bytes of its range (every
        table's task reads all of them), so a small run runs in the driver (`spark.in_driver_below`)."""
        return float(MysqlCdcSplit.of(workunit).read_bytes)

    def get_extractor(self, workunit: WorkUnit, context: TaskContext) -> Extractor:
        from gobblin_py.builtin.sources.mysql_cdc.extractor import MysqlCdcExtractor

        return MysqlCdcExtractor(self.settings, workunit, context)


def _row_bytes(conn: Any, database: str, name: str) -> int:
    """The table's average row length (information_schema.tables, an estimate the engine keeps)."""
    rows = query(conn, "SELECT avg_row_length FROM information_schema.tables WHERE table_schema = %s AND table_name = %s",
                 (database, name))
    return int(rows[0][0] or 0) if rows else 0


def _binlog_bytes(logs: list[tuple[str, int]], low: int, end: position.Position) -> int:
    """The binlog bytes between a position and the end: the rest of its file, the files between, the end's part."""
    start = position.of_value(low, end.base, end.width)
    total = 0
    for file, size in logs:
        number = position.parse(file, 0).number
        if start.number <= number <= end.number:
            total += (end.offset if number == end.number else size) - (start.offset if number == start.number else 0)
    return max(0, total)


def _columns_changed(table: str, kept: Any, now: list[Any]) -> str | None:
    """The DDL since the table's last commit (a column added, dropped or retyped), with the re-snapshot; None if none."""
    if not isinstance(kept, list):
        return None
    before = {str(n): str(t) for n, t in kept}
    after = {c.name: c.declared for c in now}
    found = [f"column {n} added ({t})" for n, t in after.items() if n not in before]
    found += [f"column {n} dropped" for n in before if n not in after]
    found += [f"column {n} changed type from {before[n]} to {t}" for n, t in after.items() if n in before and before[n] != t]
    if not found and list(before) != list(after):
        found = ["its columns were reordered"]
    if not found:
        return None
    return (f"table {table} changed since its last commit (ALTER TABLE: {'; '.join(found)}): its binlog changes after "
            "the ALTER have other columns, and its rows may have new values no change record carries (a column added "
            "with a default). Nothing of it was read. Snapshot it again: "
            f"{reset_hint([table])}, then run (an upsert table: its rows are replaced by the snapshot)")
