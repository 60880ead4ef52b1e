"""The MySQL CDC world of the model-based test (see world.py, issue 45): a real MariaDB writing a row-based binlog
(tests/jdbc_mysql/mariadb_server.py with `binlog=True`: log_bin, binlog_format ROW, binlog_row_image and
binlog_row_metadata FULL), a database of two or three tables per history (each with a SET and an ENUM column of
latin1 labels, non-ASCII among them: the table map's labels are decoded in the column's charset), and a mysql_cdc job publishing each table
to an upsert table of the history's sink (`sink`): an Iceberg table kept by key (`mode: upsert`, the embedded pyiceberg
SQL catalog), as docs/sources/mysql_cdc.md shows it, or a Delta table kept by key (`table_uri: <world>/lake/{dataset}`),
read by delta-rs. The oracle, the runs and their remedies are the CDC worlds' (world_keyed.py).

Its rules, each changing something mysql_cdc assumes: DML transactions of several statements (inserts, updates, a key
updated several times in one transaction, deletes, a key deleted and inserted again), a transaction begun before a run
and committed after it (`spanning`), primary-key updates (a third of the new keys are negative, below every chunk's
range, the others above it, so a key update moves a row between snapshot chunks either way), TRUNCATE (alone, or
between changes: MySQL commits the changes before it); ALTER TABLE (a column added, an added column dropped, `n`
retyped to bigint or `v` widened), which a run must refuse naming the table, its remedy `state reset` of it; a table
added to the job's `tables`; a table taken out of them and changed while out (half the time added back at once, else
by a later `add_table`: its own committed position is then older than the others'); the binlog rotated (`FLUSH BINARY LOGS` between changes); `PURGE BINARY LOGS` past every
committed position (changes, `FLUSH BINARY LOGS`, changes, the purge: the first changes are gone), refused naming a table, its remedy `state reset`;
changes written with `log_bin_compress` on (compressed row events, which the binlog reader cannot read), the read
refused naming every table it reads and `state reset` of each; runs of
the real CLI in a child process, SIGKILLed at each commit point (the Iceberg upsert's among them, for an Iceberg sink) or at a random time,
`recover`, `recover --abandon` (docs/publishers/iceberg.md), a `state reset` the user asks for, and a run under
`job.commit_policy: successful` (job-successful.yaml, the same job), and one under it whose tasks of one table (all,
its chunks alone or its stream alone) fail (`world_faults.py`): the table's tasks commit all or none.

Chunked snapshots (`chunked`: drawn per seed by a generator of its own, or given): `snapshot: {chunk_rows: CHUNK_ROWS,
chunks_per_run: CHUNKS_PER_RUN}`, so a table's snapshot spans runs while the world changes; the oracle holds a table to
its source once its committed state has a stream position (the first stream after the last chunk brings the chunks
of earlier runs up to date).

The oracle (world_keyed.py): after every step no key is twice in any table of the sink (read with pyiceberg or
delta-rs); after every run that exits 0, every table in the sink of a table the job reads equals `SELECT id, v, n, … FROM` the table by key. A run
that exits 1 or 2 must follow a change to the world and name a table and `state reset`, which the world then runs.

A second host (world.py): half the histories are leased (`job.lease`), their Iceberg catalog (an Iceberg sink's) pyiceberg's SQL catalog
on a PostgreSQL database (`catalog`: a server started on first use) as hosts would share a catalog service (a frozen
driver's SQLite write lock would stop the other), and `paused_past_lease` freezes a driver mid-run (its binlog
connection open, its decode's spool lock held) while a second one takes the job over; the frozen one, woken, must
commit nothing. The others keep drivers apart by the work directory's lock."""

from __future__ import annotations

import os
import random
import re
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gobblin_py.builtin.publishers.iceberg.upsert import WRITTEN_POINT
from support.world import CRASH_POINTS, Rule, World
from support.world_faults import TaskFailures
from support.world_keyed import JOB_NAME, KeyedHistory, KeyedWorld

PASSWORD_ENV = "GOBBLIN_TEST_MYSQL_PASSWORD"
CHUNK_ROWS, CHUNKS_PER_RUN = 4, 2
MAX_TABLES = 4
SUCCESSFUL = ["run", "job-successful.yaml", "--in-process"]


