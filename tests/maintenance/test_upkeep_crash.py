"""Each Iceberg upkeep action of `gobblin-py maintain --yes` under SIGKILL at every commit point: the next `maintain`
(after a `run`, or not) completes it, and a user sees every record once at the current snapshot (pyiceberg and
DuckDB), the expired snapshots gone and the files only they listed deleted, the orphans gone, nothing a snapshot
lists deleted, and an empty commit log. Where a maintenance record was left pending, odd points recover it with `run` first (it
replays the record and appends nothing), the others with `maintain` itself. The tables are built in this
process before the kills start; only the kills and the recoveries are child processes."""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

import pytest
from maintenance.upkeep_jobs import (
    DAY_MS,
    FIRST_ID,
    JAN1,
    RUN,
    assert_intact,
    ok,
    read_ids,
    referenced,
    small_lakes,
    table,
)

from gobblin_py.builtin.publishers.iceberg.upkeep import MAINTENANCE_ID
from gobblin_py.commit.store import CommitStepStore
from gobblin_py.testing.crash import SIGKILLED, cli, commit_points, each_point

pytest.importorskip("pyiceberg")
pytestmark = pytest.mark.crash
DAY_S = 86400
JAN2_NOON_S = (JAN1 + DAY_MS + DAY_MS // 2) / 1000


def _ids(dataset: str, days: set[int]) -> Counter:
    """The ids `small_lake` put on January days `days` (0: the 1st): record n of each dataset is on day n % 3."""
    return Counter(FIRST_ID[dataset] + n for n in range(30) if n % 3 in days)


def _killed_then_completed(tmp: Path, args: list[str], n: int, point: str) -> None:
    """`maintain ARGS --yes` killed at `point`; then `maintain ARGS --yes` again, after a `run` where the kill left a
    record (odd `n`): the run replays it, appends nothing, and leaves the commit log empty; the sequences the kill
    came before are the next `maintain`'s."""
    killed = cli(["maintain", "job.yaml", *args, "--yes"], tmp, crash_at=point)
    assert killed.returncode == SIGKILLED, f"{point}: {killed.stdout}{killed.stderr}"
    if n % 2 and CommitStepStore(tmp / "work").datasets("t"):
        ok(cli(RUN, tmp), f"{point}: run: ")
        assert CommitStepStore(tmp / "work").datasets("t") == [], f"{point}: the run left the maintenance record pending"
    ok(cli(["maintain", "job.yaml", *args, "--yes"], tmp), f"{point}: maintain again: ")


def test_snapshot_expiry_killed_at_every_commit_point(tmp_path: Path) -> None:
    """Day 1 deleted from clicks by another writer, then every snapshot but the newest expired: the first snapshot
    goes, with its manifest list and whatever only it listed; the table reads days 2 and 3, each record once."""
    from pyiceberg.expressions import LessThan

    points = commit_points(2)  # the expiry's metadata commit, then the deletion of the files only it listed

    lakes = small_lakes(tmp_path, points)

    def check(n: int, point: str) -> None:
        tmp = lakes[n]
        table(tmp, "clicks").delete(LessThan("ts", "2026-01-02T00:00:00+00:00"))
        t = table(tmp, "clicks")
        [old, new] = sorted(t.snapshots(), key=lambda s: s.timestamp_ms)
        kept_files = referenced(t, [new])
        only_old = referenced(t, [old]) - kept_files
        assert only_old, "the first snapshot's manifest list is its own"
        _killed_then_completed(tmp, ["--expire-snapshots-older-than", "0s", "--dataset", "clicks"], n, point)
        t = table(tmp, "clicks")
        assert [s.snapshot_id for s in t.snapshots()] == [new.snapshot_id], point
        assert not [p for p in only_old if p.exists()], f"{point}: files only the expired snapshot listed are left"
        assert all(p.exists() for p in kept_files), point
        assert read_ids(t) == _ids("clicks", {1, 2}), point
        assert read_ids(table(tmp, "orders")) == _ids("orders", {0, 1, 2}), point
        assert_intact(tmp, point)

    each_point(points, check)


def test_orphan_removal_killed_at_every_commit_point(tmp_path: Path) -> None:
    """Old orphans in both tables (a data file, a manifest) go; a young one and every file a snapshot lists stay,
    however old (each table is one sequence: the kills fall in the first, between the two, and in the second)."""
    points = commit_points(2)

    lakes = small_lakes(tmp_path, points)

    def check(n: int, point: str) -> None:
        tmp = lakes[n]
        warehouse = tmp / "warehouse" / "db"
        old = [warehouse / "clicks" / "data" / "clicks" / "2026" / "01" / "01" / "orphan.parquet",
               warehouse / "clicks" / "metadata" / "orphan-m0.avro", warehouse / "orders" / "data" / "orphan.parquet"]
        young = warehouse / "orders" / "data" / "young.parquet"
        for p in (*old, young):
            p.write_bytes(b"not listed")
        long_ago = time.time() - 3 * DAY_S
        for p in warehouse.rglob("*"):  # everything old, as the sweep sees it: only the snapshots keep the table's files
            if p.is_file() and p != young:
                os.utime(p, (long_ago, long_ago))
        listed = {d: referenced(table(tmp, d)) for d in ("clicks", "orders")}
        _killed_then_completed(tmp, ["--remove-orphans-older-than", "1d"], n, point)
        assert not [p for p in old if p.exists()] and young.exists(), point
        for d, files in listed.items():
            assert all(p.exists() for p in files), f"{point}: {d}"
            assert read_ids(table(tmp, d)) == _ids(d, {0, 1, 2}), point
        assert_intact(tmp, point)

    each_point(points, check)


def test_table_retention_killed_at_every_commit_point(tmp_path: Path) -> None:
    """Retention with its cutoff at noon of January 2nd deletes day 1 from clicks in ONE snapshot (no second delete
    on the replay); orders, not selected, is untouched."""
    points = commit_points(1)

    lakes = small_lakes(tmp_path, points)

    def check(n: int, point: str) -> None:
        tmp = lakes[n]
        retention = f"{time.time() - JAN2_NOON_S:.0f}"
        _killed_then_completed(tmp, ["--retention", retention, "--dataset", "clicks"], n, point)
        t = table(tmp, "clicks")
        deletes = [s for s in t.snapshots() if s.summary.get(MAINTENANCE_ID)]
        assert len(t.snapshots()) == 2 and len(deletes) == 1, f"{point}: {[s.summary for s in t.snapshots()]}"
        assert read_ids(t) == _ids("clicks", {1, 2}), point
        orders = table(tmp, "orders")
        assert len(orders.snapshots()) == 1 and read_ids(orders) == _ids("orders", {0, 1, 2}), point
        assert_intact(tmp, point)

    each_point(points, check)
