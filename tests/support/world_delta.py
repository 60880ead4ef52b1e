"""The Delta world of the model-based test (see world.py): the files world's input and rules (world_files.py), the
job writing Parquet partitioned by day, published to one Delta Lake table per dataset (`lake/{dataset}`), read back by
delta-rs (`DeltaTable.to_pyarrow_table`) and by DuckDB over the files the table's log lists: both must agree. A table
not yet created reads as empty. The base `compact` rule runs the Delta compaction (one replace commit per partition).

Its own rules: another writer RESTOREs a table to an earlier version (runs must fail naming it until the documented
`state reset` of the dataset, after which its files are owed once more); and `maintain`, the table upkeep (docs/publishers/delta.md, "Upkeep"). Two hours pass first (every file
under the lake ages by two hours), then a vacuum at the smallest age the CLI takes (1h, below the table's own
retention) and/or a log expiry (a checkpoint, then the log entries below it), half the time killed at a commit point;
half the time a file another engine's failed write left under a table (in no version) is there, which a vacuum that
exits 0 must delete; and, drawn apart (every option alone and combined, the combined form the docs show among them),
`--retention` cut between two days of the data: the ids of the older days may go (and must be gone when it exits 0),
no other id may lose a copy. No action may break the next run or recover: a maintenance record never blocks a run. (delta-rs times a file the log removed by its remove action, which no aging moves: so a vacuum at 1h deletes
what no version references, the leftover and the files of abandoned commits, and not what a compaction replaced.)"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

from support.world import Rule, Violation, World
from support.world_files import DATASETS, FilesHistory, FilesWorld, whole_lines

AGED_S = 2 * 3600
"""How far `maintain` moves the lake's files back in time: past the 1h the vacuum and the log expiry are given."""


