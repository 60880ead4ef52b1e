"""The `iceberg` publisher in upsert mode under SIGKILL at every commit point of the first load (which creates the
table) and of the run of updates and deletes after it (which rewrites its data files), inside the table commit
(files written, snapshot not committed) and during the recovery that follows: after the next run the table equals
the source's state row by row by key, each key once, one gobblin-py snapshot per committed run, and no data file
on disk that no snapshot lists."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from builtin.test_iceberg_upsert import FIRST, SECOND, catalog, expected, read_back, upsert_job, write_changes
from support.jobs import write_job

from gobblin_py.builtin.publishers.iceberg.upsert import WRITTEN_POINT
from gobblin_py.state.store import StateStore
from gobblin_py.testing.crash import SIGKILLED, cli, commit_points, each_point, recovery_points

pytestmark = pytest.mark.crash
RUN = ["run", "job.yaml", "--in-process"]
STEPS = 3  # the table commit, the watermarks, the state (no error files)
POINTS = [*commit_points(STEPS), WRITTEN_POINT]


def _fresh(tmp: Path) -> Path:
    tmp.mkdir(parents=True)
    write_changes(tmp, "c-001.jsonl", FIRST)
    write_job(tmp, upsert_job(tmp))
    return tmp


def _ok(tmp: Path, point: str, crash_at: str | None = None) -> None:
    done = cli(RUN, tmp, crash_at=crash_at)
    assert done.returncode == (SIGKILLED if crash_at else 0), f"{point}: {done.stdout}{done.stderr}"


def _assert_equal_to_source(tmp: Path, point: str, *batches: list[dict]) -> None:
    table = catalog(tmp).load_table("db.customers")
    assert read_back(table) == expected(*batches), point
    summaries = [s.summary for s in table.snapshots()]
    assert len(summaries) == len(batches) and all(s.get("gobblin-py.commit-id") for s in summaries), \
        f"{point}: one snapshot per committed run"
    marks = StateStore(tmp / "work", "u").watermarks()["customers"]
    assert json.loads(summaries[-1]["gobblin-py.watermarks"]).items() <= marks.items(), point
    assert {f"c-{n + 1:03d}.jsonl" for n in range(len(batches))} == set(marks), point
    listed = set()
    for s in table.snapshots():
        listed |= {t.file.file_path.removeprefix("file://") for t in table.scan(snapshot_id=s.snapshot_id).plan_files()}
    on_disk = {str(p) for p in (tmp / "warehouse" / "db" / "customers" / "data").rglob("*.parquet")}
    assert on_disk == listed, f"{point}: files no snapshot lists: {sorted(on_disk - listed)}"
    assert not [p for p in (tmp / "work" / "task-output").rglob("*") if p.is_file()], f"{point}: task output left"


def test_killed_at_every_commit_point_of_the_first_load_the_table_is_the_source(tmp_path: Path) -> None:
    killed_at_each_point_of_a_first_load(tmp_path, POINTS, _fresh, _assert_equal_to_source)


def killed_at_each_point_of_a_first_load(root: Path, points: list[str], fresh: Callable[[Path], Path],
                                         equal: Callable[..., None]) -> None:
    """For each point, in a directory of its own (`fresh`): the first load killed there, then run again; `equal`
    checks the table against FIRST."""
    def check(n: int, point: str) -> None:
        tmp = fresh(root / str(n))
        _ok(tmp, point, crash_at=point)
        _ok(tmp, point)
        equal(tmp, point, FIRST)

    each_point(points, check)


def _variant(n: int) -> list[dict]:
    """SECOND's changes made the n-th run's own: other values, later times, new keys of its own."""
    return [{**r, "name": r["name"] and f"{r['name']}-p{n}", "updated_at": r["updated_at"] + 10 * n,
             **({"id": r["id"] + 5 * n} if r["id"] > 40 else {})} for r in SECOND]


def test_killed_at_every_commit_point_of_an_update_run_the_table_is_the_source(tmp_path: Path) -> None:
    tmp = _fresh(tmp_path / "t")
    batches = killed_at_each_point_of_update_runs(tmp, POINTS, _assert_equal_to_source)
    _ok(tmp, "a run with nothing new")  # changes nothing
    _assert_equal_to_source(tmp, "a run with nothing new", *batches)


def killed_at_each_point_of_update_runs(tmp: Path, points: list[str], equal: Callable[..., None]) -> list[list[dict]]:
    """A first load, then for each point a run of changes of its own killed there and run again; `equal` checks the
    table against every batch so far. The batches."""
    _ok(tmp, "first load")
    batches = [FIRST]
    for n, point in enumerate(points):  # each point kills a run of changes of its own, on the table the last left
        batches.append(_variant(n))
        write_changes(tmp, f"c-{len(batches):03d}.jsonl", batches[-1])
        _ok(tmp, point, crash_at=point)
        _ok(tmp, point)
        equal(tmp, point, *batches)
    return batches


def test_killed_inside_the_table_commit_then_during_recovery_the_next_run_applies_it_once(tmp_path: Path) -> None:
    for n, point in enumerate(recovery_points()):
        tmp = _fresh(tmp_path / str(n))
        _ok(tmp, "first load")
        write_changes(tmp, "c-002.jsonl", SECOND)
        _ok(tmp, WRITTEN_POINT, crash_at=WRITTEN_POINT)
        assert len(catalog(tmp).load_table("db.customers").snapshots()) == 1, "the files written, not committed"
        _ok(tmp, point, crash_at=point)
        _ok(tmp, point)
        _assert_equal_to_source(tmp, point, FIRST, SECOND)


def test_killed_while_creating_the_table_then_abandoned_the_next_run_creates_it(tmp_path: Path) -> None:
    """The CDC world's soak (seed 536226239): SIGKILL inside the first load's table commit, its metadata file written
    and the catalog not yet holding the table, then `recover --abandon`: every later run refused the table as "not in
    the catalog" forever. The next run now creates it and the table is the source."""
    from gobblin_py.builtin.publishers.iceberg.io import METADATA_POINT

    tmp = _fresh(tmp_path / "orphan")
    _ok(tmp, METADATA_POINT, crash_at=METADATA_POINT)
    assert list((tmp / "warehouse" / "db" / "customers" / "metadata").glob("*.metadata.json"))
    assert not catalog(tmp).table_exists("db.customers")
    abandoned = cli(["recover", "job.yaml", "--all", "--abandon", "--yes"], tmp)
    assert abandoned.returncode == 0, abandoned.stdout + abandoned.stderr
    _ok(tmp, "the run after the abandon")
    table = catalog(tmp).load_table("db.customers")
    assert read_back(table) == expected(FIRST)
    assert [s.summary.get("gobblin-py.commit-id") is not None for s in table.snapshots()] == [True]