class Session:
    """A PyMySQL connection with what the shared rules call on a session: `execute` (its cursor), `transaction()`,
    `commit`, `close`."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def execute(self, query: str, params: tuple[Any, ...] = ()) -> Any:
        cur = self.raw.cursor()
        cur.execute(query, params or None)  # no parameters: a literal % stays as written
        return cur

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.raw.begin()
        try:
            yield
        except BaseException:
            self.raw.rollback()
            raise
        self.raw.commit()

    def commit(self) -> None:
        self.raw.commit()

    def close(self) -> None:
        self.raw.close()


@dataclass
class MysqlWorld(KeyedWorld):
    """The database of one history on the shared server."""

    server: Any = None
    db: str = ""
    torn: set[str] = field(default_factory=set)  # truncated while their snapshot was not streamed yet: refused until
    # their first stream (the truncate lies between their chunks), however many clean runs come before it
    compressed: set[str] = field(default_factory=set)  # not streamed yet when compressed events were written: their
    # first stream reads from before them and is refused, however many clean runs (more chunks) come before it
    altered: set[str] = field(default_factory=set)  # not streamed yet when an ALTER (column added, dropped, retyped)
    # changed them: their first stream reads from before it and is refused, however many clean runs come before it

    def key(self) -> int:
        """A new key: every third negative (below every chunk), the others above every key there is."""
        self.next_key += 1
        return -self.next_key if self.next_key % 3 == 0 else self.next_key


SET_COLUMN = "s SET('ç', 'a', 'b', 'é') NOT NULL DEFAULT 'ç,b'"
"""The first column the shared rules set besides v and n (to a number 0–9: a set of these members, 0 the empty one)."""
ENUM_COLUMN = "e ENUM('x', 'ñ', 'y') DEFAULT 'ñ'"
"""Set as a number 1–3 (its members) where it is the first column the shared rules set; its default otherwise."""


class MysqlCdcHistory(TaskFailures, KeyedHistory):
    """A history of a mysql_cdc → Iceberg (or Delta: `sink`) upsert job (see the module's docstring). `server` is a started LocalMariaDB
    with the binlog on; each history has a database of its own."""

    kind = "mysql_cdc"
    iceberg_points = (*CRASH_POINTS, WRITTEN_POINT)
    ddl_refused = True
    leased_share = 0.5  # half the histories: two drivers of the work directory kept apart by the lease alone
    pause_weight = 1

    def __init__(self, seed: int, steps: int, server: Any, include: tuple[str, ...] = (),
                 chunked: bool | None = None, pauses: tuple[int, ...] = (),
                 catalog: Callable[[], Any] | None = None, sink: str = "iceberg") -> None:
        super().__init__(seed, steps, include, pauses, sink)
        self.server, self.catalog = server, catalog
        # drawn by a generator of its own, so that a seed draws every other step as it did before
        self.chunked = random.Random(f"{seed}/chunked").random() < 0.5 if chunked is None else chunked
        self.chunks_per_run = CHUNKS_PER_RUN
        self._world: MysqlWorld | None = None

    # --- the world ----------------------------------------------------------------------------------------------

    def new_world(self, root: Path) -> World:
        from jdbc_mysql.mariadb_server import PASSWORD

        os.environ[PASSWORD_ENV] = PASSWORD  # the CLI children inherit it
        root.mkdir(parents=True, exist_ok=True)
        db = self.server.create_database(f"w{self.seed % 10**8}_{uuid.uuid4().hex[:8]}")
        world = MysqlWorld(root, server=self.server, db=db, conn=Session(self.server.connect(db)))
        self._world = world
        if self.needs_catalog():
            if self.catalog is None:
                raise ValueError(f"seed {self.seed} draws a leased history: it needs a PostgreSQL for its catalog (catalog=)")
            self.shared_catalog(world, self.catalog(), f"{db}_cat")
        for k in range(self.rng.randint(2, 3)):
            self.create_table(world, f"{db}.t{k}")
        world.published = set(world.columns)
        world.log.append(f"0 database {db}: tables {', '.join(sorted(world.published))} into {self.sink}"
                         + (f" (chunked snapshots: {CHUNK_ROWS} rows, {CHUNKS_PER_RUN} a run)" if self.chunked else ""))
        return world

    def create_table(self, world: MysqlWorld, table: str) -> None:
        """A latin1 table of the world: besides id, v and n, an ENUM column and, for half the tables, a SET column of
        non-ASCII labels (the binlog's table map names them in the table's charset), set by the shared rules as numbers
        (`s = 0` is the empty set). A table without the SET has only columns ConnectorX reads as PyMySQL does, so its
        chunks take `snapshot.read_chunk_native`; one with it, the rows path. Drawn by the table's name alone."""
        with_set = random.Random(f"{self.seed}/{table.rsplit('.', 1)[-1]}/set").random() < 0.5
        world.sql(f"CREATE TABLE {table} (id int PRIMARY KEY, v varchar(200), n int, "
                  f"{SET_COLUMN + ', ' if with_set else ''}{ENUM_COLUMN}) DEFAULT CHARSET latin1")
        world.sql(f"INSERT INTO {table} (id, v, n) SELECT seq, CONCAT('v', seq), seq FROM seq_1_to_{self.rng.randint(5, 30)}")
        world.columns[table] = ["id", "v", "n", *(["s"] if with_set else []), "e"]

    def job(self, world: World, policy: str | None = None) -> dict[str, Any]:
        assert isinstance(world, MysqlWorld)
        return {
            "job": {"name": JOB_NAME, "work_dir": str(world.root / "work"), "max_task_retries": 0,
                    **({"commit_policy": policy} if policy else {})},
            "source": {"class": "mysql_cdc", "url": self.server.url(world.db, "mysql"), "password_env": PASSWORD_ENV,
                       "tables": sorted(world.published),
                       **({"snapshot": {"chunk_rows": CHUNK_ROWS, "chunks_per_run": self.chunks_per_run}}
                          if self.chunked else {})},
            "writer": {"class": "parquet"},
            "publisher": self.publisher(world, ["_pos", "_seq"]),
        }

    def number(self, column: str) -> int:
        """As the other worlds' (a SET takes 0–9: a set of its members), but 1–3 for the ENUM (its members' numbers)."""
        return self.rng.randint(1, 3) if column == "e" else super().number(column)

    def write_job(self, world: MysqlWorld) -> None:
        (world.root / "job.yaml").write_text(yaml.safe_dump(self.with_lease(world, self.job(world)), sort_keys=False))

    def rules(self) -> list[tuple[int, Rule]]:
        return [(6, self.dml), (2, self.spanning), (2, self.key_update), (1, self.truncate), (5, self.run_job),
                (3, self.run_killed_at_point), (1, self.run_killed_at_random), (1, self.run_successful),
                (1, self.recover), (1, self.abandon), (1, self.state_reset), (1, self.add_table), (1, self.add_column),
                (1, self.drop_column), (1, self.retype), (1, self.rotate), (1, self.purge),
                (1, self.run_task_fails), (1, self.remove_table), (1, self.compress)]

    def run(self, root: Path) -> World:
        try:
            return super().run(root)
        finally:
            if self._world is not None:
                self._world.conn.close()
                with self.server.connect("mysql") as conn, conn.cursor() as cur:
                    cur.execute(f"DROP DATABASE IF EXISTS `{self._world.db}`")
                if self._world.catalog_db:
                    with self._world.catalog_server.connect("postgres") as conn:
                        conn.execute(f'DROP DATABASE IF EXISTS "{self._world.catalog_db}" WITH (FORCE)')

    # --- what the shared CDC world asks -------------------------------------------------------------------------------

    def snapshotting(self, world: KeyedWorld) -> set[str]:
        """Chunked: the tables with committed chunks and no stream position (the chunks of earlier runs are as they
        were at their own high position until the first stream after the last chunk); else none (one chunk, read
        at once)."""
        from gobblin_py.state.store import StateStore

        if not self.chunked:
            return set()
        return {dataset for dataset, mark in StateStore(world.root / "work", JOB_NAME).watermarks().items()
                if mark.get("binlog") is None and any(k.startswith("chunk.") and v is not None for k, v in mark.items())}

    def streaming(self, world: MysqlWorld, table: str) -> bool:
        """The table has a committed stream position (its snapshot done and streamed once)."""
        from gobblin_py.state.store import StateStore

        return StateStore(world.root / "work", JOB_NAME).watermarks().get(table, {}).get("binlog") is not None

    def may_fail(self, world: KeyedWorld) -> list[str]:
        assert isinstance(world, MysqlWorld)
        return [*world.disturbed, *(f"truncate between the chunks of {t}" for t in sorted(world.torn)),
                *(f"compressed changes before the first stream of {t}" for t in sorted(world.compressed)),
                *(f"ALTER TABLE before the first stream of {t}" for t in sorted(world.altered))]

    def cleaned(self, world: KeyedWorld) -> None:
        """A table truncated between its chunks, or compressed events or an ALTER written before its first stream, may
        be refused until it has streamed."""
        assert isinstance(world, MysqlWorld)
        world.torn = {t for t in world.torn if not self.streaming(world, t)}
        world.compressed = {t for t in world.compressed if not self.streaming(world, t)}
        world.altered = {t for t in world.altered if not self.streaming(world, t)}

    def session(self, world: KeyedWorld) -> Any:
        assert isinstance(world, MysqlWorld)
        return Session(self.server.connect(world.db, autocommit=False))

    def fail_targets(self, world: World) -> list[str]:
        """Work units of a table not yet streamed (reset, new, or its chunks pending) where there is one, else of any:
        all of them, its chunks alone or its stream alone (ids `<db.table>.chunk<n>.…`, `<db.table>.binlog.…`)."""
        assert isinstance(world, MysqlWorld)
        busy = [t for t in sorted(world.published) if not self.streaming(world, t)]
        parts = [r"\.", r"\.chunk", r"\.binlog"] if self.chunked else [r"\.", r"\.binlog"]
        return [f"^{re.escape(t)}{part}" for t in busy or sorted(world.published) for part in parts]

    # --- rules of this world ----------------------------------------------------------------------------------------

    def truncate(self, world: World, step: int) -> None:
        """TRUNCATE (see the shared rule); one of a table whose snapshot is not streamed yet may be refused (between
        its chunks), naming `state reset`, by any run up to the table's first stream (`torn`). (The model dropped it
        at the next clean run, which committed more chunks, until the soak found it: seed 2724170234.)"""
        assert isinstance(world, MysqlWorld)
        world.torn |= {t for t in world.published if not self.streaming(world, t)}
        super().truncate(world, step)

    def run_successful(self, world: World, step: int) -> None:
        """A run under `job.commit_policy: successful` (the same job, work directory and state), killed at a commit
        point a third of the time."""
        assert isinstance(world, MysqlWorld)
        (world.root / "job-successful.yaml").write_text(yaml.safe_dump(self.with_lease(world, self.job(world, "successful")),
                                                                       sort_keys=False))
        point = self.rng.choice(self.crash_points) if self.rng.random() < 0.3 else None
        self._run(world, step, "run, commit_policy successful", point, args=SUCCESSFUL)

    def add_table(self, world: World, step: int) -> None:
        """A table added to the job's `tables`: one removed before (its committed position is older than the others'),
        else a new one with rows."""
        assert isinstance(world, MysqlWorld)
        out = sorted(set(world.columns) - world.published)
        if out:
            table = self.rng.choice(out)
            self.readd(world, table)
            world.log.append(f"{step} {table} added back to the job's tables")
            return None
        if len(world.columns) >= MAX_TABLES:
            return self.dml(world, step)
        table = f"{world.db}.t{len(world.columns)}"
        self.create_table(world, table)
        world.published.add(table)
        self.write_job(world)
        world.log.append(f"{step} {table} created and added to the job's tables")

    def remove_table(self, world: World, step: int) -> None:
        """A table taken out of the job's `tables` and changed while out; half the time added back in the same step:
        the run after reads its changes from its own committed position (older than the other tables'), or refuses
        naming it where the binlog no longer holds that position."""
        assert isinstance(world, MysqlWorld)
        if len(world.published) < 2:
            return self.add_table(world, step)
        table = self.rng.choice(sorted(world.published))
        world.published.discard(table)
        self.write_job(world)
        with world.conn.transaction():
            self.changes(world, world.conn, table, 4)
        world.disturbed.append(f"{table} removed from the job")
        if self.rng.random() < 0.5:
            self.readd(world, table)
            world.log.append(f"{step} {table} removed from the job's tables, changed, and added back")
        else:
            world.log.append(f"{step} {table} removed from the job's tables, then changed")
        return None

    def readd(self, world: MysqlWorld, table: str) -> None:
        world.published.add(table)
        self.write_job(world)
        world.disturbed.append(f"{table} added back to the job")

    def add_column(self, world: World, step: int, default: bool = False) -> None:
        self._unstreamed_ddl(world, lambda: super(MysqlCdcHistory, self).add_column(world, step, default))

    def drop_column(self, world: World, step: int) -> None:
        self._unstreamed_ddl(world, lambda: super(MysqlCdcHistory, self).drop_column(world, step))

    def altered(self, world: KeyedWorld, step: int, table: str, ddl: str, disturbed: str, said: str) -> None:
        assert isinstance(world, MysqlWorld)
        if table in world.published and not self.streaming(world, table):
            world.altered.add(table)
        super().altered(world, step, table, ddl, disturbed, said)

    def _unstreamed_ddl(self, world: World, rule: Callable[[], None]) -> None:
        """`rule` (an ALTER of a table it picks); a table it altered before its first stream may be refused by any run
        up to that stream, which reads the binlog from before the ALTER (`altered`). (The model forgot the ALTER at the
        next clean run, which committed the last chunks, until the soak found it: seed 1071044967, Delta.)"""
        assert isinstance(world, MysqlWorld)
        before = {t: list(c) for t, c in world.columns.items()}
        unstreamed = {t for t in world.published if not self.streaming(world, t)}
        rule()
        world.altered |= {t for t, c in world.columns.items() if c != before.get(t) and t in unstreamed}

    def retype(self, world: World, step: int) -> None:
        """`ALTER TABLE t MODIFY n bigint`, or once it is, `MODIFY v varchar(250)` (then text): the declared types the
        commit kept change."""
        assert isinstance(world, MysqlWorld)
        table = self.pick(world)
        types = dict(world.sql("SELECT column_name, column_type FROM information_schema.columns WHERE table_schema = %s "
                               "AND table_name = %s", tuple(table.split("."))))
        change = ("n bigint" if types.get("n") == "int(11)" else "v varchar(250)" if types.get("v") == "varchar(200)"
                  else "v text" if types.get("v") == "varchar(250)" else "n int")
        self.altered(world, step, table, f"ALTER TABLE {table} MODIFY {change}", f"{table} retyped: {change}",
                     f"retype: {table} MODIFY {change} (was {types.get(change.split()[0])})")

    def rotate(self, world: World, step: int) -> None:
        """`FLUSH BINARY LOGS` once or twice between changes: a run's range crosses binlog files (nothing refused)."""
        assert isinstance(world, MysqlWorld)
        for _ in range(self.rng.randint(1, 2)):
            self.dml(world, step)
            world.sql("FLUSH BINARY LOGS")
        world.log.append(f"{step} binlog rotated to {world.sql('SHOW MASTER STATUS')[0][0]}")

    def purge(self, world: World, step: int) -> None:
        """Changes, `FLUSH BINARY LOGS`, changes, `PURGE BINARY LOGS TO` the newest file: the changes before the flush
        are gone, so every position committed before them is. (A purge of only the file a committed position ends
        loses nothing: the server still serves that GTID from the next file's GTID list, and a run takes it.)"""
        assert isinstance(world, MysqlWorld)
        self.dml(world, step)
        world.sql("FLUSH BINARY LOGS")
        self.dml(world, step)
        newest = world.sql("SHOW MASTER STATUS")[0][0]
        # The server keeps (silently, with a warning) a file a dump thread reads, and one its binlog checkpoint (the
        # storage engine's commit of the file's transactions) has not passed yet: a killed run's binlog connection
        # may linger until the server notices (no run is live between steps: end them), and the checkpoint follows
        # the flush within moments.
        for thread, command in world.sql("SELECT id, command FROM information_schema.processlist"):
            if command == "Binlog Dump":
                with suppress(Exception):  # gone meanwhile
                    world.sql(f"KILL {int(thread)}")
        for _ in range(100):
            world.sql(f"PURGE BINARY LOGS TO '{newest}'")
            first = world.sql("SHOW BINARY LOGS")[0][0]
            if first == newest:
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"PURGE BINARY LOGS TO '{newest}' left {first}: the world's purge did not happen")
        world.disturbed.append(f"binlog purged to {newest}")
        world.log.append(f"{step} binlog purged to {newest}")

    def compress(self, world: World, step: int) -> None:
        """`log_bin_compress` on (`log_bin_compress_min_len` 10: every event compressed), an update of every row of a
        table and random changes, then off: the read that meets the compressed events must fail naming
        the tables it reads and `state reset` of each, committing nothing after them (mysql-replication passed over
        them as unknown events, and the run exited 0 without their changes)."""
        assert isinstance(world, MysqlWorld)
        table = self.pick(world)
        # a table whose snapshot has not streamed yet reads them at its first stream, after any number of clean runs
        # committing more chunks (a soak found the model expecting the refusal at the next clean run: seed 3444173450)
        world.compressed |= {t for t in world.published if not self.streaming(world, t)}
        world.sql("SET GLOBAL log_bin_compress_min_len = 10")  # every event compressed, however few its rows
        world.sql("SET GLOBAL log_bin_compress = ON")
        try:
            with world.conn.transaction():
                world.conn.execute(f"UPDATE {table} SET n = n + 1")
                self.changes(world, world.conn, table, self.rng.randint(1, 4))
        finally:
            world.sql("SET GLOBAL log_bin_compress = OFF")
            world.sql("SET GLOBAL log_bin_compress_min_len = 256")
        world.disturbed.append(f"compressed changes of {table}")
        world.log.append(f"{step} compressed binlog events: changes of {table} written with log_bin_compress on")

