"""What the CDC worlds share (world_cdc.py: postgres_cdc, world_mysql_cdc.py: mysql_cdc), each a database whose
tables a CDC job keeps in upsert tables of a history's **sink**: Iceberg (`publisher: {class: iceberg, table:
db.{dataset}}`, pyiceberg's SQL catalog) or Delta (`publisher: {class: delta, table_uri: <world>/lake/{dataset}}`),
the same key, `order_by`, `delete_when` and `truncate_when` either way. The CI histories keep Iceberg unless they say
otherwise; the soak draws the sink per history (`drawn_sink`). The oracle by key (each sink read by an engine we did
not write: pyiceberg, delta-rs), the commit points a run is killed at (each publisher's own only for its sink: the
Iceberg upsert's written files, the Delta publisher's columns added before its merge),
runs judged (a refusal names the changed table and a documented remedy, which the world applies), `state reset` of a
table, the final runs until every snapshot is done, and the changes to the data both databases take alike (DML
transactions, key updates, TRUNCATE, a transaction open across a run, a column added and dropped).

A subclass gives the database (`new_world`, `job`, `create_table`, `session`), what its source's state says of a
chunked snapshot (`snapshotting`), and what its refusals may name and the world can remedy beyond `state reset`
(`names`, `remedies`, `apply_remedies`)."""

from __future__ import annotations

import os
import random
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import yaml

from gobblin_py.builtin.publishers.delta.publisher import COLUMNS_POINT
from gobblin_py.testing.crash import SIGKILLED
from support.world import CRASH_POINTS, RUN, History, Violation, World, reap, start

JOB_NAME = "c"
"""`job.name` of every CDC world's job."""
FINAL_CHUNKS_PER_RUN = 10_000
SINKS = ("iceberg", "delta")
"""What a CDC world's job publishes into: Iceberg or Delta upsert tables."""
DELTA_POINTS = (*CRASH_POINTS, COLUMNS_POINT)
"""Where a run into Delta is killed: the commit protocol's points and the Delta publisher's own (between the commit
adding new columns and the merge; the merge writes and commits in one delta-rs call)."""


def drawn_sink(seed: int) -> str:
    """The sink of a soak's history, half and half, by a generator of its own (a seed draws every other step alike)."""
    return SINKS[random.Random(f"{seed}/sink").random() < 0.5]


