"""The `postgres_cdc` source: PostgreSQL log-based change data capture through a logical replication slot (the built-in
`pgoutput` plugin) and a publication; each published table is a dataset (`schema.table`) of change records.

Positions. A table's watermark (key `lsn`) is an LSN L meaning "every transaction whose commit record lies before L
is in". A run plans one end T for all tables: it commits a transaction synchronously (holding only a logical message,
which pgoutput leaves out: a transaction that writes no WAL is not flushed), so every commit that returned before
planning is flushed, whatever `synchronous_commit` the writers use, and takes
`pg_current_wal_flush_lsn()`. Each table's WorkUnit covers the transactions committing in [L, T); its extractor reads
them with `pg_logical_slot_peek_binary_changes(slot, T, …)` (peek: nothing is consumed) and keeps those of its table
whose commit LSN is in [L, T): a transaction is wholly in one range, never split across two commits. The slot moves
(`pg_replication_slot_advance`) only in the commit, after the watermarks (`slot.py`), to the lowest committed
watermark of all tables; so a crash anywhere before replays exactly the uncommitted changes, still in the slot.

One task. A logical slot serves one session at a time, so every table's WorkUnit goes into ONE MultiWorkUnit (its
WorkUnits run one after another in one task); every table of the publication gets one every run, even one without
changes: its watermark must still move, or the slot could never advance past it.

First run, and a table added or reset: a table with no committed watermark is snapshotted first (`_op: read` rows),
then its changes follow. The snapshot is a REPEATABLE READ transaction taken when the task runs (not a snapshot
exported by the slot's creation: that one lives only while the creating replication connection stays open, across
planning and the task). Exactness across the hand-off comes from the snapshot itself: its `pg_current_snapshot()`
says which transactions it sees, and the changes that follow are those committing at or after the slot's position
that it does not see. (A transaction whose commit record lies before the slot's position yet was still running when
the snapshot was taken, held between its commit record and its end by a synchronous standby across the whole time
since the slot got there, would be in neither; with no synchronous standby it cannot happen.) With
`snapshot_chunk_rows`, a table is snapshotted in chunks instead, each a WorkUnit of its own outside the MultiWorkUnit,
over several runs while its changes stream through a per-key filter (`chunks.py` explains it; `chunk_plan.py` plans it).

Checks before anything runs: `wal_level` is logical; the user may replicate (REPLICATION or superuser); the publication
exists (or is created, `create_publication`) and holds the listed tables; the slot exists with plugin pgoutput in this
database (or is created, `create_slot`), is not invalidated (`wal_status` lost, `conflicting`), and is not past any
table's committed watermark (a slot dropped and re-created, or advanced by another consumer: the changes in between
are gone; the run fails naming the slot, the tables and the range, and how to snapshot them again). Each table's
columns are recorded with its commit (`state.columns`) and compared (a notice names a change); so is its shape
(`state.shape`, `columns.py`): a table whose existing rows may have changed without a change in the WAL (a column
added with a DEFAULT, a rewrite by ALTER COLUMN … TYPE) fails alone until it is snapshotted again. The slot's name is
recorded too (`state.slot`), and a table committed from another slot is refused.

The publication (`publication.py`): pgoutput decodes a change only as the publication was at the change's WAL
position, so what it left out is lost for good. A publication that does not publish insert, update, delete and
truncate, or a table with a row filter or a column list, is refused before anything runs. Each table's commit records
the publication's identity (`state.publication`: its oid, its row's xmin, its flags, the table's membership rows); a
table whose membership rows are all new (it left and was added back), or whose publication was altered or created
again since, fails alone (an input problem; the slot is held at its position) until it is snapshotted again. A
committed table no longer published is named each run until its state is dropped. The publication is read again after
the run's end is taken: an ALTER meanwhile fails the run (what is recorded is what the range was decoded under).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from gobblin_py.api import CommitStep, Extractor, MultiWorkUnit, Source, SourceState, TaskContext, WorkUnit
from gobblin_py.api.lag import DatasetLag, unmeasured
from gobblin_py.api.names import workunit_id
from gobblin_py.api.types import SchemaKind, WatermarkValue
from gobblin_py.builtin.schemas.postgres_columns import Column, avro_schema, check_mapped, read_columns_of
from gobblin_py.builtin.sources.postgres_cdc.chunk_plan import plan_chunks
from gobblin_py.builtin.sources.postgres_cdc.columns import primary_keys, read_shapes, silent_changes
from gobblin_py.builtin.sources.postgres_cdc.decode import route
from gobblin_py.builtin.sources.postgres_cdc.publication import (
    Publication,
    check_publishes_everything,
    membership_problem,
    read_publication,
)
from gobblin_py.builtin.sources.postgres_cdc.settings import (
    PostgresCdcSettings,
    connect,
    flushed_after_sync_commit,
    lsn_int,
    lsn_text,
    open_source,
)
from gobblin_py.builtin.sources.postgres_cdc.slot import WATERMARK_KEY, SlotAdvanceStep, slot_row
from gobblin_py.builtin.sources.postgres_cdc.split import CdcSplit
from gobblin_py.errors import CommitError, ConfigError, GobblinError, SourceError, describe

log = logging.getLogger(__name__)

META_FIELDS: list[dict[str, Any]] = [
    {"name": "_op", "type": "string", "doc": "read (snapshot), insert, update, delete or truncate"},
    {"name": "_lsn", "type": "long", "doc": "the commit LSN of the change's transaction (a snapshot: the slot's position - 1)"},
    {"name": "_seq", "type": "long", "doc": "the change's place in its transaction: (_lsn, _seq) orders the changes"},
    {"name": "_commit_ts", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}], "default": None,
     "doc": "when the transaction committed (null for snapshot rows)"},
    {"name": "_xid", "type": ["null", "long"], "default": None, "doc": "the transaction's id (null for snapshot rows)"},
]
"""Fields every change record has after the table's columns."""

