"""Exactly-once of a chunked snapshot: SIGKILL at every commit point of a run in the middle of a multi-run chunked
snapshot, changes going on; the reruns resume at the next chunks, and the output holds every change once and each key
read at most once, replaying to the table (read back with the Apache `avro` package)."""

from __future__ import annotations

from typing import Any

import pytest
from cdc.cdc_jobs import cdc_job
from cdc.test_cdc_chunked import check_output, chunk_state
from support.jobs import write_job

from gobblin_py.testing.crash import SIGKILLED, cli, commit_points, each_point

pytestmark = [pytest.mark.crash]

RUN = ["run", "job.yaml", "--in-process"]


def _changes(conn: Any, n: int) -> None:
    """Inserts, updates, a delete and an update moving a row to another chunk, in two transactions."""
    with conn.transaction():
        conn.execute(f"INSERT INTO public.t VALUES ({1000 + n}, 'n{n}'); UPDATE public.t SET v = v || 'u' WHERE id = {n + 5}")
        conn.execute(f"DELETE FROM public.t WHERE id = {n + 40}")
    conn.execute(f"UPDATE public.t SET id = {2000 + n} WHERE id = {n + 70}")


def test_kill_at_every_commit_point_of_a_chunked_snapshot(tmp_path_factory: Any, pg: Any) -> None:
    """100 rows in chunks of 10, 3 a run: the second run is killed at a commit point, then runs go on to the end."""
    points = commit_points(6)
    dirs = [tmp_path_factory.mktemp("chunk") for _ in points]
    dbs = [pg.create_database(f"chunk_crash_{n}") for n in range(len(points))]

    def check(n: int, point: str) -> None:
        tmp, db, slot = dirs[n], dbs[n], f"sc_{n}"
        conn = pg.connect(db)
        conn.execute("CREATE TABLE public.t (id int PRIMARY KEY, v text); "
                     "INSERT INTO public.t SELECT g, 'r' || g FROM generate_series(1, 100) g")
        write_job(tmp, cdc_job(tmp, pg, db, tables=["public.t"], create_publication=True, slot=slot,
                               snapshot_chunk_rows=10, snapshot_chunks_per_run=3))
        first = cli(RUN, tmp)
        assert first.returncode == 0, first.stdout + first.stderr
        _changes(conn, 1)
        crashed = cli(RUN, tmp, crash_at=point)
        assert crashed.returncode == SIGKILLED, f"{point}: {crashed.stdout}{crashed.stderr}"
        for step in range(2, 12):
            _changes(conn, step)
            again = cli(RUN, tmp)
            assert again.returncode == 0, f"{point}: {again.stdout}{again.stderr}"
            if chunk_state(tmp, "public.t") is None:
                break
        assert chunk_state(tmp, "public.t") is None, f"{point}: the snapshot did not finish"
        last = cli(RUN, tmp)
        assert last.returncode == 0, f"{point}: {last.stdout}{last.stderr}"
        check_output(tmp, conn, "public.t")
        conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
        conn.close()

    each_point(points, check)
