"""jdbc lag against a real PostgreSQL: rows above the committed watermark and max(column) − committed, as a user
computes them with SQL."""

from __future__ import annotations

from pathlib import Path

from jdbc.jdbc_jobs import jdbc_job
from support.jobs import write_job

from gobblin_py.config import load_job
from gobblin_py.operating.lag import measure_lag
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import JobRunner


def _run(tmp: Path, job: dict) -> None:
    result = JobRunner(load_job(write_job(tmp, job)), InProcessExecutor()).run()
    assert result.succeeded, result.error


def _lag(tmp: Path, job: dict):
    (lag,) = measure_lag(load_job(write_job(tmp, job)))
    assert lag.error is None, lag.error
    return lag


def test_time_column_lag_is_rows_above_the_watermark_and_the_gap_to_the_newest(tmp_path: Path, pg, db) -> None:
    with pg.connect(db) as conn:
        conn.execute("CREATE TABLE orders (id bigint PRIMARY KEY, updated_at timestamptz NOT NULL)")
        conn.execute("INSERT INTO orders SELECT i, now() - interval '1 day' + i * interval '1 second' "
                     "FROM generate_series(1, 50) i")
    job = jdbc_job(tmp_path, pg, db, [{"table": "public.orders", "watermark_column": "updated_at", "primary_key": "id"}])
    first = _lag(tmp_path, job)  # never run: every row, no committed position to measure from
    assert (first.records, first.seconds, first.unit) == (50, None, "rows")
    _run(tmp_path, job)
    done = _lag(tmp_path, job)
    assert (done.records, done.seconds, done.pending) == (0, None, False)

    with pg.connect(db) as conn:  # 7 rows after the committed position, the newest 600 s after it
        conn.execute("INSERT INTO orders SELECT 100 + i, now() + i * interval '100 seconds' FROM generate_series(0, 6) i")
        (newest,) = conn.execute("SELECT max(updated_at) FROM orders").fetchone()
    lag = _lag(tmp_path, job)
    assert lag.records == 7
    from gobblin_py.builtin.sources.jdbc.ranges import WatermarkKind, committed
    from gobblin_py.state.store import StateStore

    high = committed(WatermarkKind.TIMESTAMPTZ, StateStore(tmp_path / "work", "j").watermarks()["public.orders"], "o").top
    assert lag.seconds == (newest - high).total_seconds() > 600


def test_integer_column_lag_and_the_gap_when_rows_are_not_counted(tmp_path: Path, pg, db) -> None:
    with pg.connect(db) as conn:
        conn.execute("CREATE TABLE events (id bigint PRIMARY KEY)")
        conn.execute("INSERT INTO events SELECT i FROM generate_series(1, 30) i")
    table = {"table": "public.events", "watermark_column": "id", "primary_key": "id"}
    job = jdbc_job(tmp_path, pg, db, [table])
    _run(tmp_path, job)
    assert _lag(tmp_path, job).records == 0
    with pg.connect(db) as conn:
        conn.execute("INSERT INTO events VALUES (31), (40), (1000)")
    lag = _lag(tmp_path, job)
    assert (lag.records, lag.unit, lag.seconds) == (3, "rows", None)
    uncounted = jdbc_job(tmp_path, pg, db, [table], lag_count_rows=False)
    gap = _lag(tmp_path, uncounted)
    assert (gap.records, gap.unit) == (1000 - 30, "id")


def test_an_unreachable_database_is_an_error_without_the_password(tmp_path: Path, pg, db) -> None:
    import os

    from jdbc.jdbc_jobs import PASSWORD_ENV
    from support.kafka_broker import free_port

    job = jdbc_job(tmp_path, pg, db, [{"table": "public.t", "watermark_column": "id", "primary_key": "id"}])
    job["source"]["url"] = f"postgresql://gobblin@127.0.0.1:{free_port()}/{db}"
    (lag,) = measure_lag(load_job(write_job(tmp_path, job)), timeout_s=2)
    assert lag.records is None and lag.error and "cannot connect" in lag.error
    assert os.environ[PASSWORD_ENV] not in lag.error
