"""The jdbc world of the model-based test (see world.py): MariaDB tables with an integer primary key `id`, a watermark
column `ver` and a payload, extracted by the `jdbc` source (`watermark_column: ver`, `primary_key: [id]`, 2–4
partitions, `first_load_split: key` or `watermark` drawn per seed) into Avro or Parquet files (fs publisher), read back
with the Apache `avro` package or pyarrow.

The world owns the version counter: every insert or update sets `ver` to the next value of it, committed at once, so
versions are strictly rising and unique across tables (no late commit). A version is the model's id: `World.expected`
counts versions, and the reader checks that each (id, ver) it finds is the row the world wrote with that version.

A second host (world.py): half the histories are leased (`job.lease`; the files publisher needs no shared service
beyond the work directory), and `paused_past_lease` freezes a driver at a commit point while a second one takes over.

Its rules, besides runs in the driver, runs killed at a commit point or at random, recover, recover --abandon, two
runs at once and `state reset --dataset T`: inserts (keys spread, some far above the largest, so key slices are
uneven), updates (a new version: a later run must read it; the old one is owed only as published then), deletes (the
jdbc source does not see them: what was published stays, nothing more is owed), a run killed at the N-th batch read
(`jdbc.batch_read`), a run killed mid-read and then rows changed before the next run (a first load in progress while
rows change), and a run under `commit_policy: successful` whose tasks of one slice (or one table) fail.

The oracle, besides world.py's (no version more copies than owed after any step, also after kills; every one owed at
the end): after every run that exits 0, every row the table holds now with `ver` ≤ its committed high H (the state's
`high`, `ranges.committed`) has its (id, ver) in the output."""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gobblin_py.testing.crash import SIGKILLED
from support.world import JOB, RUN, History, Rule, Violation, World, reap, start
from support.world_faults import FLAKY

PASSWORD_ENV = "GOBBLIN_TEST_MYSQL_PASSWORD"
PG_PASSWORD_ENV = "GOBBLIN_TEST_PG_PASSWORD"
FAR = 1_000_000
"""Keys this far above the others: the key slices (equal spans of [min, max]) are uneven."""


@dataclass
class JdbcWorld(World):
    """A database of tables; what each holds now (id → ver) and which (table, id) each version was written as."""

    db: str = ""
    rows: dict[str, dict[int, int]] = field(default_factory=dict)  # table → id → its current ver
    pairs: dict[int, tuple[str, int]] = field(default_factory=dict)  # ver → (table, id) it was written as

    def version(self, table: str, key: int) -> int:
        """The next version, for row `key` of `table`: owed once."""
        ver = self.next_id
        self.next_id += 1
        self.pairs[ver] = (table, key)
        self.rows[table][key] = ver
        self.produced([ver])
        return ver


