"""Upsert mode's first snapshot into an empty Iceberg table, which adds the task files as they are
(`publishers/iceberg/first_snapshot.py`): SIGKILL at every point of its commit, then run again, leaves every key
once and one snapshot (read back by pyiceberg and DuckDB); a writer adding rows between the commit's load of the
table and its Iceberg commit makes it fall back to the rewrite (no key twice, none lost); a table holding rows is
upserted by the rewrite."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from builtin.test_iceberg_upsert import catalog, expected, read_back, upsert_job, write_changes
from commit.test_iceberg_upsert_crash import STEPS
from support.jobs import write_job

from gobblin_py.builtin.publishers.iceberg.first_snapshot import COPIED_POINT, ISOLATION, PREFIX
from gobblin_py.builtin.publishers.iceberg.upsert import WRITTEN_POINT
from gobblin_py.crashpoints import ENV, PAUSE_ENV
from gobblin_py.state.store import StateStore
from gobblin_py.testing.crash import SIGKILLED, cli, commit_points, each_point

pytestmark = pytest.mark.crash
RUN = ["run", "job.yaml", "--in-process"]
FILES = {f"c-001-{n}.jsonl": [{"id": i, "name": f"n{i}", "city": "c0", "op": "c", "updated_at": 1} for i in keys]
         for n, keys in enumerate((range(1, 16), range(16, 31), range(31, 41)))}
"""A snapshot in three files (three tasks, three change files): no key twice, no delete."""
BATCH = [r for rows in FILES.values() for r in rows]
DELETES = [{"id": i, "name": None, "city": None, "op": "d", "updated_at": 0} for i in (1, 2)]
"""A first run that leaves the table created and empty (a snapshot, no data file)."""


def _names(tmp: Path) -> list[str]:
    table = catalog(tmp).load_table("db.customers")
    return sorted(t.file.file_path.rsplit("/", 1)[-1] for t in table.scan().plan_files())


def _fresh(tmp: Path) -> Path:
    tmp.mkdir(parents=True)
    for name, rows in FILES.items():
        write_changes(tmp, name, rows)
    write_job(tmp, upsert_job(tmp))
    return tmp


def _ok(tmp: Path, point: str, crash_at: str | None = None) -> None:
    done = cli(RUN, tmp, crash_at=crash_at)
    assert done.returncode == (SIGKILLED if crash_at else 0), f"{point}: {done.stdout}{done.stderr}"


def test_a_first_snapshot_killed_at_every_point_of_its_commit_is_added_once(tmp_path: Path) -> None:
    points = [*commit_points(STEPS), f"{COPIED_POINT}:1", f"{COPIED_POINT}:3", WRITTEN_POINT]

    def check(n: int, point: str) -> None:
        tmp = _fresh(tmp_path / str(n))
        _ok(tmp, point, crash_at=point)
        _ok(tmp, point)
        _equal_once(tmp, point)
        names = _names(tmp)
        assert len(names) == 3 and all(f.startswith(PREFIX) for f in names), f"{point}: added as written: {names}"

    each_point(points, check)


def test_a_row_added_between_the_commits_load_and_its_commit_makes_it_rewrite(tmp_path: Path) -> None:
    import pyarrow as pa

    tmp = tmp_path / "t"
    tmp.mkdir()
    write_changes(tmp, "c-000.jsonl", DELETES)
    write_job(tmp, upsert_job(tmp))
    _ok(tmp, "the run that creates the table empty")
    assert read_back(catalog(tmp).load_table("db.customers")) == {}
    for name, rows in FILES.items():
        write_changes(tmp, name, rows)
    env = {**{k: v for k, v in os.environ.items() if k not in (ENV, PAUSE_ENV)}, PAUSE_ENV: f"{COPIED_POINT}:3"}
    run = subprocess.Popen([sys.executable, "-m", "gobblin_py.cli.main", *RUN], cwd=tmp, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 240
        while not _stopped(run.pid):
            assert run.poll() is None and time.monotonic() < deadline, "the run never reached the commit"
            time.sleep(0.1)
        table = catalog(tmp).load_table("db.customers")  # another writer, while the commit holds its load of the table
        other = [{"id": 1, "name": "other", "city": "x", "op": "c", "updated_at": 9},
                 {"id": 999, "name": "other", "city": "x", "op": "c", "updated_at": 9}]
        table.append(pa.Table.from_pylist(other, schema=table.schema().as_arrow()))
    finally:
        run.send_signal(signal.SIGCONT)
    out, _ = run.communicate(timeout=240)
    assert run.returncode == 0, out
    table = catalog(tmp).load_table("db.customers")
    rows = read_back(table)  # each key once (read_back asserts it), by pyiceberg and DuckDB
    assert rows == {**expected(BATCH), 999: other[1]}, "the other writer's new key kept, key 1 the commit's (it came last)"
    assert not any(f.startswith(PREFIX) for f in _names(tmp)), "the rewrite, not the files as written"
    on_disk = {p.name for p in (tmp / "warehouse" / "db" / "customers" / "data").rglob("*.parquet")}
    assert not any(n.startswith(PREFIX) for n in on_disk), "the attempt's copies removed"


def test_a_killed_first_snapshot_replayed_into_a_table_another_writer_filled_meanwhile_leaves_no_copy(tmp_path: Path) -> None:
    """Killed with its files copied into the table and not added; another writer adds rows; the replay finds the
    table holding them and rewrites: the copies the killed attempt left (named from the commit) are removed."""
    import pyarrow as pa

    tmp = tmp_path / "t"
    tmp.mkdir()
    write_changes(tmp, "c-000.jsonl", DELETES)
    write_job(tmp, upsert_job(tmp))
    _ok(tmp, "the run that creates the table empty")
    for name, rows in FILES.items():
        write_changes(tmp, name, rows)
    _ok(tmp, WRITTEN_POINT, crash_at=WRITTEN_POINT)
    data = tmp / "warehouse" / "db" / "customers" / "data"
    assert len(list(data.glob(f"{PREFIX}*"))) == 3, "the killed attempt's copies"
    table = catalog(tmp).load_table("db.customers")
    other = [{"id": 1, "name": "other", "city": "x", "op": "c", "updated_at": 9},
             {"id": 999, "name": "other", "city": "x", "op": "c", "updated_at": 9}]
    table.append(pa.Table.from_pylist(other, schema=table.schema().as_arrow()))
    _ok(tmp, "the replay")
    assert read_back(catalog(tmp).load_table("db.customers")) == {**expected(BATCH), 999: other[1]}
    assert not list(data.glob(f"{PREFIX}*")), "the copies no snapshot lists removed"


def test_a_table_whose_isolation_would_let_a_concurrent_add_through_is_rewritten(tmp_path: Path) -> None:
    """`write.delete.isolation-level: snapshot` makes pyiceberg skip the check that no file was added since the
    commit's load of the table: the files are not added as written (the rewrite, which reads the table it commits)."""
    tmp = tmp_path / "t"
    tmp.mkdir()
    write_changes(tmp, "c-000.jsonl", DELETES)
    write_job(tmp, upsert_job(tmp))
    _ok(tmp, "the run that creates the table empty")
    table = catalog(tmp).load_table("db.customers")
    with table.transaction() as tx:
        tx.set_properties(**{ISOLATION: "snapshot"})
    for name, rows in FILES.items():
        write_changes(tmp, name, rows)
    _ok(tmp, "a snapshot into the empty table")
    assert read_back(catalog(tmp).load_table("db.customers")) == expected(BATCH)
    names = _names(tmp)
    assert names and not any(f.startswith(PREFIX) for f in names), names


