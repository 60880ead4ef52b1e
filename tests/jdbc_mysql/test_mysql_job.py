"""The jdbc source against a real MariaDB: full then incremental loads, the NTILE range split, NULL watermarks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from jdbc.jdbc_jobs import read_output
from jdbc_mysql.mysql_jobs import mysql_job
from support.jobs import run_cli, write_job

from gobblin_py.builtin.sources.jdbc.split import JdbcSplit
from gobblin_py.config import load_job
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.planning import plan
from gobblin_py.runtime.runner import JobRunner
from gobblin_py.state.store import StateStore

ORDERS = {"table": "orders", "watermark_column": "updated_at", "primary_key": "id"}
SEQ = "WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < {n}) "


def _run(tmp: Path, job: dict) -> Any:
    return JobRunner(load_job(write_job(tmp, job)), InProcessExecutor()).run()


def _create_orders(maria: Any, db: str) -> None:
    maria.execute(db, "CREATE TABLE orders (id bigint PRIMARY KEY, amount decimal(12,2) NOT NULL, note text, "
                      "updated_at datetime(6))")


@pytest.mark.parametrize("scheme", ["mariadb", "mysql"])
def test_full_then_incremental_loads_take_each_row_version_once(tmp_path: Path, maria, mdb, scheme) -> None:
    _create_orders(maria, mdb)
    maria.execute(mdb, "INSERT INTO orders " + SEQ.format(n=1000) + "SELECT i, i * 1.5, 'v1', "
                  "UTC_TIMESTAMP(6) - INTERVAL 1 DAY + INTERVAL i SECOND FROM seq")
    job = mysql_job(tmp_path, maria, mdb, [{**ORDERS, "watermark_zone": "UTC"}])  # the writers stamp UTC
    job["source"]["url"] = maria.url(mdb, scheme)
    first = _run(tmp_path, job)
    assert first.succeeded, first
    assert sorted(r["id"] for r in read_output(tmp_path / "output", "orders")) == list(range(1, 1001))

    # updates and inserts between runs, stamped when they commit (after the last run's bound)
    maria.execute(mdb, "UPDATE orders SET note = 'v2', updated_at = UTC_TIMESTAMP(6) WHERE id % 10 = 0",
                  "INSERT INTO orders " + SEQ.format(n=1200) + "SELECT i, i, 'v1', UTC_TIMESTAMP(6) FROM seq WHERE i > 1000")
    assert _run(tmp_path, job).succeeded
    maria.execute(mdb, "UPDATE orders SET note = 'v3', updated_at = UTC_TIMESTAMP(6) WHERE id IN (10, 1001)")
    assert _run(tmp_path, job).succeeded
    assert _run(tmp_path, job).succeeded  # nothing new: nothing more published

    rows = read_output(tmp_path / "output", "orders")
    versions = [(r["id"], r["note"]) for r in rows]
    assert len(versions) == len(set(versions)), "a row version was published twice"
    expected = {(i, "v1") for i in range(1, 1201)} | {(i, "v2") for i in range(10, 1001, 10)} | {(10, "v3"), (1001, "v3")}
    assert set(versions) == expected
    current = {(i, ts) for i, ts in maria.query(mdb, "SELECT id, updated_at FROM orders")}
    assert current <= {(r["id"], r["updated_at"].replace(tzinfo=None)) for r in rows}  # datetime: wall clock as UTC
    marks = StateStore(tmp_path / "work", "j").watermarks()["orders"]
    assert "+" not in str(marks["high"])  # a datetime watermark is naive, as PostgreSQL's timestamp


def test_sub_ranges_follow_the_distribution_not_equal_widths(tmp_path: Path, maria, mdb) -> None:
    """90 % of the rows in the last hour of a 100-day range: NTILE boundaries give each task about a quarter."""
    maria.execute(mdb, "CREATE TABLE events (id bigint PRIMARY KEY, ts timestamp(6) NOT NULL)",
                  "INSERT INTO events " + SEQ.format(n=2000) + "SELECT i, UTC_TIMESTAMP(6) - INTERVAL 100 DAY + "
                  "INTERVAL i HOUR FROM seq",
                  "INSERT INTO events " + SEQ.format(n=20000) + "SELECT i, UTC_TIMESTAMP(6) - INTERVAL 2 HOUR + "
                  "INTERVAL (i % 3600) SECOND FROM seq WHERE i > 2000")
    job = mysql_job(tmp_path, maria, mdb, [{"table": "events", "watermark_column": "ts", "primary_key": "id"}],
                    partitions=4, first_load_split="watermark")  # the watermark split, as incremental runs have it
    spec = load_job(write_job(tmp_path, job))
    units = plan(spec, StateStore(tmp_path / "work", "j")).workunits
    assert len(units) == 4
    counts = []
    with maria.connect(mdb) as conn, conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        for u in units:
            lo, hi = JdbcSplit.of(u).lo, JdbcSplit.of(u).hi
            query = "SELECT COUNT(*) FROM events WHERE ts <= %s" + (" AND ts > %s" if lo is not None else "")
            cur.execute(query, (hi, lo) if lo is not None else (hi,))
            counts.append(cur.fetchone()[0])
    assert sum(counts) == 20000
    assert max(counts) - min(counts) <= 20000 * 0.02, counts  # equal widths would put 18,000 rows in one task
    assert sorted(u.watermark_key for u in units) == ["done.1", "done.2", "done.3", "high"]
    assert _run(tmp_path, job).succeeded
    assert len(read_output(tmp_path / "output", "events")) == 20000
    assert plan(spec, StateStore(tmp_path / "work", "j")).workunits == []  # no new rows: no task


def test_integer_watermark_with_lag_and_null_watermarks(tmp_path: Path, maria, mdb, caplog) -> None:
    """`max − lag` for an integer column; NULL watermarks in the first load only, then counted (warn / report)."""
    maria.execute(mdb, "CREATE TABLE t (id int PRIMARY KEY, version bigint unsigned, note varchar(20))",
                  "INSERT INTO t " + SEQ.format(n=100) + "SELECT i, i, 'v1' FROM seq",
                  "INSERT INTO t VALUES (101, NULL, 'undated')")
    job = mysql_job(tmp_path, maria, mdb, [{"table": "t", "watermark_column": "version", "primary_key": "id",
                                             "watermark_lag": 10}])
    assert _run(tmp_path, job).succeeded
    rows = read_output(tmp_path / "output", "t")
    assert sorted(r["id"] for r in rows) == list(range(1, 91)) + [101]  # up to max − lag = 90, and the NULL one
    maria.execute(mdb, "INSERT INTO t VALUES (102, NULL, 'undated later'), (103, 200, 'v1')")
    job["source"]["tables"][0]["watermark_lag"] = 0
    assert _run(tmp_path, job).succeeded
    assert "2 row(s) of t have NULL in version: incremental runs never extract them" in caplog.text
    assert sorted(r["id"] for r in read_output(tmp_path / "output", "t")) == list(range(1, 102)) + [103]
    job["source"]["null_watermark"] = "report"
    reported = _run(tmp_path, job)
    assert not reported.succeeded and "2 row(s) of t have NULL in version" in str(reported)


def test_time_lag_by_the_data_and_whole_days_for_dates(tmp_path: Path, maria, mdb) -> None:
    """datetime: up to min(the zone's clock, the newest value) − lag; date: up to the last complete day."""
    maria.execute(mdb, "CREATE TABLE orders (id int PRIMARY KEY, updated_at datetime NOT NULL, day date NOT NULL)",
                  "INSERT INTO orders VALUES (1, UTC_TIMESTAMP() - INTERVAL 2 HOUR, UTC_DATE() - INTERVAL 2 DAY), "
                  "(2, UTC_TIMESTAMP() - INTERVAL 30 MINUTE, UTC_DATE())")
    job = mysql_job(tmp_path, maria, mdb, [{**ORDERS, "watermark_lag": "1 hour", "watermark_zone": "UTC"},
                                           {"table": f"{mdb}.orders", "watermark_column": "day", "primary_key": "id"}])
    assert _run(tmp_path, job).succeeded
    assert [r["id"] for r in read_output(tmp_path / "output", "orders")] == [1]
    assert [r["id"] for r in read_output(tmp_path / "output", f"{mdb}.orders")] == [1]  # today is not complete
    job["source"]["tables"][0]["watermark_lag"] = 0
    assert _run(tmp_path, job).succeeded
    assert sorted(r["id"] for r in read_output(tmp_path / "output", "orders")) == [1, 2]
    job["source"]["tables"][0]["watermark_lag"] = "soon"
    failed = _run(tmp_path, job)
    assert not failed.succeeded and "watermark_lag 'soon' is not a duration" in str(failed)


@pytest.mark.spark
def test_on_spark_each_sub_range_is_a_task(tmp_path: Path, maria, mdb) -> None:
    """The real CLI on local Spark: the settings and sub-ranges cross to the executors, each read through its own
    unbuffered cursor."""
    _create_orders(maria, mdb)
    maria.execute(mdb, "INSERT INTO orders " + SEQ.format(n=5000) + "SELECT i, i, 'x', UTC_TIMESTAMP(6) - INTERVAL 1 DAY + "
                       "INTERVAL i SECOND FROM seq")
    write_job(tmp_path, mysql_job(tmp_path, maria, mdb, [{**ORDERS, "watermark_zone": "UTC"}], fetch_rows=500))
    done = run_cli("run", "job.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(r["id"] for r in read_output(tmp_path / "output", "orders")) == list(range(1, 5001))
    assert len(list((tmp_path / "output" / "orders").rglob("*.avro"))) == 4


def test_a_writer_stamping_a_wall_clock_behind_the_server_loses_no_row(tmp_path: Path, maria, mdb) -> None:
    """An application writes New York wall-clock time into a `datetime` column: every value five hours behind the
    server's UTC clock. A bound by the clock would put every later row under the committed position; the bound by
    the data (the newest value, an hour back without watermark_zone) never does."""
    _create_orders(maria, mdb)
    [(wall,)] = maria.query(mdb, "SELECT UTC_TIMESTAMP(6) - INTERVAL 5 HOUR")  # the writer's clock
    at = f"TIMESTAMP '{wall}'"
    maria.execute(mdb, "INSERT INTO orders " + SEQ.format(n=100) + f"SELECT i, i, 'v1', {at} - INTERVAL 100 MINUTE + "
                  "INTERVAL i MINUTE FROM seq")
    job = mysql_job(tmp_path, maria, mdb, [ORDERS])
    first = _run(tmp_path, job)
    assert first.succeeded, first
    maria.execute(mdb, f"UPDATE orders SET note = 'v2', updated_at = {at} + INTERVAL id MINUTE WHERE id <= 30",
                  "INSERT INTO orders " + SEQ.format(n=180) + f"SELECT i, i, 'v1', {at} + INTERVAL (i - 70) MINUTE "
                  "FROM seq WHERE i > 100")  # 110 row versions, still hours behind the server's clock
    assert _run(tmp_path, job).succeeded
    maria.execute(mdb, f"INSERT INTO orders VALUES (999, 0, 'later', {at} + INTERVAL 4 HOUR)")
    assert _run(tmp_path, job).succeeded

    versions = [(r["id"], r["note"]) for r in read_output(tmp_path / "output", "orders")]
    assert len(versions) == len(set(versions)), "a row version was published twice"
    expected = {(i, "v1") for i in range(1, 181)} | {(i, "v2") for i in range(1, 31)}
    assert set(versions) - {(999, "later")} == expected, f"{len(expected - set(versions))} of 210 row versions lost"
    notices = " | ".join(n for d in first.datasets for n in d.notices)
    assert "the newest updated_at of orders" in notices and "5.0 h behind the database's clock" in notices


def test_a_big_ranges_split_comes_from_a_sample_and_every_row_is_read_once(tmp_path: Path, maria, mdb,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Past SAMPLE_ABOVE rows, NTILE runs over a repeatable sample: the tasks stay about even, the count stays exact
    and every row is read once."""
    from gobblin_py.builtin.sources.jdbc import mysql

    monkeypatch.setattr(mysql, "SAMPLE_ABOVE", 1000)
    monkeypatch.setattr(mysql, "SAMPLE_ROWS", 4000)
    _create_orders(maria, mdb)
    maria.execute(mdb, "INSERT INTO orders SELECT seq, seq, 'v1', UTC_TIMESTAMP(6) - INTERVAL 1 DAY + INTERVAL seq SECOND "
                       "FROM seq_1_to_20000")  # MariaDB's Sequence engine
    job = mysql_job(tmp_path, maria, mdb, [{**ORDERS, "watermark_zone": "UTC"}], partitions=4,
                    first_load_split="watermark")  # the watermark split (a first load's default is the key's)
    spec = load_job(write_job(tmp_path, job))
    units = plan(spec, StateStore(spec.job.work_dir, spec.name)).workunits
    assert len(units) == 4 and sum(JdbcSplit.of(u).estimated_rows for u in units) == 20000  # the count is exact
    result = _run(tmp_path, job)
    assert result.succeeded, result.error
    assert sorted(r["id"] for r in read_output(tmp_path / "output", "orders")) == list(range(1, 20001))  # each once
    per_task = sorted(t.records_extracted for t in result.tasks)
    assert per_task[0] > 2000 and per_task[-1] < 8000, per_task  # about a quarter each
