"""postgres_cdc lag against a real PostgreSQL with logical decoding: the WAL bytes between a table's committed LSN and
pg_current_wal_lsn(), as a user computes them with pg_wal_lsn_diff; a dropped slot is an error, not a figure."""

from __future__ import annotations

from pathlib import Path

from cdc.cdc_jobs import cdc_job, run
from support.jobs import write_job

from gobblin_py.config import load_job
from gobblin_py.operating.lag import measure_lag
from gobblin_py.state.store import StateStore


def _lag(tmp: Path, job: dict):
    return {lag.dataset: lag for lag in measure_lag(load_job(write_job(tmp, job)))}


def _wal_after(conn, tmp: Path, dataset: str) -> int:
    committed = StateStore(tmp / "work", "c").watermarks()[dataset]["lsn"]
    from gobblin_py.builtin.sources.postgres_cdc.settings import lsn_text

    return int(conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s::pg_lsn)", (lsn_text(committed),)).fetchone()[0])


def test_cdc_lag_is_the_wal_after_the_committed_position(tmp_path: Path, pg, db) -> None:
    with pg.connect(db) as conn:
        conn.execute("CREATE TABLE items (id int PRIMARY KEY, note text)")
        conn.execute("INSERT INTO items SELECT i, 'x' FROM generate_series(1, 10) i")
        conn.execute("CREATE PUBLICATION pub FOR TABLE items")
    job = cdc_job(tmp_path, pg, db)
    before = _lag(tmp_path, job)["public.items"]  # not snapshotted yet: no position to measure from
    assert (before.bytes, before.error, before.unit) == (None, None, "changes")
    assert run(tmp_path, job).succeeded

    with pg.connect(db) as conn:
        idle = _wal_after(conn, tmp_path, "public.items")
        lag = _lag(tmp_path, job)["public.items"]
        assert lag.error is None and idle <= lag.bytes <= _wal_after(conn, tmp_path, "public.items")
        conn.execute("INSERT INTO items SELECT i, repeat('y', 100) FROM generate_series(11, 2000) i")
        low = _wal_after(conn, tmp_path, "public.items")
        lag = _lag(tmp_path, job)["public.items"]
        high = _wal_after(conn, tmp_path, "public.items")
    # ~2,000 rows: at least 40 bytes of WAL each (CI once measured 86 a row, here usually over 100: the floor only
    # tells a lag that grew with the rows from one that did not)
    assert low <= lag.bytes <= high and lag.bytes > 1_990 * 40
    assert run(tmp_path, job).succeeded
    with pg.connect(db) as conn:
        assert _lag(tmp_path, job)["public.items"].bytes <= _wal_after(conn, tmp_path, "public.items") < 100_000

    with pg.connect(db) as conn:
        conn.execute("SELECT pg_drop_replication_slot('s1')")
    gone = _lag(tmp_path, job)["public.items"]
    assert gone.bytes is None and "replication slot 's1' does not exist" in gone.error
