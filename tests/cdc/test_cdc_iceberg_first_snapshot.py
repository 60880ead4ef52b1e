"""postgres_cdc's chunked snapshot into an empty Iceberg upsert table adds the chunk files as they are
(`publishers/iceberg/first_snapshot.py`): the stream's file holding the snapshot's truncate record is left out, the
table equals the source by key (pyiceberg and DuckDB), also after a SIGKILL at each point of that commit; a state
reset's re-snapshot into the table that holds the rows goes through the upsert's rewrite."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cdc.cdc_jobs import slot_position
from cdc.test_cdc_iceberg_upsert import SETUP, assert_equal, source_rows, table_rows, upsert_job
from support.jobs import run_cli, write_job

from gobblin_py.builtin.publishers.iceberg.first_snapshot import COPIED_POINT, PREFIX
from gobblin_py.builtin.publishers.iceberg.upsert import WRITTEN_POINT
from gobblin_py.state.store import StateStore
from gobblin_py.testing.crash import SIGKILLED, cli, each_point

pytest.importorskip("pyiceberg")
RUN = ["run", "job.yaml", "--in-process"]


def _job(tmp: Path, pg: Any, db: str, slot: str = "s1") -> dict[str, Any]:
    job = upsert_job(tmp, pg, db)
    job["source"].update(snapshot_chunk_rows=10, slot=slot)  # 40 rows: 4 chunks, all in the first run
    return job


def _live(tmp: Path) -> list[str]:
    from pyiceberg.catalog import load_catalog

    catalog = load_catalog("gobblin_py", type="sql", uri=f"sqlite:///{tmp / 'work' / 'iceberg' / 'catalog.db'}")
    return sorted(t.file.file_path.removeprefix("file://") for t in catalog.load_table("db.acct").scan().plan_files())


def _listed(tmp: Path, first: bool = False) -> set[str]:
    """The data files any snapshot of the table lists (`first`: its first snapshot)."""
    from pyiceberg.catalog import load_catalog

    table = load_catalog("gobblin_py", type="sql", uri=f"sqlite:///{tmp / 'work' / 'iceberg' / 'catalog.db'}").load_table("db.acct")
    return {t.file.file_path.removeprefix("file://") for s in table.snapshots()[:1 if first else None]
            for t in table.scan(snapshot_id=s.snapshot_id).plan_files()}


def _duckdb_rows(tmp: Path) -> list[tuple[Any, ...]]:
    """The table's rows as DuckDB reads its live files (what pyiceberg plans), each key once."""
    import duckdb

    rows = duckdb.connect().execute("SELECT id, owner, balance, note FROM read_parquet(?, union_by_name = true) "
                                    "ORDER BY id", [_live(tmp)]).fetchall()
    assert len({r[0] for r in rows}) == len(rows), "a key twice"
    return [tuple(r) for r in rows]


def test_a_chunked_snapshot_is_added_as_written_and_a_reset_re_snapshot_upserts(tmp_path: Path, pg: Any, db: str) -> None:
    conn = pg.connect(db)
    conn.execute(SETUP)
    write_job(tmp_path, _job(tmp_path, pg, db))
    first = cli(RUN, tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    live = _live(tmp_path)
    assert len(live) == 4 and all(Path(p).name.startswith(PREFIX) for p in live), live
    assert_equal(tmp_path, conn)
    assert _duckdb_rows(tmp_path) == source_rows(conn)

    done = run_cli("state", "reset", "job.yaml", "--dataset", "public.acct", "--yes", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    conn.execute("DELETE FROM public.acct WHERE id <= 10; UPDATE public.acct SET note = 'x' WHERE id = 20")
    again = cli(RUN, tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert not any(Path(p).name.startswith(PREFIX) for p in _live(tmp_path)), "the table held rows: rewritten"
    assert_equal(tmp_path, conn)
    assert _duckdb_rows(tmp_path) == source_rows(conn) and [r[0] for r in table_rows(tmp_path)] == list(range(11, 41))


@pytest.mark.crash
def test_killed_at_each_point_of_a_chunked_first_snapshot_the_table_equals_the_source(tmp_path_factory: Any,
                                                                                       pg: Any) -> None:
    points = [f"{COPIED_POINT}:2", WRITTEN_POINT, "commit.after_step:1", "commit.before_record_removal"]
    dirs = [tmp_path_factory.mktemp("first") for _ in points]
    dbs = [pg.create_database(f"first_snap_{n}") for n in range(len(points))]

    def check(n: int, point: str) -> None:
        tmp, db = dirs[n], dbs[n]
        conn = pg.connect(db)
        conn.execute(SETUP)
        write_job(tmp, _job(tmp, pg, db, slot=f"fs_{n}"))
        crashed = cli(RUN, tmp, crash_at=point)
        assert crashed.returncode == SIGKILLED, f"{point}: {crashed.stdout}{crashed.stderr}"
        conn.execute("UPDATE public.acct SET note = 'after' WHERE id IN (3, 33); DELETE FROM public.acct WHERE id = 17")
        again = cli(RUN, tmp)
        assert again.returncode == 0, f"{point}: {again.stdout}{again.stderr}"
        assert table_rows(tmp) == source_rows(conn) == _duckdb_rows(tmp), point
        marks = StateStore(tmp / "work", "c").watermarks()
        assert slot_position(conn, f"fs_{n}") == min(int(m["lsn"]) for m in marks.values()), point
        on_disk = {str(p) for p in (tmp / "warehouse" / "db" / "acct" / "data").rglob("*.parquet")}
        assert on_disk == _listed(tmp), f"{point}: files no snapshot lists: {sorted(on_disk - _listed(tmp))}"
        added = _listed(tmp, first=True)
        assert len(added) == 4 and all(Path(p).name.startswith(PREFIX) for p in added), f"{point}: {added}"
        conn.execute("SELECT pg_drop_replication_slot(%s)", (f"fs_{n}",))
        conn.close()

    each_point(points, check)
