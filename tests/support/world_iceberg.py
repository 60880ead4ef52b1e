"""The Iceberg world of the model-based test (see world.py): the files world's input and rules (world_files.py), the
job writing Parquet published to one Iceberg table per dataset (the embedded pyiceberg SQL catalog), read back by
DuckDB over the files the table's current snapshot lists, and by a pyiceberg scan for the values.

Its own rules: another writer renames the column `v` (`update_schema().rename_column`), renamed back by the next such
step; another writer adds a column; `maintain` expires every snapshot but the current one, half the time killed at a
commit point (no id a reader saw may lose a copy). What the product does (tests/builtin/test_iceberg_publisher.py, issue 26 item 3):
our Parquet files carry no field ids, so a commit into a table whose column was renamed since is refused with exit 1
naming the column (`'v'`), never published under the old name; an added column is followed (the job's rows read NULL
there). So while `v` is renamed a run may fail, naming it; its rows keep their values under the new name (the oracle
reads `v` under its current name and wants `v<id>` for every row, never NULL); once it is renamed back, the job
publishes what it held back, each id once.

`state reset` is a rule as in the files world: the re-read writes the files of the names the table already lists
(found byte-identical by publishing), which the commit does not add again (a product bug until the model found it:
"Cannot add files that are already referenced by table" blocked the dataset for good)."""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from gobblin_py.state.store import StateStore
from support.world import RUN, Rule, Violation, World
from support.world_files import DATASETS, FilesHistory, FilesWorld, whole_lines

RENAMED = "v_renamed"


@dataclass
class IcebergWorld(FilesWorld):
    """The files world, and the name each table gives the job's column `v` now."""

    v_names: dict[str, str] = field(default_factory=dict)


