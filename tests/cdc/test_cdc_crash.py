"""Exactly-once for postgres_cdc: SIGKILL at every commit point (and in recovery), changes keep coming, then a rerun:
every change once, and the slot at the lowest committed position."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from cdc.cdc_jobs import cdc_job, read_changes, slot_position
from support.jobs import write_job

from gobblin_py.crashpoints import TASK_POINTS
from gobblin_py.state.store import StateStore
from gobblin_py.testing.crash import SIGKILLED, cli, commit_points, each_point

pytestmark = [pytest.mark.crash]

RUN = ["run", "job.yaml", "--in-process"]


def _replay(rows: list[dict[str, Any]], key: str) -> dict[Any, Any]:
    """The table as an upsert of the change records in (_lsn, _seq) order gives it."""
    table: dict[Any, Any] = {}
    for r in rows:
        if r["_op"] == "truncate":
            table.clear()
        elif r["_op"] == "delete":
            table.pop(r[key], None)
        else:
            table[r[key]] = r["v"]
    return table


def _check(tmp: Path, conn: Any, slot: str) -> None:
    for table, key in (("public.a", "id"), ("public.b", "k")):
        rows = read_changes(tmp / "output", table)
        seen = Counter(repr(sorted(r.items())) for r in rows)
        assert max(seen.values()) == 1, f"{table}: duplicates"
        snapshots = {r["_lsn"] for r in rows if r["_op"] == "read"}
        assert len(snapshots) == 1, f"{table}: snapshotted {len(snapshots)} times"
        changes = [r for r in rows if r["_op"] != "read"]
        assert len({(r["_lsn"], r["_seq"]) for r in changes}) == len(changes)
        assert _replay(rows, key) == dict(conn.execute(f"SELECT {key}, v FROM {table}").fetchall()), table
    marks = StateStore(tmp / "work", "c").watermarks()
    assert slot_position(conn, slot) == min(int(m["lsn"]) for m in marks.values())


@pytest.mark.parametrize("in_snapshot", [False, True], ids=["changes", "first-run"])
def test_kill_at_every_commit_point(tmp_path_factory: Any, pg: Any, in_snapshot: bool) -> None:
    """Killed in the run that reads changes, or in the first run (the snapshot; the rerun finds the slot made); also
    where the task (both tables: one MultiWorkUnit) moved its files into task output but has not fsynced them."""
    points = list(TASK_POINTS) + commit_points(8) + ["recovery.before_commit"]
    dirs = [tmp_path_factory.mktemp("cp") for _ in points]
    dbs = [pg.create_database(f"crash_{int(in_snapshot)}_{n}") for n in range(len(points))]

    def check(n: int, point: str) -> None:  # a database and a slot of its own (slot names are the server's)
        tmp, db, slot = dirs[n], dbs[n], f"s_{int(in_snapshot)}_{n}"
        conn = pg.connect(db)
        conn.execute("CREATE TABLE public.a (id int PRIMARY KEY, v text); CREATE TABLE public.b (k int PRIMARY KEY, v text);"
                     "INSERT INTO public.a VALUES (1, 'a1'), (2, 'a2'); INSERT INTO public.b VALUES (1, 'b1');")
        write_job(tmp, cdc_job(tmp, pg, db, tables=["public.a", "public.b"], create_publication=True, slot=slot))
        if not in_snapshot:
            first = cli(RUN, tmp)
            assert first.returncode == 0, first.stdout + first.stderr
        with conn.transaction():
            conn.execute("UPDATE public.a SET v = 'a1-x' WHERE id = 1; INSERT INTO public.b VALUES (2, 'b2')")
        conn.execute("DELETE FROM public.a WHERE id = 2; INSERT INTO public.a VALUES (3, 'a3')")
        if point.startswith("recovery."):
            assert cli(RUN, tmp, crash_at="commit.after_step:3").returncode == SIGKILLED
        crashed = cli(RUN, tmp, crash_at=point)
        assert crashed.returncode == SIGKILLED, f"{point}: {crashed.stdout}{crashed.stderr}"
        conn.execute("UPDATE public.b SET v = 'b1-y' WHERE k = 1; INSERT INTO public.a VALUES (4, 'a4')")
        again = cli(RUN, tmp)
        assert again.returncode == 0, f"{point}: {again.stdout}{again.stderr}"
        _check(tmp, conn, slot)
        conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
        conn.close()

    each_point(points, check)


def test_kill_in_a_batch_of_records(tmp_path_factory: Any, pg: Any) -> None:
    """Issue 45: a commit thread writes its datasets' records in one batch, runs their steps, then removes the records
    in one batch. SIGKILL in the middle of the batch's write (one record renamed in place, the others not), after it
    (every record there, no step run), between two datasets' steps, and before the batch's removal; changes keep
    coming, then a rerun: every table recovered, every change once, the slot at the lowest committed position."""
    tables = [f"public.t{i}" for i in range(4)]
    points = ["commit.store_batch_midway", "commit.after_store_write", "commit.after_step:6",
              "commit.before_record_removal"]
    dirs = [tmp_path_factory.mktemp("batch") for _ in points]
    dbs = [pg.create_database(f"batch_{n}") for n in range(len(points))]

    def check(n: int, point: str) -> None:
        tmp, db, slot = dirs[n], dbs[n], f"s_batch_{n}"
        conn = pg.connect(db)
        for t in tables:
            conn.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v text); INSERT INTO {t} VALUES (1, '{t}-1')")
        job = cdc_job(tmp, pg, db, tables=tables, create_publication=True, slot=slot)
        job["job"]["commit_parallelism"] = 2  # two commit threads, each with a batch of two tables
        write_job(tmp, job)
        first = cli(RUN, tmp)
        assert first.returncode == 0, first.stdout + first.stderr
        with conn.transaction():
            for i, t in enumerate(tables):
                conn.execute(f"UPDATE {t} SET v = 'x' WHERE id = 1")
                conn.execute(f"INSERT INTO {t} VALUES (%s, 'y')", (10 + i,))
        crashed = cli(RUN, tmp, crash_at=point)
        assert crashed.returncode == SIGKILLED, f"{point}: {crashed.stdout}{crashed.stderr}"
        assert list((tmp / "work" / "commits" / "c").glob("*.json")), f"{point}: no record left to recover"
        with conn.transaction():
            for t in tables:
                conn.execute(f"DELETE FROM {t} WHERE id = 1; INSERT INTO {t} VALUES (20, 'z')")
        again = cli(RUN, tmp)
        assert again.returncode == 0, f"{point}: {again.stdout}{again.stderr}"
        assert not list((tmp / "work" / "commits" / "c").glob("*.json")), f"{point}: a record still pending"
        for t in tables:
            rows = read_changes(tmp / "output", t)
            assert max(Counter(repr(sorted(r.items())) for r in rows).values()) == 1, f"{point}: {t}: duplicates"
            assert _replay(rows, "id") == dict(conn.execute(f"SELECT id, v FROM {t}").fetchall()), f"{point}: {t}"
        marks = StateStore(tmp / "work", "c").watermarks()
        assert len(marks) == len(tables)
        assert slot_position(conn, slot) == min(int(m["lsn"]) for m in marks.values())
        conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
        conn.close()

    each_point(points, check)
