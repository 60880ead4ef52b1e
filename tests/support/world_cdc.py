"""The CDC world of the model-based test (see world.py, issue 42): a real PostgreSQL 16 with logical decoding (the
`pgserver` binaries, tests/cdc's server), a publication of two or three tables, and a postgres_cdc job publishing
each table to an upsert table of the history's sink (`sink`): an Iceberg table kept by key (`mode: upsert`, the
embedded pyiceberg SQL catalog; in a leased history pyiceberg's SQL catalog on a database of the same server, as
several hosts would share), as docs/sources/postgres_cdc.md shows it, or a Delta table kept by key (`table_uri:
<world>/lake/{dataset}`, docs/publishers/delta.md "Upsert mode"), read by delta-rs. The oracle, the runs and their
remedies, and the data rules both CDC worlds take are world_keyed.py's.

Its rules: DML transactions (inserts, updates, a key updated several times in one transaction, deletes, a key deleted
and inserted again, updates of `n` alone), a large transaction, TOAST-size text values (and later updates that leave
them unchanged), a transaction begun before a run and committed after it (`spanning`), primary-key updates
(`UPDATE t SET id = new WHERE id = old`, a key moved and moved back, a key moved and a row inserted at the old one),
TRUNCATE (alone, or between inserts in one transaction); runs of the real CLI in a child process, runs SIGKILLed at a
commit point (the Iceberg upsert's own among them, for an Iceberg sink) or at a random time, `recover`, `recover --abandon`, a `state
reset` the user asks for; the publication changed (publish flags narrowed, a row filter added, a table removed and
perhaps added back, a table added); DDL (a column added, with or without a DEFAULT, an added column dropped, `n`
retyped (to bigint, or rewritten by a USING expression), REPLICA IDENTITY FULL and back to DEFAULT); the slot dropped
and created again; a run under `commit_policy: successful` whose tasks of one table (or its chunks alone) fail
(`world_faults.py`).

The oracle: after every step no key is twice in any table of the sink; after every run that exits 0, every table
of a published table equals `SELECT * FROM` its source table by primary key (each key once, each column's value
equal; a column the table lacks reads NULL). A run that exits 1 or 2 must follow a change to the world that
docs/sources/postgres_cdc.md names ("Failure modes, and what to do") and must name the changed table, the
publication or the slot, and a remedy the page documents; the world then applies that remedy (`ALTER PUBLICATION …`,
`REPLICA IDENTITY FULL`, the slot's drop, then `state reset … --dataset schema.table` for each table named), and the
next run that exits 0 is held to the oracle again. At the end: every change undone that can be (a table out of the
publication stays out, its state dropped), recover, and runs (remedied as above) until one exits 0.

Chunked snapshots (`chunked`: drawn per seed by a generator of its own, or given): the job snapshots each table in
chunks of CHUNK_ROWS rows, CHUNKS_PER_RUN a run, so a table's snapshot spans several runs while its changes (and the
world's changes of every kind) go on; the oracle holds a table to its source once its snapshot has no chunk pending
(its state says so), and the final runs, with the bound per run raised in the job file (a large transaction makes
hundreds of chunks), go on until no table has one.

`DISABLED` names the rules off by default (weight 0, and a forced step of theirs taken as `dml`): none now. It held
the rules waiting for fixes of the product (the publication's flags, row filters and membership as an identity; a
primary-key update deleting the old key), and `add_column_default`, whose defect this world found: a column added with
a DEFAULT gave every existing row its value with no change in the WAL, the upsert table kept NULL there and the run
exited 0 (now each table's shape is an identity: tests/cdc/test_cdc_columns.py). A rule found defective again goes
back into KNOWN_DEFECTS until its fix lands; `scripts/soak_world.py --world cdc --cdc-enable all` draws them anyway."""

from __future__ import annotations

import os
import random
import re
import secrets
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gobblin_py.builtin.publishers.iceberg.first_snapshot import COPIED_POINT
from gobblin_py.builtin.publishers.iceberg.upsert import WRITTEN_POINT
from support.world import CRASH_POINTS, Rule, World
from support.world_faults import TaskFailures
from support.world_keyed import JOB_NAME, KeyedHistory, KeyedWorld