class JdbcHistory(History):
    """A history of a MariaDB → jdbc → files job (see the module's docstring)."""

    kind = "jdbc"
    leased_share = 0.5  # half the histories: two drivers of the work directory kept apart by the lease alone
    pause_weight = 1

    def __init__(self, seed: int, steps: int, server: Any, include: tuple[str, ...] = (),
                 postgres: Callable[[], Any] | None = None, pauses: tuple[int, ...] = ()) -> None:
        """`server` a LocalMariaDB; `postgres` (a LocalPostgres started on first use) draws it for half the seeds, by a
        generator of its own so that a seed draws every other step as it does without it."""
        super().__init__(seed, steps, include, pauses)
        self.engine = "postgres" if postgres is not None and random.Random(f"{seed}/engine").random() < 0.5 else "mariadb"
        if self.engine == "postgres":
            from gobblin_py.demo.pg_server import PASSWORD as PG_PASSWORD

            os.environ[PG_PASSWORD_ENV] = PG_PASSWORD  # the CLI children inherit it
            assert postgres is not None
            self.server: Any = PostgresTables(postgres())
            self.password_env = PG_PASSWORD_ENV
        else:
            from jdbc_mysql.mariadb_server import PASSWORD

            os.environ[PASSWORD_ENV] = PASSWORD
            self.server = server
            self.password_env = PASSWORD_ENV
        shape = random.Random(f"{seed}/shape")  # the job's shape, by a generator of its own
        self.tables = [f"t{n}" for n in range(1, shape.randint(1, 3) + 1)]
        self.partitions = shape.randint(2, 4)
        self.split = shape.choice(("key", "watermark"))
        self.format = shape.choice(("avro", "parquet"))
        if self.engine == "postgres":
            self.split = "watermark"  # PostgreSQL's first loads are always split on the watermark

    # --- the job and its world ------------------------------------------------------------------------------

    def new_world(self, root: Path) -> World:
        root.mkdir(parents=True, exist_ok=True)
        name = f"w{self.seed}_{os.getpid()}_{root.name}".lower().replace("-", "_")[:60]
        world = JdbcWorld(root, db=self.server.create_database(name))
        for table in self.tables:
            self.server.execute(world.db, f"CREATE TABLE {table} (id bigint PRIMARY KEY, ver bigint NOT NULL, "
                                          "payload varchar(64))", f"CREATE INDEX {table}_v ON {table} (ver)")
            world.rows[table] = {}
        world.log.append(f"0 {self.engine} tables {self.tables}, partitions {self.partitions}, first_load_split {self.split}, "
                         f"{self.format} files")
        return world

    def job(self, world: World) -> dict[str, Any]:
        assert isinstance(world, JdbcWorld)
        tables = [{"table": t, "watermark_column": "ver", "primary_key": ["id"]} for t in self.tables]
        writer = {"class": "avro", "codec": "null"} if self.format == "avro" else {"class": "parquet"}
        return {
            "job": {"name": JOB, "work_dir": str(world.root / "work"), "max_task_retries": 0, "commit_parallelism": 1,
                    "commit_max_attempts": 100},
            "source": {"class": "jdbc", "url": self.server.url(world.db), "password_env": self.password_env,
                       "tables": tables, "partitions": self.partitions, "first_load_split": self.split,
                       "fetch_rows": 7},
            "writer": writer,
            "publisher": {"final_dir": str(world.root / "output")},
            "spark": {"master": "local[1]", "in_driver_below": 0},
        }

    def output_ids(self, world: World) -> Counter[int]:
        """ver → copies in the published files (staged and hidden ones skipped), each (id, ver) checked against the
        row the world wrote with that version."""
        assert isinstance(world, JdbcWorld)
        found: Counter[int] = Counter()
        out = world.root / "output"
        for table in self.tables:
            for key, ver in self._pairs(out / table):
                if world.pairs.get(ver) != (table, key):
                    raise ValueError(f"{table} holds (id {key}, ver {ver}), which the world never wrote "
                                     f"(ver {ver} is {world.pairs.get(ver)})")
                found[ver] += 1
        return found

    def _pairs(self, directory: Path) -> list[tuple[int, int]]:
        """(id, ver) of every record of the published files under `directory`, by a reader gobblin-py did not write."""
        suffix = "*.avro" if self.format == "avro" else "*.parquet"
        pairs: list[tuple[int, int]] = []
        for path in sorted(directory.rglob(suffix)) if directory.exists() else []:
            if any(part.startswith((".", "_")) for part in path.relative_to(directory).parts):
                continue
            if self.format == "avro":
                from avro.datafile import DataFileReader
                from avro.io import DatumReader

                with open(path, "rb") as f, DataFileReader(f, DatumReader()) as reader:
                    pairs += [(r["id"], r["ver"]) for r in reader]
            else:
                import pyarrow.parquet as pq

                t = pq.read_table(path, columns=["id", "ver"])
                pairs += list(zip(t.column("id").to_pylist(), t.column("ver").to_pylist()))
        return pairs

    def rules(self) -> list[tuple[int, Rule]]:
        return [(4, self.produce), (2, self.update), (1, self.delete), (4, self.run_job), (3, self.run_killed_at_point),
                (2, self.run_killed_mid_read), (1, self.changed_mid_first_load), (1, self.run_killed_at_random),
                (1, self.recover), (1, self.abandon), (1, self.concurrent_runs), (1, self.state_reset),
                (1, self.run_task_fails)]

    # --- the oracle ---------------------------------------------------------------------------------------------

    def cli(self, world: World, args: list[str], step: int, rule: str, ok: tuple[int, ...], crash_at: str | None = None,
            preexec: Callable[[], None] | None = None) -> Any:
        """As world.py's; after a run that exits 0, every row with ver ≤ its table's committed high is published."""
        done = super().cli(world, args, step, rule, ok, crash_at, preexec)
        if args[0] == "run" and done.returncode == 0:
            self.check_high(world, step, rule)
        return done

    def highs(self, world: World) -> dict[str, Any]:
        """table → its committed high H (None: no first load complete), read from the job's state."""
        from gobblin_py.builtin.sources.jdbc.ranges import committed
        from gobblin_py.state.store import StateStore

        marks = StateStore(world.root / "work", JOB).watermarks()
        return {t: committed("integer", marks[t], t).high if t in marks else None for t in self.tables}

    def check_high(self, world: World, step: int, rule: str) -> None:
        """Every row the source holds now with ver ≤ H is in the output (its (id, ver))."""
        assert isinstance(world, JdbcWorld)
        now = self.read(world, step, rule)
        highs = self.highs(world)
        for table, high in highs.items():
            if high is None:
                continue
            missing = sorted((key, ver) for key, ver in world.rows[table].items() if ver <= high and now[ver] == 0)
            if missing:
                raise Violation(self.seed, step, rule, f"{table}: {len(missing)} row(s) with ver ≤ the committed high "
                                                       f"{high} not in the output, e.g. (id, ver) {missing[:5]}")
        world.log.append(f"{step} oracle: committed highs {highs}, every row up to them published")

    # --- the world changes ----------------------------------------------------------------------------------

    def produce(self, world: World, step: int, table: str | None = None) -> None:
        """New rows in one table: keys spread over the gaps, a few far above the largest."""
        assert isinstance(world, JdbcWorld)
        table = table or self.rng.choice(self.tables)
        rows = world.rows[table]
        top = max(rows, default=0)
        keys: set[int] = set()
        for _ in range(self.rng.randint(1, 25)):
            key = top + self.rng.randint(1, FAR) if self.rng.random() < 0.1 else self.rng.randint(1, max(top, 50) + 20)
            if key not in rows:
                keys.add(key)
        values = [(key, world.version(table, key)) for key in sorted(keys)]
        self.server.execute(world.db, f"INSERT INTO {table} (id, ver, payload) VALUES "
                            + ", ".join(f"({k}, {v}, 'p{v}')" for k, v in values))
        world.log.append(f"{step} inserted {len(values)} row(s) into {table}, keys {min(keys, default=None)}..{max(keys, default=None)}")

    def update(self, world: World, step: int, table: str | None = None) -> None:
        """Existing rows get a new version: a later run reads it; the old one is owed only as far as it was published."""
        assert isinstance(world, JdbcWorld)
        table = table or self.rng.choice(self.tables)
        rows = world.rows[table]
        if not rows:
            return self.produce(world, step, table)
        keys = self.rng.sample(sorted(rows), min(len(rows), self.rng.randint(1, 8)))
        world.withdraw([rows[k] for k in keys], self.read(world, step, "update"))
        for key in keys:  # each change committed at once (autocommit), with the next version
            ver = world.version(table, key)
            self.server.execute(world.db, f"UPDATE {table} SET ver = {ver}, payload = 'p{ver}' WHERE id = {key}")
        world.log.append(f"{step} updated {len(keys)} row(s) of {table}")

    def delete(self, world: World, step: int, table: str | None = None) -> None:
        """Rows deleted: the jdbc source does not see it; what was published of them stays, nothing more is owed."""
        assert isinstance(world, JdbcWorld)
        table = table or self.rng.choice(self.tables)
        rows = world.rows[table]
        if not rows:
            return
        keys = self.rng.sample(sorted(rows), min(len(rows), self.rng.randint(1, 4)))
        world.withdraw([rows.pop(k) for k in keys], self.read(world, step, "delete"))
        self.server.execute(world.db, f"DELETE FROM {table} WHERE id IN ({', '.join(map(str, keys))})")
        world.log.append(f"{step} deleted {len(keys)} row(s) of {table}")

    # --- runs -----------------------------------------------------------------------------------------------

    def run_killed_mid_read(self, world: World, step: int) -> None:
        """A run SIGKILLed at the N-th batch it reads (or ending before it reaches it)."""
        point = f"jdbc.batch_read:{self.rng.randint(1, 6)}"
        self.cli(world, RUN, step, "run killed mid-read", ok=(0, SIGKILLED), crash_at=point)

    def changed_mid_first_load(self, world: World, step: int) -> None:
        """A first load left in progress (under `commit_policy: successful` its first slice's tasks fail, the others
        publish; a table whose first load is complete is killed mid-read instead), then rows of that table change
        (inserts, updates, half the time deletes), then a run: it reads the rest up to the load's high, and the next
        run the changes."""
        assert isinstance(world, JdbcWorld)
        highs = self.highs(world)
        fresh = [t for t in self.tables if highs[t] is None and world.rows[t]]
        table = self.rng.choice(fresh or self.tables)
        if fresh:
            first = rf"^{table}\.start-\d+\.id\.start-" if self.split == "key" else rf"^{table}\.start-"
            self.run_failing(world, step, first)
            from gobblin_py.state.store import StateStore

            marks = StateStore(world.root / "work", JOB).watermarks().get(table, {})
            if self.highs(world)[table] is None and marks:
                world.log.append(f"{step} first load of {table} in progress: {sorted(marks)} published")
        else:
            self.run_killed_mid_read(world, step)
        self.produce(world, step, table)
        self.update(world, step, table)
        if self.rng.random() < 0.5:
            self.delete(world, step, table)
        self.cli(world, RUN, step, "run after rows changed mid-load", ok=(0,))

    def run_task_fails(self, world: World, step: int) -> None:
        """A run under `commit_policy: successful` whose tasks of one key slice (or of one table) fail."""
        table = self.rng.choice(self.tables)
        self.run_failing(world, step, rf"^{table}\.start-\d+\.id\.start-" if self.rng.random() < 0.5 else rf"^{table}\.")

    def run_failing(self, world: World, step: int, target: str) -> None:
        """A run under `commit_policy: successful` whose tasks of the work units matching `target` fail: exit 0 (none
        matched) or 1 naming the injected failure; the next clean run is held to the oracle."""
        job = self.job(world)
        job["job"]["commit_policy"] = "successful"
        job["converters"] = [{"class": FLAKY, "fail_attempts": 99, "only_workunit_matching": target}]
        path = world.root / "job.yaml"
        kept = path.read_text()
        path.write_text(yaml.safe_dump(self.with_lease(world, job), sort_keys=False))
        try:
            done = self.cli(world, RUN, step, f"run, tasks of {target!r} failing", ok=(0, 1))
        finally:
            path.write_text(kept)
        if done.returncode == 1 and "injected failure" not in done.stdout + done.stderr:
            raise Violation(self.seed, step, "run_task_fails", "exit 1 without the injected failure named: "
                                                               f"{(done.stdout + done.stderr)[-1200:]}")

    def run_killed_at_random(self, world: World, step: int) -> None:
        proc = start(world, RUN)
        time.sleep(self.rng.uniform(0.3, 3.0))
        world.log.append(f"{step} run killed at random -> {reap(proc, kill=True)}")

    def settle(self, world: World, step: int) -> None:
        """Before a pause: new rows in a table, so that the paused run has something to commit (a run with nothing new
        ends before most commit points)."""
        self.produce(world, step)

    def reset_to(self, world: World) -> tuple[list[str], Callable[[], set[int]]]:
        """Drop one table's watermarks: the next run reads every row it holds then again."""
        assert isinstance(world, JdbcWorld)
        table = self.rng.choice(self.tables)
        return ["--dataset", table], lambda: set(world.rows[table].values())


class PostgresTables:
    """A LocalPostgres with LocalMariaDB's `execute` (each statement committed at once), `url` and `create_database`."""

    def __init__(self, server: Any) -> None:
        self.server = server

    def url(self, database: str) -> str:
        return self.server.url(database)

    def create_database(self, name: str) -> str:
        return self.server.create_database(name)

    def execute(self, database: str, *statements: str) -> None:
        with self.server.connect(database) as conn:
            for statement in statements:
                conn.execute(statement)