@dataclass
class KeyedWorld(World):
    """The database and what the model knows of it: the tables, which the job reads, what changed since a clean run."""

    conn: Any = None                                      # autocommit session of the world's own changes
    columns: dict[str, list[str]] = field(default_factory=dict)  # table → its columns now, in order
    published: set[str] = field(default_factory=set)      # tables the job reads now
    disturbed: list[str] = field(default_factory=list)    # what changed since the last clean run that a run may name
    catalog_db: str = ""                                  # a leased history's Iceberg catalog database ("": SQLite)
    catalog_server: Any = None                            # the PostgreSQL holding `catalog_db`
    next_key: int = 1000
    next_column: int = 1
    clean: bool = False                                   # the step's last run exited 0: hold it to the oracle

    def sql(self, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        cur = self.conn.execute(query, params)
        return cur.fetchall() if cur.description else []

    def keys(self, table: str) -> list[int]:
        return [r[0] for r in self.sql(f"SELECT id FROM {table} ORDER BY id")]

    def key(self) -> int:
        self.next_key += 1
        return self.next_key


def dataset_table(dataset: str) -> str:
    """The Iceberg table of `schema.table` under `table: db.{dataset}` in a one-level catalog."""
    return f"db.{dataset.replace('.', '_')}"


class KeyedHistory(History):
    """A history of a CDC job into Iceberg or Delta upsert tables (`sink`, see the module's docstring)."""

    iceberg_points: ClassVar[tuple[str, ...]] = CRASH_POINTS
    """Where a run into Iceberg is killed: the commit protocol's points and the Iceberg publisher's own."""

    def __init__(self, seed: int, steps: int, include: tuple[str, ...] = (), pauses: tuple[int, ...] = (),
                 sink: str = "iceberg") -> None:
        super().__init__(seed, steps, include, pauses)
        if sink not in SINKS:
            raise ValueError(f"sink {sink!r}: one of {SINKS}")
        self.sink = sink
        self.crash_points = self.iceberg_points if sink == "iceberg" else DELTA_POINTS

    remedies: ClassVar[tuple[str, ...]] = ("state reset",)
    """What a refusal must say to be a documented remedy (the source's page, "Failure modes, and what to do")."""
    ddl_refused: ClassVar[bool] = False
    """A column added (without a default) or dropped is refused until the table is snapshotted again."""
    chunked: bool = False
    chunks_per_run: int = 0

    # --- what a CDC world gives -----------------------------------------------------------------------------------

    def snapshotting(self, world: KeyedWorld) -> set[str]:
        """The tables whose chunked snapshot is not done, as the committed state says (their output holds only the
        chunks read so far)."""
        raise NotImplementedError

    def session(self, world: KeyedWorld) -> Any:
        """A second session, not autocommit (`execute`, `commit`, `close`), or None where none may be open now."""
        raise NotImplementedError

    def names(self, world: KeyedWorld) -> list[str]:
        """What else than a table a refusal may name (the publication, the slot)."""
        return []

    def apply_remedies(self, world: KeyedWorld, said: str) -> list[str]:
        """The remedies other than `state reset` a refusal named, applied; what they were."""
        return []

    def shared_catalog(self, world: KeyedWorld, server: Any, name: str) -> None:
        """A leased history's catalog: database `name` of PostgreSQL `server` (two hosts share a catalog service, not a
        SQLite file: a frozen driver holds its write lock), its password in libpq's environment for the CLI children."""
        from gobblin_py.demo.pg_server import PASSWORD

        os.environ["PGPASSWORD"] = PASSWORD
        world.catalog_server = server
        world.catalog_db = server.create_database(name)

    def publisher(self, world: KeyedWorld, order_by: list[str]) -> dict[str, Any]:
        """The job's `publisher`: an upsert table per dataset of the history's sink, kept by `id` in `order_by`, the
        source's deletes and truncates applied."""
        upsert = {"mode": "upsert", "key": ["id"], "order_by": order_by,
                  "delete_when": {"column": "_op", "equals": ["delete"]},
                  "truncate_when": {"column": "_op", "equals": ["truncate"]}}
        if self.sink == "delta":
            return {"class": "delta", "table_uri": str(world.root / "lake" / "{dataset}"), **upsert}
        return {"class": "iceberg", "table": "db.{dataset}", "warehouse": str(world.root / "warehouse"), **upsert,
                **self.catalog_setting(world)}

    def needs_catalog(self) -> bool:
        """A leased Iceberg history shares a catalog service; a Delta table needs none."""
        return self.leased and self.sink == "iceberg"

    def catalog_setting(self, world: KeyedWorld) -> dict[str, Any]:
        """The publisher's `catalog` setting of a leased history ({} otherwise: the embedded SQLite catalog)."""
        return {"catalog": {"name": "shared", "type": "sql", "uri": self.catalog_uri(world)}} if world.catalog_db else {}

    def catalog_uri(self, world: KeyedWorld, password: bool = False) -> str:
        """The SQLAlchemy URL of a leased history's catalog database (with the password: the oracle's own reader)."""
        from gobblin_py.demo.pg_server import PASSWORD, USER

        uri = world.catalog_server.url(world.catalog_db).replace("postgresql://", "postgresql+psycopg://")
        return uri.replace(f"//{USER}@", f"//{USER}:{PASSWORD}@") if password else uri

    # --- the oracle -----------------------------------------------------------------------------------------------

    def output_ids(self, world: World) -> Any:
        raise NotImplementedError  # the oracle is by key: `check`

    def table_name(self, dataset: str) -> str:
        """The sink's table of `dataset`, as messages name it."""
        return f"Delta table lake/{dataset}" if self.sink == "delta" else f"Iceberg table {dataset_table(dataset)}"

    def sink_rows(self, world: KeyedWorld, dataset: str, step: int, rule: str) -> tuple[list[str], list[dict[str, Any]]] | None:
        """The sink's table of `dataset`: its columns and rows as an independent reader reads them, or None before the
        job made it."""
        read = self.delta_rows if self.sink == "delta" else self.iceberg_rows
        return read(world, dataset, step, rule)

    def delta_rows(self, world: KeyedWorld, dataset: str, step: int, rule: str) -> tuple[list[str], list[dict[str, Any]]] | None:
        """The Delta table's columns and rows as delta-rs reads them, or None before the job made it."""
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        try:
            table = DeltaTable(str(world.root / "lake" / dataset)).to_pyarrow_table()
        except TableNotFoundError:
            return None
        except Exception as exc:  # what the independent reader raises is the finding, whatever its type
            raise Violation(self.seed, step, rule, f"the reader failed on {dataset}: {type(exc).__name__}: {exc}") from exc
        return table.column_names, table.to_pylist()

    def iceberg_rows(self, world: KeyedWorld, dataset: str, step: int, rule: str) -> tuple[list[str], list[dict[str, Any]]] | None:
        """The Iceberg table's columns and rows as pyiceberg reads them, or None before the job made it."""
        from pyiceberg.catalog import load_catalog
        from pyiceberg.exceptions import NoSuchTableError

        db = world.root / "work" / "iceberg" / "catalog.db"
        if not world.catalog_db and not db.exists():
            return None
        uri = self.catalog_uri(world, password=True) if world.catalog_db else f"sqlite:///{db}"
        try:
            table = load_catalog("shared" if world.catalog_db else "gobblin_py", type="sql", uri=uri).load_table(
                dataset_table(dataset))  # a SQL catalog's tables are keyed by the catalog's name
        except NoSuchTableError:
            return None
        except Exception as exc:  # what the independent reader raises is the finding, whatever its type
            raise Violation(self.seed, step, rule, f"the reader failed on {dataset}: {type(exc).__name__}: {exc}") from exc
        names = [f.name for f in table.schema().fields]
        try:
            return names, table.scan().to_arrow().to_pylist()
        except Exception as exc:
            raise Violation(self.seed, step, rule, f"the reader failed on {dataset}: {type(exc).__name__}: {exc}") from exc

    def check(self, world: World, step: int, rule: str, final: bool) -> None:
        """No key twice in any table of the sink; after a run that exited 0, each published table's table in the sink
        equals the source by key."""
        assert isinstance(world, KeyedWorld)
        streamed = 0  # rows the oracle held to their source that a change from the log wrote (not a snapshot's read)
        for dataset in sorted(world.columns):
            read = self.sink_rows(world, dataset, step, rule)
            if read is None:
                if world.clean and dataset in world.published:
                    raise Violation(self.seed, step, rule, f"{dataset}: no {self.table_name(dataset)} after a run that "
                                                           "exited 0")
                continue
            names, rows = read
            keys = [r["id"] for r in rows]
            twice = sorted({k for k in keys if keys.count(k) > 1})
            if twice or None in keys:
                raise Violation(self.seed, step, rule, f"{self.table_name(dataset)}: key(s) {twice[:5]} twice (or a null "
                                                       f"key: {None in keys})")
            if not world.clean or dataset not in world.published or dataset in self.snapshotting(world):
                continue
            columns = world.columns[dataset]
            streamed += sum(1 for r in rows if r.get("_op", "read") != "read")
            source = {r[0]: r for r in world.sql(f"SELECT {', '.join(columns)} FROM {dataset}")}
            table = {r["id"]: tuple(r.get(c) if c in names else None for c in columns) for r in rows}
            if table != source:
                lost = sorted(set(source) - set(table))
                extra = sorted(set(table) - set(source))
                wrong = sorted(k for k in set(table) & set(source) if table[k] != source[k])
                raise Violation(self.seed, step, rule, f"{self.table_name(dataset)} is not {dataset} after a run that exited 0: "
                                f"{len(lost)} key(s) missing {lost[:5]}, {len(extra)} key(s) the source no longer has "
                                f"{extra[:5]}, {len(wrong)} key(s) with other values, e.g. "
                                + "; ".join(f"{k}: {short(table[k])} (source {short(source[k])})" for k in wrong[:3]))
        if world.clean:
            world.log.append(f"{step}   oracle: {', '.join(f'{d}={len(world.keys(d))} rows' for d in sorted(world.published))}"
                             f" equal ({streamed} written from the log)")
        world.clean = False

    # --- runs, judged -----------------------------------------------------------------------------------------------

    def may_fail(self, world: KeyedWorld) -> list[str]:
        """What a run may fail on now: the changes since the last clean run."""
        return list(world.disturbed)

    def cleaned(self, world: KeyedWorld) -> None:
        """After a run that exited 0: what the world forgets with `disturbed`."""

    def _run(self, world: KeyedWorld, step: int, rule: str, point: str | None,
             before_remedy: Callable[[], None] = lambda: None, args: list[str] = RUN) -> subprocess.CompletedProcess[str]:
        """A run (killed at `point`): exit 0 (held to the oracle), or, while the world changed, 1 or 2 naming what
        changed and a documented remedy, which the world then applies."""
        allowed = self.may_fail(world)
        ok = (0, 1, 2) if allowed else (0,)
        done = self.cli(world, args, step, rule, ok=(*ok, SIGKILLED) if point else ok, crash_at=point)
        if done.returncode == 0:
            world.clean = True
            world.disturbed.clear()
            self.cleaned(world)
        elif done.returncode in (1, 2):
            before_remedy()
            self.remedy(world, step, rule, done)
        return done

    def remedy(self, world: KeyedWorld, step: int, rule: str, done: subprocess.CompletedProcess[str]) -> None:
        """A refused run names a table (or the publication, the slot: `names`) and a documented remedy: applied here
        (`apply_remedies`, then `state reset` of each table whose reset it names)."""
        said = " ".join((done.stdout + done.stderr).split())
        world.log.append(f"    said: {said[-1500:]}")  # enough for two tables' refusals in one run
        named = [n for n in [*world.columns, *self.names(world)] if n in said]
        if not named or not any(r in said for r in self.remedies):
            raise Violation(self.seed, step, rule, f"exit {done.returncode} without naming a table, the publication or "
                                                   f"the slot and a documented remedy (changed: {self.may_fail(world)}): "
                                                   f"{said[-1500:]}")
        applied = self.apply_remedies(world, said)
        for dataset in dict.fromkeys(d for d in re.findall(r"--dataset ([\w.]+)", said) if d in world.columns):
            applied.append(f"state reset {dataset} -> {self.reset(world, step, f'remedy: state reset {dataset}', dataset)}")
            self.was_reset(world, dataset, said)
        if not applied:
            raise Violation(self.seed, step, rule, f"exit {done.returncode}: no remedy the world can apply in: {said[-1500:]}")
        world.log.append(f"    remedy: {'; '.join(applied)}")

    def was_reset(self, world: KeyedWorld, dataset: str, said: str) -> None:
        """After the remedy `state reset --dataset dataset` of a refusal that said `said`."""

    def run_job(self, world: World, step: int) -> None:
        assert isinstance(world, KeyedWorld)
        self._run(world, step, "run", None)

    def run_killed_at_point(self, world: World, step: int) -> None:
        assert isinstance(world, KeyedWorld)
        self._run(world, step, "run killed", self.rng.choice(self.crash_points))

    def settle(self, world: World, step: int) -> None:
        """While changes wait that a run may refuse (exit 1 or 2, naming the remedy this world applies in `_run`),
        runs take them and their remedies (at most one run per table and two more: a purged binlog was refused one
        table per run until mysql_cdc named every table it stops in one refusal). (The pause judged a refusal of the publication's flags, exit 2, beside a frozen driver as a
        failure until the soak found it: seed 1414546503; and, with three runs at most, the fourth table's refusal of a
        purge: mysql_cdc seed 2935234553.)"""
        assert isinstance(world, KeyedWorld)
        for _ in range(len(world.columns) + 2):
            if not self.may_fail(world) or self._run(world, step, "run before a pause", None).returncode == 0:
                break

    def run_killed_at_random(self, world: World, step: int) -> None:
        proc = start(world, RUN)
        time.sleep(self.rng.uniform(0.3, 3.0))
        world.log.append(f"{step} run killed at random -> {reap(proc, kill=True)}")

    def state_reset(self, world: World, step: int) -> None:
        """The user snapshots a table again: its table's rows in the sink are replaced by the snapshot."""
        assert isinstance(world, KeyedWorld)
        if world.published:
            self.reset(world, step, "state reset", self.rng.choice(sorted(world.published)))

    def reset(self, world: KeyedWorld, step: int, rule: str, dataset: str) -> int:
        """`state reset --dataset D`: exit 0, or 2 for a table never committed (nothing to reset); refused (exit 1)
        while a commit of the table is pending, naming `recover`, which the world then runs before the reset."""
        args = ["state", "reset", "job.yaml", "--dataset", dataset, "--yes"]
        done = self.cli(world, args, step, rule, ok=(0, 1, 2))
        if done.returncode == 1:
            if f"recover job.yaml --dataset {dataset}" not in done.stdout + done.stderr:
                raise Violation(self.seed, step, rule, f"state reset of {dataset} failed: {(done.stdout + done.stderr)[-800:]}")
            self.cli(world, ["recover", "job.yaml", "--dataset", dataset], step, f"{rule}: recover first", ok=(0,))
            done = self.cli(world, args, step, rule, ok=(0, 2))
        if done.returncode == 2 and f"no committed state for dataset '{dataset}'" not in done.stdout + done.stderr:
            raise Violation(self.seed, step, rule, f"state reset of {dataset} refused: {(done.stdout + done.stderr)[-800:]}")
        return done.returncode

    def finish(self, world: World) -> None:
        """Recover, then runs (each refusal remedied) until one exits 0, held to the oracle."""
        assert isinstance(world, KeyedWorld)
        self.cli(world, ["recover", "job.yaml", "--all"], self.steps + 1, "recover", ok=(0, 1))
        if self.chunked:  # the rest of every snapshot in the next run
            self.chunks_per_run = FINAL_CHUNKS_PER_RUN
            (world.root / "job.yaml").write_text(yaml.safe_dump(self.with_lease(world, self.job(world)), sort_keys=False))
        for _ in range(10 if self.chunked else 6):
            if self._run(world, self.steps + 1, "final run", None).returncode == 0:
                pending = self.snapshotting(world) & world.published
                self.check(world, self.steps + 1, "final", final=True)
                if not pending:
                    return
                world.log.append(f"{self.steps + 1}   chunked snapshot of {', '.join(sorted(pending))} goes on")
        raise Violation(self.seed, self.steps + 1, "final run", "no run exited 0 with every snapshot done after "
                                                               f"{10 if self.chunked else 6} runs and their remedies")

    # --- changes to the data --------------------------------------------------------------------------------------

    def pick(self, world: KeyedWorld) -> str:
        """A table to change: mostly a published one."""
        tables = sorted(world.published) if world.published and self.rng.random() < 0.9 else sorted(world.columns)
        return self.rng.choice(tables)

    def changes(self, world: KeyedWorld, conn: Any, table: str, count: int) -> list[str]:
        """`count` random changes to `table` on `conn` (inside the caller's transaction); what they were."""
        done: list[str] = []
        keys = [r[0] for r in conn.execute(f"SELECT id FROM {table}").fetchall()]
        extra = [c for c in world.columns[table] if c not in ("id", "v", "n")]
        for _ in range(count):
            dice = self.rng.random()
            if dice < 0.3 or not keys:
                key = world.key()
                conn.execute(f"INSERT INTO {table} (id, v, n) VALUES (%s, %s, %s)", (key, f"i{key}", self.rng.randint(0, 99)))
                keys.append(key)
                done.append("insert")
            elif dice < 0.6:
                key = self.rng.choice(keys)
                for _ in range(self.rng.randint(1, 3)):  # the same key again in the same transaction
                    conn.execute(f"UPDATE {table} SET v = %s, n = n + 1 WHERE id = %s", (f"u{key}.{world.key()}", key))
                done.append("update")
            elif dice < 0.7:
                key = self.rng.choice(keys)  # v left as it is (a TOASTed v unchanged)
                sets = ", ".join(["n = n + 1", *(f"{c} = {self.number(c)}" for c in extra[:1])])
                conn.execute(f"UPDATE {table} SET {sets} WHERE id = %s", (key,))
                done.append("update n")
            elif dice < 0.88:
                key = keys.pop(self.rng.randrange(len(keys)))
                conn.execute(f"DELETE FROM {table} WHERE id = %s", (key,))
                done.append("delete")
            else:
                key = self.rng.choice(keys)  # deleted and inserted again, other values
                conn.execute(f"DELETE FROM {table} WHERE id = %s", (key,))
                conn.execute(f"INSERT INTO {table} (id, v, n) VALUES (%s, %s, %s)", (key, f"again{key}.{world.key()}", -1))
                done.append("delete+insert")
        return done

    def number(self, column: str) -> int:
        """A value `changes` sets an added column to: 0–9."""
        return self.rng.randint(0, 9)

    def produce(self, world: World, step: int) -> None:
        self.dml(world, step)

    def dml(self, world: World, step: int) -> None:
        """One to four transactions of random changes, to one table or two."""
        assert isinstance(world, KeyedWorld)
        for _ in range(self.rng.randint(1, 4)):
            tables = {self.pick(world) for _ in range(self.rng.randint(1, 2))}
            with world.conn.transaction():
                what = {t: self.changes(world, world.conn, t, self.rng.randint(1, 6)) for t in sorted(tables)}
            world.log.append(f"{step} dml: " + "; ".join(f"{t} {', '.join(w)}" for t, w in what.items()))


    def spanning(self, world: World, step: int) -> None:
        """Changes in a transaction begun before a run (plain, or killed at a commit point) and committed after it,
        with committed changes to the other tables meanwhile: the run must not see the open ones, the next one must.
        (Not where `session` gives none. The transaction commits before a refused run's remedy, whose ALTER TABLE
        would wait for its locks.)"""
        assert isinstance(world, KeyedWorld)
        other = self.session(world)
        if other is None:
            return self.dml(world, step)
        try:
            table = self.pick(world)
            what = self.changes(world, other, table, self.rng.randint(1, 6))
            world.log.append(f"{step} spanning transaction open on {table}: {', '.join(what)}")
            for t in sorted(world.published - {table}):  # the open transaction holds its rows' locks: other tables
                with world.conn.transaction():
                    self.changes(world, world.conn, t, self.rng.randint(1, 4))
            point = self.rng.choice(self.crash_points) if self.rng.random() < 0.3 else None
            self._run(world, step, "run killed" if point else "run", point, before_remedy=other.commit)
            self.check(world, step, "run with a transaction open", final=False)
            other.commit()
            world.log.append(f"{step} spanning transaction committed")
        finally:
            other.close()

    def key_update(self, world: World, step: int) -> None:
        """`UPDATE t SET id = new WHERE id = old`: alone, moved and moved back in one transaction, or moved with a
        new row inserted at the old key; sometimes with other changes around it."""
        assert isinstance(world, KeyedWorld)
        table = self.pick(world)
        keys = world.keys(table)
        if not keys:
            return self.dml(world, step)
        old, new = self.rng.choice(keys), world.key()
        how = self.rng.choice(("moved", "moved and back", "moved, old key inserted", "moved twice"))
        with world.conn.transaction():
            if self.rng.random() < 0.3:
                self.changes(world, world.conn, table, 2)
                if not world.sql(f"SELECT 1 FROM {table} WHERE id = %s", (old,)):
                    world.sql(f"INSERT INTO {table} (id, v, n) VALUES (%s, 'k', 0)", (old,))
            world.sql(f"UPDATE {table} SET id = %s, n = n + 1 WHERE id = %s", (new, old))
            if how == "moved and back":
                world.sql(f"UPDATE {table} SET id = %s WHERE id = %s", (old, new))
            elif how == "moved, old key inserted":
                world.sql(f"INSERT INTO {table} (id, v, n) VALUES (%s, 'at the old key', 0)", (old,))
            elif how == "moved twice":
                world.sql(f"UPDATE {table} SET id = %s WHERE id = %s", (world.key(), new))
        world.log.append(f"{step} key update on {table}: {old} -> {new} ({how})")

    def truncate(self, world: World, step: int) -> None:
        """TRUNCATE alone, or inside a transaction between inserts and updates."""
        assert isinstance(world, KeyedWorld)
        table = self.pick(world)
        with world.conn.transaction():
            if self.rng.random() < 0.5:
                self.changes(world, world.conn, table, 3)
                world.sql(f"TRUNCATE {table}")
                self.changes(world, world.conn, table, 3)
                how = "between changes"
            else:
                world.sql(f"TRUNCATE {table}")
                how = "alone"
        world.log.append(f"{step} truncate {table} {how}")

    # --- DDL -----------------------------------------------------------------------------------------------------------

    def add_column(self, world: World, step: int, default: bool = False) -> None:
        """ALTER TABLE … ADD COLUMN cK int, then changes that set it."""
        assert isinstance(world, KeyedWorld)
        table = self.pick(world)
        column = f"c{world.next_column}"
        world.next_column += 1
        world.sql(f"ALTER TABLE {table} ADD COLUMN {column} int{' DEFAULT 7' if default else ''}")
        world.columns[table].append(column)
        if default or self.ddl_refused:  # with a DEFAULT every existing row reads 7 with no change in the log: the table
            # fails until it is snapshotted again
            world.disturbed.append(f"column {column} added to {table}{' with a DEFAULT' if default else ''}")
        with world.conn.transaction():
            self.changes(world, world.conn, table, 3)
        world.log.append(f"{step} column {column} added to {table}{' DEFAULT 7' if default else ''}")

    def altered(self, world: KeyedWorld, step: int, table: str, ddl: str, disturbed: str, said: str) -> None:
        """`ddl` run on `table` and `disturbed` noted, then half the time changes to the table; `said` logged."""
        world.sql(ddl)
        world.disturbed.append(disturbed)
        if self.rng.random() < 0.5:
            with world.conn.transaction():
                self.changes(world, world.conn, table, 3)
        world.log.append(f"{step} {said}")

    def drop_column(self, world: World, step: int) -> None:
        """An added column dropped, after changes that set it."""
        assert isinstance(world, KeyedWorld)
        added = [(t, c) for t, cs in sorted(world.columns.items()) for c in cs if c not in ("id", "v", "n")]
        if not added:
            return self.add_column(world, step)
        table, column = self.rng.choice(added)
        keys = world.keys(table)
        if keys and self.rng.random() < 0.7:
            world.sql(f"UPDATE {table} SET {column} = 3 WHERE id = %s", (self.rng.choice(keys),))
        world.sql(f"ALTER TABLE {table} DROP COLUMN {column}")
        world.columns[table].remove(column)
        world.disturbed.append(f"column {column} dropped from {table}")
        world.log.append(f"{step} column {column} dropped from {table}")


def short(row: tuple[Any, ...]) -> str:
    return repr(tuple(v[:20] + "…" if isinstance(v, str) and len(v) > 20 else v for v in row))