PASSWORD_ENV = "GOBBLIN_TEST_PG_PASSWORD"
LOGICAL = {"wal_level": "logical", "max_replication_slots": 40, "max_wal_senders": 40}
PUBLICATION = "pub"
FULL_PUBLISH = "insert, update, delete, truncate"
TOAST_CHARS = 12_000  # random hex: incompressible, so stored out of line (TOAST) above ~2 kB
LARGE_TXN_ROWS = 1_500
# Rules off by default (weight 0, a forced step of theirs taken as `dml`; the soak's --cdc-enable draws them): those
# waiting for a fix of the product (PENDING_FIXES), and those whose defect this world found (KNOWN_DEFECTS). Empty:
# the publication's identity (narrow_publish, row_filter, remove_table), key updates (key_update) and the table's shape
# (add_column_default, retype) are checked by postgres_cdc now.
PENDING_FIXES: frozenset[str] = frozenset()
KNOWN_DEFECTS: frozenset[str] = frozenset()
DISABLED: frozenset[str] = PENDING_FIXES | KNOWN_DEFECTS
# What a refusal must say to be a documented remedy (docs/sources/postgres_cdc.md, "Failure modes, and what to do").
REMEDIES = ("state reset", "ALTER PUBLICATION", "REPLICA IDENTITY", "pg_drop_replication_slot")
CHUNK_ROWS, CHUNKS_PER_RUN = 4, 2


@dataclass
class CdcWorld(KeyedWorld):
    """The database and what the model knows of it beyond the tables: the publication, the slot, REPLICA IDENTITY."""

    server: Any = None
    db: str = ""
    slot: str = ""
    full: set[str] = field(default_factory=set)           # tables with REPLICA IDENTITY FULL
    dropped_state: set[str] = field(default_factory=set)  # tables out of the publication whose state a reset dropped
    toasted: set[str] = field(default_factory=set)        # tables that held a TOASTed value since the last clean run


