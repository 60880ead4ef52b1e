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

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from support.world import Rule, Violation, World
from support.world_files import DATASETS, FilesHistory, FilesWorld

RENAMED = "v_renamed"


@dataclass
class IcebergWorld(FilesWorld):
    """The files world, and the name each table gives the job's column `v` now."""

    v_names: dict[str, str] = field(default_factory=dict)


class IcebergHistory(FilesHistory):
    """A history of a files → Iceberg job (see the module's docstring)."""

    kind = "iceberg"
    rotate_weight = 0  # a source rule: the files world draws it
    world_type = IcebergWorld

    def writer(self) -> dict[str, Any]:
        return {"class": "parquet", "partition": {"column": "ts", "granularity": "DAY", "pattern": "yyyy/MM/dd"}}

    def publisher(self, world: World) -> dict[str, Any]:
        return {"class": "iceberg", "table": "db.{dataset}", "warehouse": str(world.root / "warehouse")}

    def rules(self) -> list[tuple[int, Rule]]:
        return [*super().rules(), (1, self.rename_column), (1, self.add_column), (1, self.maintain)]

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
        commit touches, so every id a reader saw stays and the next run or recover succeeds."""
        done = self.maintain_with(world, step, ["--expire-snapshots-older-than", "0s", "--keep-last", "1"])
        expired = sum(line.startswith("    deleted: ") for line in done.stdout.splitlines())
        if expired:
            world.log.append(f"{step} maintain expired {expired} snapshot(s) and file(s)")

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