def _equal_once(tmp: Path, point: str) -> None:
    """The table holds BATCH, each key once (pyiceberg and DuckDB), in one gobblin-py snapshot; the watermarks hold
    the three files; no data file on disk that the table does not list, and no task output left."""
    table = catalog(tmp).load_table("db.customers")
    assert read_back(table) == expected(BATCH), point
    assert [bool(s.summary.get("gobblin-py.commit-id")) for s in table.snapshots()] == [True], f"{point}: one snapshot"
    assert set(FILES) == set(StateStore(tmp / "work", "u").watermarks()["customers"]), point
    listed = {t.file.file_path.removeprefix("file://") for t in table.scan().plan_files()}
    on_disk = {str(p) for p in (tmp / "warehouse" / "db" / "customers" / "data").rglob("*.parquet")}
    assert on_disk == listed, f"{point}: files the table does not list: {sorted(on_disk - listed)}"
    assert not [p for p in (tmp / "work" / "task-output").rglob("*") if p.is_file()], f"{point}: task output left"


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


def test_a_snapshot_into_a_table_holding_rows_is_upserted(tmp_path: Path) -> None:
    """The same files again (a state reset's re-read) and new keys, into the table the first snapshot filled: the
    table holds rows, so the commit rewrites (no key twice)."""
    tmp = _fresh(tmp_path / "t")
    _ok(tmp, "first snapshot")
    first = _names(tmp)
    assert all(f.startswith(PREFIX) for f in first)
    again = [{**r, "name": f"{r['name']}-again", "updated_at": 2} for r in BATCH] + \
        [{"id": i, "name": f"n{i}", "city": "c0", "op": "c", "updated_at": 2} for i in range(41, 51)]
    write_changes(tmp, "c-002.jsonl", again)
    _ok(tmp, "a snapshot into a table holding rows")
    table = catalog(tmp).load_table("db.customers")
    assert read_back(table) == expected(BATCH, again)
    assert not any(f.startswith(PREFIX) for f in _names(tmp)), "every first-snapshot file rewritten"
    assert len(table.snapshots()) == 2
