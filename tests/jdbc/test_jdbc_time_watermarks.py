"""Time watermarks against a real PostgreSQL that no writer's zone, DST change or infinite value can put rows under the
committed position: zone-less columns are bounded by their data (`bounds.py`), ±infinity is reported like NULL."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from jdbc.jdbc_jobs import jdbc_job, read_output
from support.jobs import write_job

from gobblin_py.builtin.sources.jdbc.ranges import WatermarkKind, committed
from gobblin_py.config import load_job
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import JobRunner
from gobblin_py.state.store import StateStore, WatermarkFile

ORDERS = {"table": "public.orders", "watermark_column": "updated_at", "primary_key": "id"}


def _run(tmp: Path, job: dict) -> Any:
    result = JobRunner(load_job(write_job(tmp, job)), InProcessExecutor()).run()
    assert result.succeeded, result
    return result


def _notices(result: Any) -> str:
    return " | ".join(n for d in result.datasets for n in d.notices)


def _committed(tmp: Path) -> datetime:
    """The position committed for public.orders (`high` extended through the sub-ranges that follow it)."""
    marks = StateStore(tmp / "work", "j").watermarks()["public.orders"]
    return committed(WatermarkKind.TIMESTAMP, marks, "public.orders").high


def _versions(tmp: Path) -> list[tuple[int, str]]:
    return [(r["id"], r["note"]) for r in read_output(tmp / "output", "public.orders")]


def test_a_writer_stamping_a_wall_clock_behind_the_server_loses_no_row(tmp_path: Path, pg, db) -> None:
    """An application writes New York wall-clock time into a `timestamp` column of a UTC database: every value is
    five hours behind the server's clock. A bound by the clock (`localtimestamp − lag`) commits a position above every
    value the application writes for the next five hours; a bound by the data never passes its newest value."""
    with pg.connect(db) as conn:
        conn.execute("CREATE TABLE orders (id bigint PRIMARY KEY, note text NOT NULL, updated_at timestamp NOT NULL)")
        conn.execute(f"ALTER DATABASE \"{db}\" SET TimeZone = 'UTC'")  # a UTC database (the runs' sessions too)
        conn.execute("SET TimeZone = 'UTC'")
        [wall] = conn.execute("SELECT localtimestamp - interval '5 hours'").fetchone()  # the writer's clock
        conn.execute("INSERT INTO orders SELECT i, 'v1', %s - interval '100 minutes' + i * interval '1 minute' "
                     "FROM generate_series(1, 100) i", (wall,))
    job = jdbc_job(tmp_path, pg, db, [ORDERS])
    first = _run(tmp_path, job)

    with pg.connect(db) as conn:  # 110 row versions after the first run's newest value, still hours behind the server
        conn.execute("UPDATE orders SET note = 'v2', updated_at = %s + id * interval '1 minute' WHERE id <= 30", (wall,))
        conn.execute("INSERT INTO orders SELECT i, 'v1', %s + (i - 70) * interval '1 minute' "
                     "FROM generate_series(101, 180) i", (wall,))
    second = _run(tmp_path, job)
    with pg.connect(db) as conn:  # the writer goes on: its clock passes the lag after the last version
        conn.execute("INSERT INTO orders VALUES (999, 'later', %s + interval '4 hours')", (wall,))
    _run(tmp_path, job)

    versions = _versions(tmp_path)
    assert len(versions) == len(set(versions)), "a row version was published twice"
    expected = {(i, "v1") for i in range(1, 181)} | {(i, "v2") for i in range(1, 31)}
    assert set(versions) - {(999, "later")} == expected, f"{len(expected - set(versions))} of 210 row versions lost"
    # a first load far from the clock is reported, naming table, column and gap; later runs are not compared
    assert "the newest updated_at of public.orders" in _notices(first)
    assert "5.0 h behind the database's clock" in _notices(first)
    assert "the newest updated_at" not in _notices(second)


@pytest.mark.parametrize("table", [{}, {"watermark_lag": "30 minutes"}, {"watermark_zone": "America/New_York"}],
                         ids=["no-lag", "lag-30min", "zone-named"])
def test_the_hour_repeated_when_dst_ends_is_not_lost(tmp_path: Path, pg, db, table) -> None:
    """Application and database in New York: on 2024-11-03 the wall clock runs 01:00–02:00 twice. A run during the
    first pass commits a position inside that hour; the second pass writes the same hour again, under it. The bound
    stays before the repeated hour (a lag of at least an hour, or the named zone's repeated hours avoided)."""
    with pg.connect(db) as conn:
        conn.execute("CREATE TABLE orders (id bigint PRIMARY KEY, note text NOT NULL, updated_at timestamp NOT NULL)")
        conn.execute(f"ALTER DATABASE \"{db}\" SET TimeZone = 'America/New_York'")  # the writers' and the runs' zone

    def write(first: int, last: int, note: str) -> None:
        """Rows a minute and 12 s apart from 2024-11-03 04:00 UTC (00:00 EDT), stamped with the New York wall clock."""
        with pg.connect(db) as conn:
            conn.execute("INSERT INTO orders SELECT i, %s, (timestamptz '2024-11-03 04:00:00+00' + i * interval '72 "
                         "seconds')::timestamp FROM generate_series(%s::int, %s::int) i", (note, first, last))

    write(0, 49, "before")  # 00:00–00:58:48 EDT
    write(50, 99, "first pass")  # 01:00–01:58:48 EDT
    job = jdbc_job(tmp_path, pg, db, [{**ORDERS, **table}])
    _run(tmp_path, job)
    high = _committed(tmp_path)
    assert high < datetime(2024, 11, 3, 1), high  # never inside the hour the clock is about to repeat
    write(100, 149, "second pass")  # 01:00–01:58:48 EST: the same wall-clock hour again
    write(150, 249, "after")  # 02:00–03:58:48 EST
    _run(tmp_path, job)

    ids = [r["id"] for r in read_output(tmp_path / "output", "public.orders")]
    assert len(ids) == len(set(ids)), "a row was published twice"
    missing = set(range(150)) - set(ids)
    assert not missing, f"{len(missing)} of the 150 rows up to the repeated hour's end lost"
    high = _committed(tmp_path)
    with pg.connect(db) as conn:  # and every row up to the committed position, exactly
        below = {i for (i,) in conn.execute("SELECT id FROM orders WHERE updated_at <= %s", (high,))}
    assert set(ids) == below


@pytest.mark.parametrize("column_type", ["timestamp", "timestamptz", "date"])
def test_infinite_watermarks_are_reported_never_skipped(tmp_path: Path, pg, db, caplog, column_type) -> None:
    """A row at `infinity` is above every bound and one at `-infinity` below every position: neither is ever extracted
    (no Avro timestamp holds them), so every run counts them, as it counts NULL watermarks."""
    with pg.connect(db) as conn:
        conn.execute(f"CREATE TABLE orders (id bigint PRIMARY KEY, note text NOT NULL, updated_at {column_type})")
        conn.execute("INSERT INTO orders VALUES (1, 'old', localtimestamp - interval '5 days'), (2, 'never', 'infinity'), "
                     "(4, 'newest', localtimestamp)")
    job = jdbc_job(tmp_path, pg, db, [ORDERS])
    _run(tmp_path, job)  # a first load
    assert "1 row(s) of public.orders have infinity or -infinity in updated_at: no run extracts them" in caplog.text
    with pg.connect(db) as conn:
        conn.execute("INSERT INTO orders VALUES (3, 'always', '-infinity')")
    _run(tmp_path, job)  # an incremental run
    message = "2 row(s) of public.orders have infinity or -infinity in updated_at: no run extracts them"
    assert message in caplog.text
    versions = _versions(tmp_path)
    assert (1, "old") in versions and not {i for i, _ in versions} & {2, 3}
    job["source"]["null_watermark"] = "report"  # an input problem: the run exits 1, naming table and column
    reported = JobRunner(load_job(write_job(tmp_path, job)), InProcessExecutor()).run()
    assert not reported.succeeded and message in str(reported)


def test_watermark_zone_is_refused_on_a_column_that_is_no_wall_clock(tmp_path: Path, pg, db) -> None:
    with pg.connect(db) as conn:
        conn.execute("CREATE TABLE orders (id bigint PRIMARY KEY, note text, updated_at timestamptz)")
    job = jdbc_job(tmp_path, pg, db, [{**ORDERS, "watermark_zone": "UTC"}])
    result = JobRunner(load_job(write_job(tmp_path, job)), InProcessExecutor()).run()
    assert not result.succeeded
    assert ("table public.orders (source.tables[0]): watermark_zone is for columns without a zone; updated_at holds "
            "instants") in str(result)


def test_a_position_committed_past_the_data_is_reported(tmp_path: Path, pg, db) -> None:
    """A position the clock bound committed above a zone-less column's data (before the bound by the data) hides
    the rows written below it since: every run says so, naming table and column, until a reset."""
    with pg.connect(db) as conn:
        conn.execute("CREATE TABLE orders (id bigint PRIMARY KEY, note text, updated_at timestamp)")
        conn.execute("INSERT INTO orders VALUES (1, 'v1', localtimestamp - interval '5 hours')")
    job = jdbc_job(tmp_path, pg, db, [ORDERS])
    _run(tmp_path, job)
    with pg.connect(db) as conn:  # the position the clock bound committed: the server's clock, above every value
        [(past,)] = conn.execute("SELECT localtimestamp").fetchall()
    WatermarkFile(StateStore(tmp_path / "work", "j").dir, "public.orders").write({"high": past.isoformat()})
    notices = _notices(_run(tmp_path, job))
    assert "the committed position of public.orders" in notices and "is past the newest updated_at" in notices