class CdcHistory(TaskFailures, KeyedHistory):
    """A history of a postgres_cdc → Iceberg (or Delta: `sink`) upsert job (see the module's docstring). `server` is a started
    tests/cdc-style LocalPostgres with wal_level=logical; each history has a database and a slot of its own."""

    kind = "cdc"
    leased_share = 0.5  # half the histories: two drivers of the work directory kept apart by the lease alone
    pause_weight = 1
    iceberg_points = (*CRASH_POINTS, WRITTEN_POINT, COPIED_POINT)  # the last: a first snapshot added as written

    def __init__(self, seed: int, steps: int, server: Any, include: tuple[str, ...] = (),
                 disabled: frozenset[str] = DISABLED, pauses: tuple[int, ...] = (), chunked: bool | None = None,
                 sink: str = "iceberg") -> None:
        super().__init__(seed, steps, include, pauses, sink)
        self.server, self.disabled = server, disabled
        # drawn by a generator of its own, so that a seed draws every other step as it did before
        self.chunked = random.Random(f"{seed}/chunked").random() < 0.5 if chunked is None else chunked
        self.chunks_per_run = CHUNKS_PER_RUN
        self.include = {k: "dml" if name in disabled else name for k, name in self.include.items()}
        self._world: CdcWorld | None = None

    # --- the world ----------------------------------------------------------------------------------------------

    def new_world(self, root: Path) -> World:
        from gobblin_py.demo.pg_server import PASSWORD

        os.environ[PASSWORD_ENV] = PASSWORD  # the CLI children inherit it
        root.mkdir(parents=True, exist_ok=True)
        db = self.server.create_database(f"w{self.seed % 10**8}_{uuid.uuid4().hex[:8]}")
        world = CdcWorld(root, server=self.server, db=db, slot=f"s_{db}", conn=self.server.connect(db))
        self._world = world
        if self.needs_catalog():
            self.shared_catalog(world, self.server, f"{db}_cat")
        tables = [f"public.t{k}" for k in range(self.rng.randint(2, 3))]
        for table in tables:
            self.create_table(world, table)
        world.sql(f"CREATE PUBLICATION {PUBLICATION} FOR TABLE {', '.join(tables)}")
        world.published = set(tables)
        world.log.append(f"0 database {db}: publication {PUBLICATION} of {', '.join(tables)} into {self.sink}"
                         + (f" (chunked snapshots: {CHUNK_ROWS} rows, {CHUNKS_PER_RUN} a run)" if self.chunked else ""))
        return world

    def create_table(self, world: CdcWorld, table: str) -> None:
        world.sql(f"CREATE TABLE {table} (id int PRIMARY KEY, v text, n int)")
        world.sql(f"INSERT INTO {table} SELECT i, 'v' || i, i FROM generate_series(1, %s::int) AS i", (self.rng.randint(5, 30),))
        world.columns[table] = ["id", "v", "n"]

    def job(self, world: World) -> dict[str, Any]:
        assert isinstance(world, CdcWorld)
        return {
            "job": {"name": "c", "work_dir": str(world.root / "work"), "max_task_retries": 0},
            "source": {"class": "postgres_cdc", "url": self.server.url(world.db), "password_env": PASSWORD_ENV,
                       "slot": world.slot, "publication": PUBLICATION, "busy_wait_s": 20,
                       **({"snapshot_chunk_rows": CHUNK_ROWS, "snapshot_chunks_per_run": self.chunks_per_run}
                          if self.chunked else {})},
            "writer": {"class": "parquet"},
            "publisher": self.publisher(world, ["_lsn", "_seq"]),
        }

    def rules(self) -> list[tuple[int, Rule]]:
        rules = [(6, self.dml), (1, self.large_transaction), (1, self.toast), (2, self.spanning), (1, self.key_update),
                 (1, self.truncate), (5, self.run_job), (3, self.run_killed_at_point), (1, self.run_killed_at_random),
                 (1, self.recover), (1, self.abandon), (1, self.state_reset), (1, self.narrow_publish),
                 (1, self.row_filter), (1, self.remove_table), (1, self.add_table), (1, self.add_column), (1, self.add_column_default),
                 (1, self.drop_column), (1, self.retype), (1, self.replica_identity), (1, self.recreate_slot),
                 (1, self.run_task_fails)]
        return [(0 if rule.__name__ in self.disabled else w, rule) for w, rule in rules]

    def run(self, root: Path) -> World:
        try:
            return super().run(root)
        finally:
            if self._world is not None:
                self.teardown(self._world)

    def teardown(self, world: CdcWorld) -> None:
        """Drop the history's slot and database (a slot keeps WAL for the whole server)."""
        with world.server.connect("postgres") as conn:
            for _ in range(50):
                try:
                    conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = %s",
                                 (world.db,))
                    break
                except Exception:  # still active: a killed run's session not yet gone
                    time.sleep(0.2)
            world.conn.close()
            for db in filter(None, (world.db, world.catalog_db)):
                conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')

    # --- what the shared CDC world asks -------------------------------------------------------------------------------

    def snapshotting(self, world: CdcWorld) -> set[str]:
        """The tables whose chunked snapshot has a chunk pending, as the committed state says (their output holds only
        the chunks read so far)."""
        from gobblin_py.state.store import StateStore

        if not self.chunked:
            return set()
        out = set()
        for dataset, state in StateStore(world.root / "work", JOB_NAME).dataset_states().items():
            kept = (state.get("source") or {}).get("chunked") if isinstance(state, dict) else None
            if isinstance(kept, list) and None in kept[1]["done"]:
                out.add(dataset)
        return out

    def may_fail(self, world: CdcWorld) -> list[str]:
        """What a run may fail on now: the changes since the last clean run, and a TOASTed value in a table without
        REPLICA IDENTITY FULL (an update that leaves it unchanged fails the table until FULL and a reset)."""
        toasted = sorted((world.toasted | set(self.toasted_now(world))) & (world.published - world.full))
        return world.disturbed + [f"TOASTed values in {t}" for t in toasted]

    @staticmethod
    def toasted_now(world: CdcWorld) -> list[str]:
        """The tables holding a TOASTed value now. (A value updated unchanged, then deleted before the run, still fails
        the run: `world.toasted` keeps the tables that held one since the last clean run, which the model missed until
        the soak found it: seed 2234450301.)"""
        return [t for t in sorted(world.published) if world.sql(f"SELECT 1 FROM {t} WHERE length(v) >= %s LIMIT 1",
                                                                (TOAST_CHARS,))]


    def cleaned(self, world: KeyedWorld) -> None:
        assert isinstance(world, CdcWorld)
        world.toasted = set(self.toasted_now(world))

    def names(self, world: KeyedWorld) -> list[str]:
        assert isinstance(world, CdcWorld)
        return [f"publication '{PUBLICATION}'", f"slot '{world.slot}'", f"slot {world.slot!r}"]

    def apply_remedies(self, world: KeyedWorld, said: str) -> list[str]:
        """The publication's flags or membership put back, REPLICA IDENTITY FULL, the slot dropped."""
        assert isinstance(world, CdcWorld)
        applied: list[str] = []
        if f"ALTER PUBLICATION {PUBLICATION} SET (publish = '{FULL_PUBLISH}')" in said:
            world.sql(f"ALTER PUBLICATION {PUBLICATION} SET (publish = '{FULL_PUBLISH}')")
            applied.append("publish every operation")
        for table in dict.fromkeys(re.findall(rf"ALTER PUBLICATION {PUBLICATION} DROP TABLE (public\.t\d); "
                                              rf"ALTER PUBLICATION {PUBLICATION} ADD TABLE public\.t\d", said)):
            world.sql(f"ALTER PUBLICATION {PUBLICATION} DROP TABLE {table}")
            world.sql(f"ALTER PUBLICATION {PUBLICATION} ADD TABLE {table}")
            applied.append(f"{table} published whole")
        if "REPLICA IDENTITY FULL" in said:
            for table in [t for t in world.columns if t not in world.full and re.search(rf"\b{re.escape(t)}\b", said)]:
                world.sql(f"ALTER TABLE {table} REPLICA IDENTITY FULL")
                world.full.add(table)
                applied.append(f"{table} REPLICA IDENTITY FULL")
        if f"pg_drop_replication_slot('{world.slot}')" in said:
            self.drop_slot(world)
            applied.append("slot dropped")
        return applied

    def was_reset(self, world: KeyedWorld, dataset: str, said: str) -> None:
        """A table no longer in the publication: its state dropped by the reset."""
        assert isinstance(world, CdcWorld)
        if dataset in re.findall(rf"table (public\.t\d) is no longer in publication '{PUBLICATION}'", said):
            world.dropped_state.add(dataset)

    def fail_targets(self, world: World) -> list[str]:
        """A published table's work units (its stream and its chunks), its chunks alone or its stream alone: of a table
        reset or new where there is one, else of one whose chunks are pending (their tasks have rows to fail on)."""
        from gobblin_py.state.store import StateStore

        assert isinstance(world, CdcWorld)
        marks = StateStore(world.root / "work", JOB_NAME).watermarks()
        fresh = {t for t in world.published if (marks.get(t) or {}).get("lsn") is None}
        busy = sorted(fresh) or sorted(self.snapshotting(world) & world.published)
        parts = [r"\.", r"\.chunk", r"\.(?!chunk)"] if self.chunked else [r"\."]  # all, chunks, the stream
        return [f"^{re.escape(t)}{part}" for t in busy or sorted(world.published) for part in parts]

    def session(self, world: KeyedWorld) -> Any:
        """None while the slot is missing: creating it waits for every running transaction."""
        assert isinstance(world, CdcWorld)
        if not world.sql("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", (world.slot,)):
            return None
        return world.server.connect(world.db, autocommit=False)

    # --- changes to the data --------------------------------------------------------------------------------------

    def large_transaction(self, world: World, step: int) -> None:
        """One transaction of inserts, an update of every row and deletes of some."""
        assert isinstance(world, CdcWorld)
        table = self.pick(world)
        first = world.next_key + 1
        world.next_key += LARGE_TXN_ROWS
        with world.conn.transaction():
            world.sql(f"INSERT INTO {table} (id, v, n) SELECT i, 'big' || i, 0 FROM generate_series(%s::int, %s::int) AS i",
                      (first, world.next_key))
            world.sql(f"UPDATE {table} SET n = n + 1, v = v || '+' WHERE id >= %s", (first,))
            world.sql(f"DELETE FROM {table} WHERE id >= %s AND id %% 7 = 0", (first,))
        world.log.append(f"{step} large transaction on {table}: {LARGE_TXN_ROWS} inserts, updates, deletes")

    def toast(self, world: World, step: int) -> None:
        """A TOAST-size `v` inserted or set; later updates of `n` alone leave it unchanged."""
        assert isinstance(world, CdcWorld)
        table = self.pick(world)
        big = secrets.token_hex(TOAST_CHARS // 2)
        keys = world.keys(table)
        if keys and self.rng.random() < 0.5:
            key = self.rng.choice(keys)
            world.sql(f"UPDATE {table} SET v = %s WHERE id = %s", (big, key))
        else:
            key = world.key()
            world.sql(f"INSERT INTO {table} (id, v, n) VALUES (%s, %s, 0)", (key, big))
        if self.rng.random() < 0.5:
            world.sql(f"UPDATE {table} SET n = n + 1 WHERE id = %s", (key,))  # the TOASTed value unchanged
        world.toasted.add(table)
        world.log.append(f"{step} toast: {table} key {key} holds {TOAST_CHARS} chars"
                         f"{'' if table in world.full else ' (identity DEFAULT)'}")

    # --- changes to the publication -------------------------------------------------------------------------------

    def narrow_publish(self, world: World, step: int) -> None:
        """`ALTER PUBLICATION pub SET (publish = 'insert, update')`, deletes, and half the time the flags put back
        before any run sees them."""
        assert isinstance(world, CdcWorld)
        world.sql(f"ALTER PUBLICATION {PUBLICATION} SET (publish = 'insert, update')")
        self.dml(world, step)
        table = self.pick(world)
        keys = world.keys(table)
        if keys:
            world.sql(f"DELETE FROM {table} WHERE id = %s", (self.rng.choice(keys),))
        restored = self.rng.random() < 0.5
        if restored:
            world.sql(f"ALTER PUBLICATION {PUBLICATION} SET (publish = '{FULL_PUBLISH}')")
        world.disturbed.append("publish narrowed")
        world.log.append(f"{step} publication {PUBLICATION} narrowed to insert, update; a delete on {table}"
                         f"{'; put back' if restored else ''}")

    def row_filter(self, world: World, step: int) -> None:
        """A row filter on a published table (`ALTER PUBLICATION … ADD TABLE t WHERE (id % 2 = 0)`), then changes."""
        assert isinstance(world, CdcWorld)
        if not world.published:
            return
        table = self.rng.choice(sorted(world.published))
        world.sql(f"ALTER PUBLICATION {PUBLICATION} DROP TABLE {table}")
        world.sql(f"ALTER PUBLICATION {PUBLICATION} ADD TABLE {table} WHERE (id %% 2 = 0)")
        with world.conn.transaction():
            self.changes(world, world.conn, table, 6)
        world.disturbed.append(f"row filter on {table}")
        world.log.append(f"{step} publication {PUBLICATION}: row filter on {table}, then changes")

    def remove_table(self, world: World, step: int) -> None:
        """A table removed from the publication, changed while out; half the time added back in the same step."""
        assert isinstance(world, CdcWorld)
        if len(world.published) < 2:
            return self.add_table(world, step)
        table = self.rng.choice(sorted(world.published))
        world.sql(f"ALTER PUBLICATION {PUBLICATION} DROP TABLE {table}")
        world.published.discard(table)
        with world.conn.transaction():
            self.changes(world, world.conn, table, 4)
        world.disturbed.append(f"{table} left the publication")
        if self.rng.random() < 0.5:
            self.publish(world, table)
            world.log.append(f"{step} {table} removed from {PUBLICATION}, changed, and added back")
        else:
            world.log.append(f"{step} {table} removed from {PUBLICATION}, then changed")

    def publish(self, world: CdcWorld, table: str) -> None:
        world.sql(f"ALTER PUBLICATION {PUBLICATION} ADD TABLE {table}")
        world.published.add(table)
        world.dropped_state.discard(table)
        world.disturbed.append(f"{table} added to the publication")

    def add_table(self, world: World, step: int) -> None:
        """A table added to the publication: a new one (public.t2 while there are fewer), or one removed before."""
        assert isinstance(world, CdcWorld)
        out = sorted(set(world.columns) - world.published)
        if out:
            table = self.rng.choice(out)
            self.publish(world, table)
            world.log.append(f"{step} {table} added back to {PUBLICATION}")
        elif len(world.columns) < 3:
            table = f"public.t{len(world.columns)}"
            self.create_table(world, table)
            self.publish(world, table)
            world.log.append(f"{step} {table} created and added to {PUBLICATION}")

    # --- DDL and the slot -------------------------------------------------------------------------------------------

    def add_column_default(self, world: World, step: int) -> None:
        """ALTER TABLE … ADD COLUMN cK int DEFAULT 7: every existing row reads 7 at once, without any change in the
        WAL (PostgreSQL's fast default)."""
        self.add_column(world, step, default=True)

    def retype(self, world: World, step: int) -> None:
        """`ALTER TABLE t ALTER COLUMN n TYPE bigint`, perhaps `USING n * 2` (or, once bigint, `USING n + 1`): the table
        is rewritten, every row's n with it, and logical decoding leaves the rewrite out."""
        assert isinstance(world, CdcWorld)
        table = self.pick(world)
        now = world.sql("SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = %s::regclass "
                        "AND attname = 'n'", (table,))[0][0]
        using = (self.rng.choice(("", " USING n * 2")) if now == "integer" else " USING n + 1")
        self.altered(world, step, table, f"ALTER TABLE {table} ALTER COLUMN n TYPE bigint{using}", f"column n of {table} retyped",
                     f"retype: {table} ALTER COLUMN n TYPE bigint{using} (was {now})")

    def replica_identity(self, world: World, step: int) -> None:
        """REPLICA IDENTITY FULL on a table, or back to DEFAULT."""
        assert isinstance(world, CdcWorld)
        table = self.pick(world)
        identity = "DEFAULT" if table in world.full else "FULL"
        if identity == "FULL" and world.sql(f"SELECT 1 FROM {table} WHERE length(v) >= %s LIMIT 1", (TOAST_CHARS,)):
            world.disturbed.append(f"{table} FULL after TOASTed values")  # an update before it may still fail a run
        world.sql(f"ALTER TABLE {table} REPLICA IDENTITY {identity}")
        (world.full.discard if identity == "DEFAULT" else world.full.add)(table)
        world.log.append(f"{step} {table} REPLICA IDENTITY {identity}")

    def drop_slot(self, world: CdcWorld) -> bool:
        """Drop the slot (waiting for a killed run's session to let it go); False if there was none."""
        for _ in range(100):
            try:
                return bool(world.sql("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                                      "WHERE slot_name = %s", (world.slot,)))
            except Exception as exc:
                if "is active" not in str(exc):
                    raise
                time.sleep(0.2)
        raise RuntimeError(f"slot {world.slot} stayed active for 20 s")

    def recreate_slot(self, world: World, step: int) -> None:
        """The slot dropped and created again by someone else, with changes in between."""
        assert isinstance(world, CdcWorld)
        if not self.drop_slot(world):
            return
        self.dml(world, step)
        world.sql("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (world.slot,))
        world.disturbed.append("slot re-created")
        world.log.append(f"{step} slot {world.slot} dropped and created again")