REMEDIES = ("leave the table out of the publication, or rename the column",
            "leave the table out of the publication, or change the column's type")

BASE_TYPES_SQL = """
SELECT a.attrelid, a.atttypid, a.atttypmod, CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE a.atttypid END
FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
WHERE a.attrelid = ANY(%s::oid[]) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attrelid, a.attnum
"""

TABLES_SQL = """
SELECT n.nspname, c.relname, c.oid, c.relreplident, pg_table_size(c.oid) FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN unnest(%s::text[], %s::text[]) AS t(nspname, relname) ON t.nspname = n.nspname AND t.relname = c.relname
"""


@dataclass(frozen=True)
class TablePlan:
    dataset: str  # schema.table
    schema_name: str
    table_name: str
    oid: int
    columns: list[Column]
    types: list[list[int]]  # per column: [declared type oid, typmod, base type oid]
    replica_identity: str
    table_bytes: int = 0  # pg_table_size: what a snapshot reads
    shape: dict[str, Any] | None = None  # its relfilenode and columns (`columns.py`), kept with the commit
    primary: list[str] | None = None  # its primary key's columns (empty: none)


def _identity_is_the_primary_key(conn: Any, dataset: str, oid: int) -> None:
    """ConfigError for REPLICA IDENTITY USING INDEX on an index other than the table's primary key: pgoutput then sends
    an update without the old primary key, so a key update could not be known (the extractor fails at the first
    one; refused here before anything runs)."""
    rows = conn.execute("SELECT i.indexrelid::regclass::text, i.indisprimary, i.indisreplident FROM pg_index i "
                        "WHERE i.indrelid = %s AND (i.indisprimary OR i.indisreplident)", (oid,)).fetchall()
    primary = [name for name, is_primary, _ in rows if is_primary]
    identity = [name for name, _, is_identity in rows if is_identity]
    if primary and identity and identity != primary:
        raise ConfigError(f"table {dataset} has REPLICA IDENTITY USING INDEX {identity[0]}, not its primary key "
                          f"{primary[0]}: pgoutput sends an update without the old primary key, so an update that "
                          f"changes the key could not be known (a consumer kept by key would keep the old row). "
                          f"ALTER TABLE {dataset} REPLICA IDENTITY DEFAULT (or FULL, or USING INDEX {primary[0]}); "
                          "a table already committed is then snapshotted again: "
                          f"`gobblin-py state reset JOB.yaml --dataset {dataset} --yes`")