class IcebergHistory(FilesHistory):
    """A history of a files → Iceberg job (see the module's docstring)."""

    produce_batches = False  # one file a step, as these histories were drawn (the files world draws packed units)

    kind = "iceberg"
    rotate_weight = 0  # a source rule: the files world draws it
    files_upkeep_weight = 0  # its own `maintain` below
    drop_weight = 0
    """How often `drop_table` is drawn: 0 (taken through `include`), so the fixed seeds draw what they drew before it."""
    world_type = IcebergWorld

    def writer(self) -> dict[str, Any]:
        return {"class": "parquet", "partition": {"column": "ts", "granularity": "DAY", "pattern": "yyyy/MM/dd"}}

    def publisher(self, world: World) -> dict[str, Any]:
        return {"class": "iceberg", "table": "db.{dataset}", "warehouse": str(world.root / "warehouse")}

    def rules(self) -> list[tuple[int, Rule]]:
        return [*super().rules(), (1, self.rename_column), (1, self.add_column), (1, self.maintain), (self.drop_weight, self.drop_table)]

    # --- the oracle -------------------------------------------------------------------------------------------

    def tables(self, world: World) -> dict[str, Any]:
        """dataset → its table, loaded by pyiceberg from the job's catalog (none before the job made it)."""
        from pyiceberg.catalog import load_catalog
        from pyiceberg.exceptions import NoSuchTableError

        db = world.root / "work" / "iceberg" / "catalog.db"
        if not db.exists():
            return {}
        catalog = load_catalog("gobblin_py", type="sql", uri=f"sqlite:///{db}")
        found = {}
        for dataset in DATASETS:
            try:
                found[dataset] = catalog.load_table(f"db.{dataset}")
            except NoSuchTableError:
                pass
        return found

    def output_ids(self, world: World) -> Counter[int]:
        import duckdb

        found: Counter[int] = Counter()
        for table in self.tables(world).values():
            paths = [task.file.file_path.removeprefix("file://") for task in table.scan().plan_files()]
            if paths:
                rows = duckdb.connect().execute("SELECT id FROM read_parquet(?, union_by_name = true)", [paths]).fetchall()
                found.update(r[0] for r in rows)
        return found

    def check(self, world: World, step: int, rule: str, final: bool) -> None:
        """Every id as often as owed (see History.check), and every row's `v`, under its current name, its own."""
        super().check(world, step, rule, final)
        assert isinstance(world, IcebergWorld)
        for dataset, table in self.tables(world).items():
            name = world.v_names.get(dataset, "v")
            rows = table.scan(selected_fields=("id", name)).to_arrow().to_pylist()
            wrong = [(r["id"], r[name]) for r in rows if r[name] != f"v{r['id']}"]
            if wrong:
                raise Violation(self.seed, step, rule, f"table db.{dataset}: {len(wrong)} row(s) read a wrong {name!r}, "
                                                       f"e.g. {wrong[:5]}")

    # --- rules ------------------------------------------------------------------------------------------------

    def rename_column(self, world: World, step: int) -> None:
        """Another writer renames `v` of one table (`ALTER TABLE … RENAME COLUMN`); the next such step renames it back."""
        assert isinstance(world, IcebergWorld)
        tables = self.tables(world)
        if "'v'" in world.broken:
            world.broken.pop("'v'")()
            return
        if not tables:
            return
        dataset = self.rng.choice(sorted(tables))

        def rename(old: str, new: str) -> None:
            with self.tables(world)[dataset].update_schema() as update:
                update.rename_column(old, new)
            world.v_names[dataset] = new

        rename("v", RENAMED)
        world.broken["'v'"] = lambda: rename(RENAMED, "v")
        world.log.append(f"{step} db.{dataset}: v renamed to {RENAMED}")

    def maintain(self, world: World, step: int) -> None:
        """`maintain --yes` expires every snapshot but the current one (the youngest age the CLI takes, --keep-last 1)
        and deletes the files only they listed: never a file the current snapshot lists, never a table a pending
        commit touches, so every id a reader saw stays and the next run or recover succeeds. Drawn apart (see
        `with_retention`): a retention of the older days, alone or with the expiry, and sometimes orphan removal."""
        actions, retire = self.with_retention(world, step, ["--expire-snapshots-older-than", "0s", "--keep-last", "1"])
        if retire and random.Random(f"{self.seed}/{step}/orphans").random() < 0.5:
            actions += ["--remove-orphans-older-than", "1h"]
        done = self.maintain_with(world, step, actions, may_lose=world.retiring(retire))
        self.retention_done(world, step, retire, done)
        expired = sum(line.startswith("    deleted: ") for line in done.stdout.splitlines())
        if expired:
            world.log.append(f"{step} maintain expired {expired} snapshot(s) and file(s)")

    def drop_table(self, world: World, step: int) -> None:
        """Another writer drops one table and purges its files: its rows are gone from what readers see while the
        dataset's watermarks are past them. The job must neither create a new table for its next commit nor replay a
        commit recorded before the drop into one: runs with data for it fail naming the table until the repair the
        messages give (the next such step, or the end): abandon what is pending of the dataset, `state reset` it, and
        every whole line of its files is owed once more than the table holds (World.reread)."""
        import shutil

        assert isinstance(world, IcebergWorld)
        broken = [d for d in DATASETS if dropped(d) in world.broken]
        if broken:
            world.broken.pop(dropped(broken[0]))
            return self.reset_after_drop(world, broken[0], step)
        tables = {d: t for d, t in self.tables(world).items() if world.v_names.get(d, "v") == "v"}
        if not tables:
            return
        dataset = self.rng.choice(sorted(tables))
        before = self.read(world, step, "drop table")
        self.catalog(world).drop_table(f"db.{dataset}")
        shutil.rmtree(world.root / "warehouse" / "db" / dataset, ignore_errors=True)
        after = self.read(world, step, "drop table")
        readable = {i for p in world.files(dataset) for i in whole_lines(p)}
        world.withdraw([i for i, n in before.items() if after[i] < n and i not in readable], after)
        world.broken[dropped(dataset)] = lambda: self.reset_after_drop(world, dataset, self.steps + 1)
        world.log.append(f"{step} db.{dataset} dropped and purged by another writer")
        self.cli(world, ["recover", "job.yaml", "--all"], step, "recover after drop", ok=(0, 1))
        state = StateStore(world.root / "work", "w").dataset_state(dataset) or {}
        if state.get("pinned"):  # its commits pinned the table: new rows for it must not go into a new table
            i, record = world.record(self.rng.randrange(3))
            (world.data / dataset / f"after-drop-{i}.jsonl").write_text(json.dumps(record) + "\n")
            world.produced([i])
            done = self.cli(world, RUN, step, "run after drop", ok=(1,))
            if dropped(dataset) not in done.stdout + done.stderr:
                raise Violation(self.seed, step, "run after drop", f"failed without naming {dropped(dataset)}")

    def reset_after_drop(self, world: IcebergWorld, dataset: str, step: int) -> None:
        """The repair of a dropped table (docs/publishers/iceberg.md): give up what is pending of the dataset, then
        `state reset --dataset D`."""
        self.reset_dataset(world, dataset, step, ["--dataset", dataset, "--abandon", "--yes"], "abandon after drop", "drop")

    def reset_repairs(self, dataset: str) -> list[str]:
        """A reset of a dataset whose table was dropped is its repair."""
        return [dropped(dataset)]

    def catalog(self, world: World) -> Any:
        from pyiceberg.catalog import load_catalog

        return load_catalog("gobblin_py", type="sql", uri=f"sqlite:///{world.root / 'work' / 'iceberg' / 'catalog.db'}")

    def add_column(self, world: World, step: int) -> None:
        """Another writer adds an optional column to one table: the job follows (its rows read NULL there)."""
        from pyiceberg.types import StringType

        tables = self.tables(world)
        if not tables:
            return
        dataset = self.rng.choice(sorted(tables))
        if "note" in [f.name for f in tables[dataset].schema().fields]:
            return
        with tables[dataset].update_schema() as update:
            update.add_column("note", StringType())
        world.log.append(f"{step} db.{dataset}: column note added")


def dropped(dataset: str) -> str:
    """What a run failing while the dataset's table is dropped names (the key of its repair in `World.broken`)."""
    return f"table db.{dataset}"
