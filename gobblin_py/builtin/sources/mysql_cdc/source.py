"""The `mysql_cdc` source: MySQL/MariaDB change data capture from the binlog (row-based, read with mysql-replication);
each listed table (`database.table`) is a dataset of change records, kept equal by key by an upsert publisher.

Positions. A table's watermark (key `binlog`) is a binlog position P (`position.py`) meaning "every transaction whose
commit ends at or before P is in". A run plans one end E for all tables, the binlog's end (`SHOW MASTER STATUS`): each
table's WorkUnit covers the transactions committing in (P, E], read by its own task from the binlog (a binlog is read
by many clients at once, unlike a PostgreSQL slot, so the tables' tasks run in parallel; nothing upstream moves, so a
crash anywhere before the commit reads the same range again). A transaction is wholly in one range.

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
from typing import Any

from gobblin_py.api import Extractor, MultiWorkUnit, Source, SourceState, TaskContext, WorkUnit
from gobblin_py.api.names import workunit_id
from gobblin_py.api.types import SchemaKind
from gobblin_py.builtin.schemas.postgres_columns import avro_schema, check_mapped
from gobblin_py.builtin.sources.jdbc.mysql_columns import read_columns
from gobblin_py.builtin.sources.mysql_cdc import position, server
from gobblin_py.builtin.sources.mysql_cdc.settings import MysqlCdcSettings, connect, query
from gobblin_py.builtin.sources.mysql_cdc.split import MysqlCdcSplit
from gobblin_py.errors import ConfigError, GobblinError, SourceError, describe

log = logging.getLogger(__name__)

WATERMARK_KEY = "binlog"
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


def reset_hint(tables: list[str]) -> str:
    return "; ".join(f"`gobblin-py state reset JOB.yaml --dataset {t} --yes`" for t in tables)


class MysqlCdcSource(Source):
    """The listed tables as change records read from the binlog, each table's position committed with its data."""

    Settings = MysqlCdcSettings
    split_type = MysqlCdcSplit
    change_markers = {"delete": ("_op", "delete"), "truncate": ("_op", "truncate")}

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
        units: list[WorkUnit | MultiWorkUnit] = []
        for table in s.tables:
            database, name = table.split(".")
            columns, key = self._table(conn, table, database, name)
            low = state.watermarks(table).get(WATERMARK_KEY)
            if low is not None:
                kept = state.kept(table)
                server.check_identity(table, kept.get("server"), identity, s.endpoint, reset_hint([table]))
                server.check_history(conn, table, int(low), end, s.endpoint, reset_hint([table]))
                problem = _columns_changed(table, kept.get("columns"), columns)
                if problem is not None:
                    state.report_input_problem(table, problem)
                    continue
            units.append(self._workunit(table, database, name, columns, key, low, end, identity))
        log.info("binlog at %s: reading %d table(s) (%d snapshotted)", end, len(units),
                 sum(1 for u in units if MysqlCdcSplit.of(u).snapshot))
        return units

    def _table(self, conn: Any, table: str, database: str, name: str) -> tuple[list[Any], list[str]]:
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
        return columns, key

    def _workunit(self, table: str, database: str, name: str, columns: list[Any], key: list[str], low: Any,
                  end: position.Position, identity: dict[str, Any]) -> WorkUnit:
        s: MysqlCdcSettings = self.settings
        names = [c.name for c in columns]
        schema = avro_schema(table, [dataclasses.replace(c, not_null=False) for c in columns],
                             namespace="gobblin_py.mysql_cdc")
        schema["fields"] += META_FIELDS
        snapshot = low is None
        start = end.value() if snapshot else int(low)
        stop = max(end.value(), start)
        types = [[c.name, c.declared] for c in columns]
        wu_id = workunit_id(f"{table}.{start}-{stop}", "mysql_cdc", s.endpoint, table, str(types), str(start),
                            str(stop), str(snapshot), str(identity))
        split = MysqlCdcSplit(table=table, database=database, table_name=name, columns=names,
                              casts={c.name: c.cast for c in columns if c.cast}, key=key,
                              integer_key=all(c.type_name in INTEGERS for c in columns if c.name in key),
                              avro_schema=schema, low=start, end=stop, base=end.base, width=end.width, snapshot=snapshot)
        return WorkUnit(id=wu_id, dataset=table, watermark_key=WATERMARK_KEY, low_watermark=start,
                        expected_high_watermark=stop, split=split.packed(),
                        props={"state.columns": types, "state.key": key, "state.server": identity})

    def get_extractor(self, workunit: WorkUnit, context: TaskContext) -> Extractor:
        from gobblin_py.builtin.sources.mysql_cdc.extractor import MysqlCdcExtractor

        return MysqlCdcExtractor(self.settings, workunit, context)


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