def reset_hint(job_tables: list[str]) -> str:
    return "; ".join(f"`gobblin-py state reset JOB.yaml --dataset {t} --yes`" for t in job_tables)


class PostgresCdcSource(Source):
    """Every table of a publication as change records read from a logical replication slot (pgoutput), the slot's
    position committed with the data and released only after the commit."""

    Settings = PostgresCdcSettings
    step_types = (SlotAdvanceStep,)
    split_type = CdcSplit
    change_markers = {"delete": ("_op", "delete"), "truncate": ("_op", "truncate")}
    whole_datasets = True  # a reset table's chunks follow the truncate its stream carries in their first run

    @classmethod
    def schema_kind(cls, settings: PostgresCdcSettings) -> SchemaKind:
        return SchemaKind.AVRO

    def endpoints(self, workunit: WorkUnit) -> list[str]:
        return [self.settings.endpoint]

    def get_workunits(self, state: SourceState) -> list[WorkUnit | MultiWorkUnit]:
        s: PostgresCdcSettings = self.settings
        conn = open_source(s)
        try:
            return self._plan(conn, state)
        except GobblinError:
            raise
        except Exception as exc:
            import psycopg

            if isinstance(exc, psycopg.Error):
                raise SourceError(f"{s.endpoint}, slot {s.slot}: planning failed: {describe(exc)}") from None
            raise
        finally:
            conn.close()

    def _plan(self, conn: Any, state: SourceState) -> list[WorkUnit | MultiWorkUnit]:
        s: PostgresCdcSettings = self.settings
        self._check_server(conn)
        tables = self._publication(conn)
        plans = self._tables(conn, tables)
        pub = self._read_publication(conn, plans)
        check_publishes_everything(pub, s.endpoint, {p.oid: p.dataset for p in plans})
        committed = {p.dataset: _committed(state, p.dataset) for p in plans}
        system = _system_identifier(conn)
        for p in plans:
            if committed[p.dataset] is not None:
                self._check_identity(p, state, system)
        problems = {p.dataset: why for p in plans if committed[p.dataset] is not None
                    and (why := membership_problem(p.dataset, state.kept(p.dataset).get("publication"),
                                                   pub.identity(p.oid), s.slot)
                         or _rows_changed_silently(p, state.kept(p.dataset).get("shape"))) is not None}
        self._report_left(state, {p.dataset for p in plans})
        slot = self._slot(conn, {d: None if d in problems else lsn for d, lsn in committed.items()})
        position = lsn_int(slot["confirmed_flush_lsn"])
        end = self._end(conn, position)
        self._check_unchanged(pub, self._read_publication(conn, plans), plans)
        units, chunks = [], []
        for p in plans:
            low = committed[p.dataset]
            if p.dataset in problems:  # left out, yet kept in `tables`: the slot stays at its position
                state.report_input_problem(p.dataset, problems[p.dataset])
                continue
            self._report_column_changes(p, state)
            unit = self._workunit(p, low if low is not None else position, max(end, low or 0), low is None,
                                  [q.dataset for q in plans], system, pub)
            if s.snapshot_chunk_rows is not None:  # a snapshot in chunks, each a task of its own (`chunks.py`)
                unit, more = plan_chunks(s, conn, state, unit, end, low, p.table_bytes)
                chunks += more
            units.append(unit)
        log.info("slot %s at %s: reading %d table(s) up to %s (%d snapshotted)", s.slot, lsn_text(position), len(units),
                 lsn_text(end), sum(1 for u in units if CdcSplit.of(u).snapshot))
        if not units:
            return []
        units = route(units, end)
        mwu = MultiWorkUnit(workunit_id(f"cdc.{s.slot}", "postgres_cdc", s.endpoint, s.database, s.slot, str(end),
                                        *sorted(u.id for u in units)), tuple(units))
        return [mwu, *chunks]

    def _check_identity(self, p: TablePlan, state: SourceState, system: str | None) -> None:
        """What the table's committed position was taken from is what this run reads: the same slot, the same
        PostgreSQL cluster (its system identifier: LSNs of a restored or other server mean nothing against it), the same
        table (its relation oid: a table dropped and created again lost rows that no change will ever delete). A
        difference fails closed, naming both and the re-snapshot; a state from before a value was kept is not checked."""
        s: PostgresCdcSettings = self.settings
        kept = state.kept(p.dataset)
        slot = kept.get("slot") if isinstance(kept.get("slot"), dict) else {}
        if slot.get("name") not in (None, s.slot):
            raise ConfigError(f"table {p.dataset} was committed from replication slot {slot.get('name')!r}, and the job "
                              f"now reads slot {s.slot!r}: its committed position means nothing in another slot. "
                              f"Snapshot it again from this slot: {reset_hint([p.dataset])}")
        if system is not None and slot.get("system") not in (None, system):
            raise SourceError(f"table {p.dataset} was committed from PostgreSQL cluster {slot.get('system')} (its system "
                              f"identifier), and {s.endpoint} is now cluster {system} (restored from a backup, or another "
                              "server): its LSNs mean nothing against the committed position, so changes could be missed "
                              f"or read twice. Snapshot the table again from this server: {reset_hint([p.dataset])}")
        oid = kept.get("oid")
        if isinstance(oid, int) and oid != p.oid:
            raise SourceError(f"table {p.dataset} was dropped and created again since its last commit (relation oid "
                              f"{oid}, now {p.oid}): the rows of the old table are still in the output, and no change will "
                              f"ever delete them. Snapshot the table again: {reset_hint([p.dataset])}, then run (an "
                              "upsert table: drop it or delete its rows first, or the old rows stay)")

    def _read_publication(self, conn: Any, plans: list[TablePlan]) -> Publication:
        """The publication's flags and the planned tables' membership rows (see `publication.py`)."""
        pub = read_publication(conn, self.settings.publication, [p.oid for p in plans])
        if pub is None:
            raise SourceError(f"{self.settings.endpoint}: publication {self.settings.publication!r} was dropped while "
                              "this run planned; nothing ran")
        return pub

    def _check_unchanged(self, before: Publication, after: Publication, plans: list[TablePlan]) -> None:
        """The publication read before and after the run's end was taken is the same: so what is recorded with the
        commit is what the range [low, end) was decoded under (an ALTER in between would go unseen by the next run)."""
        changed = [p.dataset for p in plans if before.identity(p.oid) != after.identity(p.oid)]
        if changed:
            raise SourceError(f"publication {before.name!r} was altered while this run planned (for "
                              f"{', '.join(changed)}); nothing ran: run again")

    def _report_left(self, state: SourceState, planned: set[str]) -> None:
        """A committed table no longer in the publication (removed, or dropped) is named: its changes after its last
        commit are not read, its rows stay in the output; the operator drops its state to say so (with `tables` set,
        the publication was already refused)."""
        s: PostgresCdcSettings = self.settings
        for dataset in state.datasets():
            if dataset not in planned and _committed(state, dataset) is not None:
                state.report_input_problem(dataset, f"table {dataset} is no longer in publication {s.publication!r} "
                                           "(removed from it, or dropped): its changes after its last commit are not "
                                           "read, and its rows stay in the output. If it left on purpose, drop its "
                                           f"state: {reset_hint([dataset])}; to capture it again, add it back "
                                           f"(ALTER PUBLICATION {s.publication} ADD TABLE {dataset}) and reset it")

    def _check_server(self, conn: Any) -> None:
        """wal_level logical, and a user who may replicate: a clear error before anything runs."""
        s: PostgresCdcSettings = self.settings
        level = conn.execute("SHOW wal_level").fetchone()[0]
        if level != "logical":
            raise ConfigError(f"{s.endpoint}: wal_level is {level!r}, and change data capture needs 'logical': set "
                              "wal_level = logical in postgresql.conf (or ALTER SYSTEM SET wal_level = logical) and "
                              "restart the server")
        user, may = conn.execute("SELECT current_user, rolreplication OR rolsuper FROM pg_roles "
                                 "WHERE rolname = current_user").fetchone()
        if not may:
            raise ConfigError(f"{s.endpoint}: user {user!r} may not use replication slots: ALTER ROLE {user} REPLICATION "
                              "(or use a user that has it)")

    def _publication(self, conn: Any) -> list[tuple[str, str]]:
        """The publication's tables (created first when missing and allowed); the listed tables must be exactly them."""
        from psycopg import sql

        s: PostgresCdcSettings = self.settings
        exists = conn.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", (s.publication,)).fetchone()
        if exists is None:
            if not s.create_publication:
                raise ConfigError(f"{s.endpoint}: publication {s.publication!r} does not exist in database {s.database}: "
                                  f"create it (CREATE PUBLICATION {s.publication} FOR TABLE …), or set "
                                  "create_publication: true with the tables")
            names = [sql.Identifier(*t.split(".")) for t in s.tables or []]
            try:
                conn.execute(sql.SQL("CREATE PUBLICATION {} FOR TABLE {}").format(
                    sql.Identifier(s.publication), sql.SQL(", ").join(names)))
            except Exception as exc:
                raise ConfigError(f"{s.endpoint}: cannot create publication {s.publication!r}: {describe(exc)}") from None
            log.info("created publication %s for %s", s.publication, ", ".join(s.tables or []))
        found = [(a, b) for a, b in conn.execute(
            "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s ORDER BY 1, 2", (s.publication,))]
        if not found:
            raise ConfigError(f"{s.endpoint}: publication {s.publication!r} publishes no table")
        if s.tables is not None:
            have, want = {f"{a}.{b}" for a, b in found}, set(s.tables)
            if have != want:
                diff = [f"{', '.join(sorted(want - have))} listed but not published" if want - have else "",
                        f"{', '.join(sorted(have - want))} published but not listed" if have - want else ""]
                raise ConfigError(f"publication {s.publication!r} does not hold exactly source.tables: "
                                  f"{'; '.join(d for d in diff if d)} (ALTER PUBLICATION … ADD/DROP TABLE, or fix tables)")
        return found

    def _tables(self, conn: Any, tables: list[tuple[str, str]]) -> list[TablePlan]:
        """Each published table's plan: its oid, replica identity, size, columns, their base types and its shape, in
        one catalog query each for all tables (not four a table: a 50-table job planned in 4 round trips, issue 45)."""
        found = {(r[0], r[1]): r[2:] for r in conn.execute(TABLES_SQL, ([t[0] for t in tables], [t[1] for t in tables]))}
        missing = [f"{schema_name}.{table_name}" for schema_name, table_name in tables if (schema_name, table_name) not in found]
        if missing:
            raise SourceError(f"{self.settings.endpoint}: table(s) {', '.join(missing)} of publication "
                              f"{self.settings.publication!r} were dropped while this run planned; run again")
        oids = [int(found[t][0]) for t in tables]
        columns = read_columns_of(conn, oids)
        types: dict[int, list[list[int]]] = {oid: [] for oid in oids}
        for oid, t, m, b in conn.execute(BASE_TYPES_SQL, (oids,)):
            types[int(oid)].append([int(t), int(m), int(b)])
        shapes, keys = read_shapes(conn, oids), primary_keys(conn, oids)
        plans = []
        for (schema_name, table_name), oid in zip(tables, oids):
            dataset, (_, identity, size) = f"{schema_name}.{table_name}", found[(schema_name, table_name)]
            if identity == "i":
                _identity_is_the_primary_key(conn, dataset, oid)
            mapped = [Column(c.name, False, c.type_name, c.declared, c.avro, c.cast) for c in columns[oid]]
            check_mapped(dataset, mapped, REMEDIES)
            plans.append(TablePlan(dataset, schema_name, table_name, oid, mapped, types[oid], str(identity),
                                   int(size or 0), shapes[oid], keys[oid]))
        return plans

    def _slot(self, conn: Any, committed: dict[str, int | None]) -> dict[str, Any]:
        """The slot (created when missing and allowed), checked: pgoutput, this database, not invalidated, not past any
        table's committed position."""
        s: PostgresCdcSettings = self.settings
        row = slot_row(conn, s.slot)
        if row is None:
            if not s.create_slot:
                raise ConfigError(f"{s.endpoint}: replication slot {s.slot!r} does not exist: create it "
                                  f"(SELECT pg_create_logical_replication_slot('{s.slot}', 'pgoutput')), or set "
                                  "create_slot: true")
            created = conn.execute("SELECT lsn FROM pg_create_logical_replication_slot(%s, 'pgoutput')", (s.slot,)).fetchone()[0]
            log.info("created replication slot %s (pgoutput) at %s", s.slot, created)
            row = slot_row(conn, s.slot)
            assert row is not None
        if row.get("plugin") != "pgoutput" or row.get("slot_type") != "logical":
            raise ConfigError(f"replication slot {s.slot!r} is a {row.get('slot_type')} slot of plugin "
                              f"{row.get('plugin')!r}; this source reads a logical slot of plugin pgoutput: name another slot")
        if row.get("database") != s.database:
            raise ConfigError(f"replication slot {s.slot!r} belongs to database {row.get('database')!r}, not "
                              f"{s.database!r}: name a slot of this database")
        mine = sorted(d for d, lsn in committed.items() if lsn is not None)
        low = min((committed[d] for d in mine), default=None)
        lost_from = lsn_text(low) if low is not None else "the committed positions"
        if row.get("wal_status") == "lost" or row.get("conflicting") or row.get("confirmed_flush_lsn") is None:
            why = "its WAL was removed (max_slot_wal_keep_size)" if row.get("wal_status") == "lost" else "it was invalidated"
            raise SourceError(f"replication slot {s.slot!r} can no longer be read: {why}, so the changes from "
                              f"{lost_from} on are gone. Drop the slot (SELECT pg_drop_replication_slot('{s.slot}')) and "
                              f"snapshot the tables again: {reset_hint(mine) or 'the next run snapshots them'}")
        position = lsn_int(row["confirmed_flush_lsn"])
        behind = [d for d in mine if committed[d] is not None and committed[d] < position]  # type: ignore[operator]
        if behind:
            raise SourceError(f"replication slot {s.slot!r} is at {lsn_text(position)}, past the committed position of "
                              f"table(s) {', '.join(f'{d} ({lsn_text(committed[d])})' for d in behind)}: the changes "  # type: ignore[arg-type]
                              f"committed from {lsn_text(min(committed[d] for d in behind))} to {lsn_text(position)} "  # type: ignore[type-var]
                              "are no longer in the slot (it was dropped and re-created, or advanced by another "
                              f"consumer). Snapshot the table(s) again: {reset_hint(behind)}, then run")
        return row

    def _end(self, conn: Any, position: int) -> int:
        """This run's end T: the flushed WAL once a transaction has committed synchronously (every commit that
        returned before is in); with `max_changes`, moved back to just past the commit of the transaction that reaches it."""
        s: PostgresCdcSettings = self.settings
        end = flushed_after_sync_commit(conn)
        if s.max_changes is None or end <= position:
            return end
        from gobblin_py.builtin.sources.postgres_cdc.pgoutput import Commit, decode

        last, rows = None, 0
        for (data,) in conn.execute("SELECT data FROM pg_logical_slot_peek_binary_changes(%s, %s::pg_lsn, %s, "
                                    "'proto_version', '1', 'publication_names', %s)",
                                    (s.slot, lsn_text(end), s.max_changes, s.publication)):
            rows += 1
            if data[:1] == b"C":
                last = decode(bytes(data))
        if rows >= s.max_changes and isinstance(last, Commit):
            log.info("max_changes %d: this run reads up to %s", s.max_changes, lsn_text(last.commit_lsn + 1))
            return last.commit_lsn + 1
        return end

    @staticmethod
    def _report_column_changes(p: TablePlan, state: SourceState) -> None:
        before = state.kept(p.dataset).get("columns")
        if not isinstance(before, list):
            return
        now = [c.name for c in p.columns]
        added, dropped = [c for c in now if c not in before], [c for c in before if c not in now]
        if added or dropped:
            state.report_notice(p.dataset, f"columns of {p.dataset} changed since the last run: "
                                + "; ".join(x for x in (f"added {', '.join(added)}" if added else "",
                                                        f"dropped {', '.join(dropped)}" if dropped else "") if x))

    def _workunit(self, p: TablePlan, low: int, end: int, snapshot: bool, tables: list[str], system: str | None,
                  pub: Publication) -> WorkUnit:
        s: PostgresCdcSettings = self.settings
        names = [c.name for c in p.columns]
        schema = avro_schema(p.dataset, [Column(c.name, False, c.type_name, c.declared, c.avro, c.cast) for c in p.columns],
                             namespace="gobblin_py.postgres_cdc")
        schema["fields"] += META_FIELDS
        wu_id = workunit_id(f"{p.dataset}.{low}-{end}", "postgres_cdc", s.endpoint, s.database, s.slot, s.publication,
                            p.dataset, ",".join(names), str(p.types), str(low), str(end), str(snapshot))
        return WorkUnit(id=wu_id, dataset=p.dataset, watermark_key=WATERMARK_KEY, low_watermark=low,
                        expected_high_watermark=end,
                        split=CdcSplit(table=p.dataset, schema_name=p.schema_name, table_name=p.table_name, oid=p.oid,
                                       columns=names, types=p.types, primary=p.primary, casts={c.name: c.cast for c in p.columns if c.cast},
                                       avro_schema=schema, low=low, end=end, snapshot=snapshot,
                                       snapshot_bytes=p.table_bytes if snapshot else 0, wal_bytes=max(0, end - low),
                                       tables=tables).packed(),
                        props={"state.columns": names, "state.oid": p.oid, "state.publication": pub.identity(p.oid),
                               "state.shape": p.shape,
                               "state.slot": {"name": s.slot, "database": s.database, **({"system": system} if system else {})}})

    def backlog(self, state: SourceState, timeout_s: float) -> list[DatasetLag]:
        """Per table, the WAL bytes between its committed LSN and `pg_current_wal_lsn()`: an upper bound of its changes
        not yet committed (the WAL holds every table's writes; the changes themselves are not decoded: that would be
        reading them). A slot that is gone, invalidated or past the committed position is an error per table."""
        s: PostgresCdcSettings = self.settings
        conn = connect(s.url, s.password_env, max(1, int(timeout_s)), max(1, int(timeout_s * 1000)))
        try:
            tables = sorted({f"{a}.{b}" for a, b in conn.execute(
                "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s", (s.publication,))}
                | set(s.tables or []) | set(state.datasets()))
            row = slot_row(conn, s.slot)
            current = lsn_int(conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0])
        finally:
            conn.close()
        problem = None
        if row is None:
            problem = f"replication slot {s.slot!r} does not exist on {s.endpoint}"
        elif row.get("wal_status") == "lost" or row.get("conflicting") or row.get("confirmed_flush_lsn") is None:
            problem = f"replication slot {s.slot!r} can no longer be read (its WAL was removed, or it was invalidated)"
        out = []
        for table in tables:
            low = _committed(state, table)
            kept = state.kept(table).get("slot")
            if problem is not None and (low is not None or row is not None):
                out.append(unmeasured(table, problem, "changes"))
            elif low is not None and isinstance(kept, dict) and kept.get("name") != s.slot:
                out.append(unmeasured(table, f"committed from replication slot {kept.get('name')!r}, not {s.slot!r}",
                                      "changes"))
            elif low is not None and row is not None and lsn_int(row["confirmed_flush_lsn"]) > low:
                out.append(unmeasured(table, f"replication slot {s.slot!r} is past the committed position {lsn_text(low)}: "
                                      "changes were lost (see the next run's error)", "changes"))
            else:  # never committed: the whole table waits for its snapshot, its size unknown here
                out.append(DatasetLag(table, unit="changes", bytes=None if low is None else max(0, current - low)))
        return out

    def commit_steps(self, dataset: str, workunits: list[WorkUnit], watermarks: dict[str, WatermarkValue],
                     state_dir: str) -> list[CommitStep]:
        """After the table's watermark: advance the slot to the lowest committed position of all the run's tables.
        Refused (CommitError) when the commit would move the table's position back from where the run found it: the
        slot steps of a lease epoch rely on positions only rising (`slot.py`)."""
        s: PostgresCdcSettings = self.settings
        new = watermarks.get(WATERMARK_KEY)
        for wu in workunits:
            if wu.watermark_key == WATERMARK_KEY and new is not None and int(new) < int(wu.low_watermark):
                raise CommitError(f"table {dataset}: this run would move its committed position back, from "
                                  f"{lsn_text(int(wu.low_watermark))} to {lsn_text(int(new))}; nothing is committed "
                                  "(a defect: please report it with `gobblin-py inspect-commits`)")
        tables = sorted({t for wu in workunits for t in CdcSplit.of(wu).tables} | {dataset})
        return [SlotAdvanceStep(url=s.url, password_env=s.password_env, slot=s.slot, state_dir=state_dir, datasets=tables,
                                dataset=dataset, connect_timeout_s=s.connect_timeout_s, busy_wait_s=s.busy_wait_s)]

    def estimated_bytes(self, workunit: WorkUnit, state: SourceState) -> float:
        """The table's size when it is snapshotted, plus the WAL of the range its changes are decoded from (decoded
        once for the run's tables without a snapshot, each reading its own share: `decode.py`)."""
        split = CdcSplit.of(workunit)
        return float(split.snapshot_bytes + split.wal_bytes)

    def native_share(self, workunit: WorkUnit, converted: bool) -> float:
        """On the columnar path a snapshot is read by ADBC and written as Arrow, outside Python's lock (as the jdbc
        source's native reads, 0.95 of it); the WAL is decoded in Python."""
        from gobblin_py.builtin.sources.postgres_cdc import native

        split = CdcSplit.of(workunit)
        snapshot, wal = float(split.snapshot_bytes), float(split.wal_bytes)
        if converted or not snapshot or not native.installed():
            return 0.0
        return 0.95 * snapshot / (snapshot + wal)

    def get_extractor(self, workunit: WorkUnit, context: TaskContext) -> Extractor:
        from gobblin_py.builtin.sources.postgres_cdc.extractor import PostgresCdcExtractor

        return PostgresCdcExtractor(self.settings, workunit, context)


def _rows_changed_silently(p: TablePlan, kept: Any) -> str | None:
    """Why the table's existing rows may have changed without a change in the WAL since its last commit (its recorded
    shape against now: `columns.py`), with the re-snapshot; None when they cannot have."""
    found = silent_changes(kept, p.shape) if p.shape is not None else []
    if not found:
        return None
    return (f"table {p.dataset}: {'; '.join(found)}. No change record carries those values, so the output would keep "
            f"the old ones. Nothing of it was read. Snapshot it again: {reset_hint([p.dataset])}, then run (an upsert "
            "table: its rows are replaced by the snapshot)")


def _system_identifier(conn: Any) -> str | None:
    """The cluster's system identifier (pg_control_system(); None where the user may not call it: then unchecked)."""
    import psycopg

    try:
        return str(conn.execute("SELECT system_identifier::text FROM pg_control_system()").fetchone()[0])
    except psycopg.errors.InsufficientPrivilege:
        return None


def _committed(state: SourceState, dataset: str) -> int | None:
    value = state.watermarks(dataset).get(WATERMARK_KEY)
    return int(value) if value is not None else None