class DeltaHistory(FilesHistory):
    """A history of a files → Delta job (see the module's docstring)."""

    produce_batches = False  # one file a step, as these histories were drawn (the files world draws packed units)

    kind = "delta"
    rotate_weight = 0  # a source rule: the files world draws it
    files_upkeep_weight = 0  # its own `maintain` below

    def writer(self) -> dict[str, Any]:
        return {"class": "parquet", "partition": {"column": "ts", "granularity": "DAY", "pattern": "yyyy/MM/dd"}}

    def publisher(self, world: World) -> dict[str, Any]:
        return {"class": "delta", "table_uri": str(world.root / "lake" / "{dataset}")}

    def rules(self) -> list[tuple[int, Rule]]:
        return [*super().rules(), (1, self.maintain), (1, self.restore_by_another_writer)]

    # --- the oracle -------------------------------------------------------------------------------------------

    def tables(self, world: World) -> dict[str, Any]:
        """dataset → its Delta table at its latest version, opened by delta-rs (none before the job made it)."""
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        found = {}
        for dataset in DATASETS:
            try:
                found[dataset] = DeltaTable(str(world.root / "lake" / dataset))
            except TableNotFoundError:
                pass
        return found

    def output_ids(self, world: World) -> Counter[int]:
        import duckdb

        found: Counter[int] = Counter()
        for dataset, table in self.tables(world).items():
            delta = Counter(table.to_pyarrow_table(columns=["id"]).column("id").to_pylist())
            files = table.file_uris()
            duck = Counter(r[0] for r in duckdb.connect().execute(
                "SELECT id FROM read_parquet(?, union_by_name = true)", [files]).fetchall()) if files else Counter()
            if delta != duck:
                raise AssertionError(f"table {dataset}: delta-rs and DuckDB disagree on the copies of "
                                     f"{sorted((delta - duck) + (duck - delta))[:5]}")
            found += delta
        return found

    # --- rules ------------------------------------------------------------------------------------------------

    def restore_by_another_writer(self, world: World, step: int) -> None:
        """Another writer RESTOREs one table to an earlier version: the rows of the commits since are gone from it,
        while the dataset's watermarks are past them. The job's next commit of the dataset must fail closed naming
        the restore, never add on; the documented repair, `state reset --dataset D` (a `state_reset` of D, the next
        such step, or the end), reads every file of D again, owing each whole line once more (World.reread). Rows the
        restore removed whose file is gone upstream are taken back (World.withdraw); copies it brought back (a
        dedup compaction undone) raise what is expected of them."""
        assert isinstance(world, FilesWorld)
        broken = [d for d in DATASETS if restored(d) in world.broken]
        if broken:
            world.broken.pop(restored(broken[0]))
            return self.reset_after_restore(world, broken[0], step)
        tables = {d: t for d, t in self.tables(world).items() if t.version() >= 1}
        if not tables:
            return
        dataset = self.rng.choice(sorted(tables))
        version = self.rng.randrange(tables[dataset].version())
        before = self.read(world, step, "restore")
        try:
            tables[dataset].restore(version)
        except Exception as exc:  # a version whose log entry or files are gone: delta-rs refuses, nothing changed
            world.log.append(f"{step} lake/{dataset}: restore to version {version} refused by delta-rs: {exc}")
            return
        after = self.read(world, step, "restore")
        readable = {i for p in world.files(dataset) for i in whole_lines(p)}
        world.withdraw([i for i, n in before.items() if after[i] < n and i not in readable], after)
        for i, n in after.items():
            world.expected[i] = max(world.expected[i], n)
        world.broken[restored(dataset)] = lambda: self.reset_after_restore(world, dataset, self.steps + 1)
        world.log.append(f"{step} lake/{dataset} restored to version {version} by another writer")

    def reset_after_restore(self, world: FilesWorld, dataset: str, step: int) -> None:
        """The repair of a restore (docs/publishers/delta.md): recover what is pending, then `state reset --dataset D`."""
        self.reset_dataset(world, dataset, step, ["--all"], "recover after restore", "restore")

    def reset_repairs(self, dataset: str) -> list[str]:
        """A reset of a restored dataset is the repair of the restore."""
        return [restored(dataset)]

    def maintain(self, world: World, step: int) -> None:
        """Two hours pass; then `maintain --yes` vacuums (files removed from the log, or under the table and in no
        version, older than 1h) and/or expires the log below a new checkpoint: never a file the table lists or a
        pending commit names, so every id a reader saw stays, and the next run or recover succeeds."""
        tables = self.tables(world)
        leftover = None
        if tables and self.rng.random() < 0.5:  # what a failed write of another engine leaves under a table
            leftover = world.root / "lake" / self.rng.choice(sorted(tables)) / "data" / f"leftover-{step}.parquet"
            write_ids(leftover, [0])
        for path in (world.root / "lake").rglob("*"):
            if path.is_file() and not path.is_symlink():
                st = path.stat()
                os.utime(path, (st.st_atime - AGED_S, st.st_mtime - AGED_S))
        actions = self.rng.choice((["--remove-orphans-older-than", "1h"], ["--expire-snapshots-older-than", "1h"],
                                   ["--remove-orphans-older-than", "1h", "--expire-snapshots-older-than", "1h"]))
        actions, retire = self.with_retention(world, step, actions)
        done = self.maintain_with(world, step, [*actions, "--below-table-retention"], may_lose=world.retiring(retire))
        if leftover is not None and leftover.exists() and done.returncode == 0 and "--remove-orphans-older-than" in actions:
            raise Violation(self.seed, step, "maintain", f"the vacuum left {leftover}, in no version of the table and "
                                                         f"two hours old: {done.stdout[-800:]}")
        self.retention_done(world, step, retire, done)
        deleted = [line for line in done.stdout.splitlines() if line.startswith("    deleted: ")]
        expired = sum("/_delta_log/" in line for line in deleted)
        if expired:
            world.log.append(f"{step} maintain expired {expired} log entries")
        if len(deleted) > expired:
            world.log.append(f"{step} maintain vacuumed {len(deleted) - expired} file(s)")


def write_ids(path: Path, ids: list[int]) -> None:
    """A Parquet file of `ids` at `path` (written by pyarrow, not by gobblin-py)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), path)


def restored(dataset: str) -> str:
    """What a run names when the table of `dataset` was restored under it (the key of the break in World.broken)."""
    return f"lake/{dataset} was restored"
