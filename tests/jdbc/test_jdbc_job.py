"""The jdbc source against a real PostgreSQL: full then incremental loads, the range split, NULL watermarks, the lag."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jdbc.jdbc_jobs import PASSWORD_ENV, jdbc_job, read_output
from support.jobs import run_cli, write_job

from gobblin_py.builtin.sources.jdbc.split import JdbcSplit
from gobblin_py.config import load_job
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.planning import plan
from gobblin_py.runtime.runner import JobRunner
from gobblin_py.state.store import StateStore

ORDERS = {"table": "public.orders", "watermark_column": "updated_at", "primary_key": "id"}


def _run(tmp: Path, job: dict) -> Any:
    return JobRunner(load_job(write_job(tmp, job)), InProcessExecutor()).run()


def _create_orders(conn: Any) -> None:
    conn.execute("CREATE TABLE orders (id bigint PRIMARY KEY, amount numeric(12,2) NOT NULL, note text, "
                 "updated_at timestamptz)")


def test_full_then_incremental_loads_take_each_row_version_once(tmp_path: Path, pg, db) -> None:
    with pg.connect(db) as conn:
        _create_orders(conn)
        conn.execute("INSERT INTO orders SELECT i, i * 1.5, 'v1', now() - interval '1 day' + i * interval '1 second' "
                     "FROM generate_series(1, 1000) i")
    job = jdbc_job(tmp_path, pg, db, [ORDERS])
    first = _run(tmp_path, job)
    assert first.succeeded, first
    rows = read_output(tmp_path / "output", "public.orders")
    assert sorted(r["id"] for r in rows) == list(range(1, 1001))

    with pg.connect(db) as conn:  # updates and inserts between runs, stamped when they commit (after the last run)
        conn.execute("UPDATE orders SET note = 'v2', updated_at = now() WHERE id % 10 = 0")
        conn.execute("INSERT INTO orders SELECT i, i, 'v1', now() FROM generate_series(1001, 1200) i")
    second = _run(tmp_path, job)
    assert second.succeeded, second
    with pg.connect(db) as conn:
        conn.execute("UPDATE orders SET note = 'v3', updated_at = now() WHERE id IN (10, 1001)")
    third = _run(tmp_path, job)
    assert third.succeeded, third
    assert _run(tmp_path, job).succeeded  # nothing new: nothing more published

    rows = read_output(tmp_path / "output", "public.orders")
    versions = [(r["id"], r["note"]) for r in rows]
    assert len(versions) == len(set(versions)), "a row version was published twice"
    expected = {(i, "v1") for i in range(1, 1201)} | {(i, "v2") for i in range(10, 1001, 10)} | {(10, "v3"), (1001, "v3")}
    assert set(versions) == expected
    with pg.connect(db) as conn:  # the newest version of every row is in the output with its watermark
        current = set(conn.execute("SELECT id, updated_at FROM orders").fetchall())
    assert current <= {(r["id"], r["updated_at"]) for r in rows}


def test_sub_ranges_follow_the_distribution_not_equal_widths(tmp_path: Path, pg, db) -> None:
    with pg.connect(db) as conn:  # 90 % of the rows in the last hour of a 100-day range
        conn.execute("CREATE TABLE events (id bigint PRIMARY KEY, ts timestamp NOT NULL)")
        conn.execute("INSERT INTO events SELECT i, localtimestamp - interval '100 days' + i * interval '1 hour' "
                     "FROM generate_series(1, 2000) i")
        conn.execute("INSERT INTO events SELECT i, localtimestamp - interval '2 hours' + (i % 3600) * interval '1 second' "
                     "FROM generate_series(2001, 20000) i")
        [zone] = conn.execute("SHOW TimeZone").fetchone()  # the zone whose wall clock localtimestamp stamped
    # the writers' zone named: no hour is kept back (the bound is the newest value), so one run takes every row
    job = jdbc_job(tmp_path, pg, db, [{"table": "public.events", "watermark_column": "ts", "primary_key": "id",
                                       "watermark_zone": zone}], partitions=4)
    spec = load_job(write_job(tmp_path, job))
    units = plan(spec, StateStore(tmp_path / "work", "j")).workunits
    assert len(units) == 4
    with pg.connect(db) as conn:
        counts = []
        for u in units:
            lo, hi = JdbcSplit.of(u).lo, JdbcSplit.of(u).hi
            query = "SELECT count(*) FROM events WHERE ts <= %s" + (" AND ts > %s" if lo is not None else "")
            counts.append(conn.execute(query, (hi, lo) if lo is not None else (hi,)).fetchone()[0])
    assert sum(counts) == 20000
    assert max(counts) - min(counts) <= 20000 * 0.02, counts  # equal widths would put 18,000 rows in one task
    assert len({u.id for u in units}) == 4 and sorted(u.watermark_key for u in units) == ["done.1", "done.2", "done.3", "high"]
    result = _run(tmp_path, job)
    assert result.succeeded, result
    assert len(read_output(tmp_path / "output", "public.events")) == 20000
    assert plan(spec, StateStore(tmp_path / "work", "j")).workunits == []  # no new rows: no task (the bound moved, the data did not)


def test_null_watermarks_are_in_the_first_load_only_and_reported(tmp_path: Path, pg, db, caplog) -> None:
    with pg.connect(db) as conn:
        _create_orders(conn)
        conn.execute("INSERT INTO orders VALUES (1, 1, 'dated', now() - interval '1 hour'), (2, 2, 'undated', NULL)")
    job = jdbc_job(tmp_path, pg, db, [ORDERS])
    assert _run(tmp_path, job).succeeded
    assert sorted(r["note"] for r in read_output(tmp_path / "output", "public.orders")) == ["dated", "undated"]
    with pg.connect(db) as conn:
        conn.execute("INSERT INTO orders VALUES (3, 3, 'undated later', NULL), (4, 4, 'dated later', now())")
    second = _run(tmp_path, job)
    assert second.succeeded
    assert "2 row(s) of public.orders have NULL in updated_at: incremental runs never extract them" in caplog.text
    assert sorted(r["note"] for r in read_output(tmp_path / "output", "public.orders")) == ["dated", "dated later", "undated"]
    job["source"]["null_watermark"] = "report"  # an input problem: the run exits 1, naming the rows
    reported = _run(tmp_path, job)
    assert not reported.succeeded
    assert "2 row(s) of public.orders have NULL in updated_at" in str(reported)


def test_where_narrows_every_query_and_may_hold_a_percent_sign(tmp_path: Path, pg, db) -> None:
    with pg.connect(db) as conn:
        _create_orders(conn)
        conn.execute("INSERT INTO orders SELECT i, i, CASE WHEN i % 3 = 0 THEN 'keep%' ELSE 'drop' END, "
                     "now() - interval '1 hour' + i * interval '1 second' FROM generate_series(1, 300) i")
    job = jdbc_job(tmp_path, pg, db, [{**ORDERS, "where": "note LIKE 'keep%'", "columns": ["id", "note"]}])
    assert _run(tmp_path, job).succeeded
    rows = read_output(tmp_path / "output", "public.orders")
    assert sorted(r["id"] for r in rows) == list(range(3, 301, 3))
    assert set(rows[0]) == {"id", "note", "updated_at"}  # the watermark column is always selected


def test_a_percent_sign_in_where_counts_the_rows_it_names(tmp_path: Path, pg, db, caplog) -> None:
    """The NULL and ±infinity counts run `where` as the other queries do: `'50%'` is a literal, not `'50%%'`."""
    with pg.connect(db) as conn:
        _create_orders(conn)
        conn.execute("INSERT INTO orders VALUES (1, 1, '50%', now() - interval '1 hour'), (2, 2, '50%', NULL), "
                     "(3, 3, '50%', 'infinity')")
    job = jdbc_job(tmp_path, pg, db, [{**ORDERS, "where": "note = '50%'"}])
    assert _run(tmp_path, job).succeeded
    assert _run(tmp_path, job).succeeded
    assert "1 row(s) of public.orders have NULL in updated_at" in caplog.text
    assert "1 row(s) of public.orders have infinity or -infinity in updated_at" in caplog.text


def test_a_row_committed_late_at_the_boundary_is_not_lost_thanks_to_the_lag(tmp_path: Path, pg, db) -> None:
    """A writer stamps its row 30 minutes before it commits (a long transaction): the row is invisible to a run in
    between. With a 1-hour lag that run's upper bound stays below the row's watermark, so a later run takes it; with
    no lag the run commits a bound past the row, and no later run ever looks there again."""
    results = {}
    for name, lag in (("lag", "1 hour"), ("nolag", 0)):
        with pg.connect(db) as conn:
            conn.execute("DROP TABLE IF EXISTS orders")
            _create_orders(conn)
            conn.execute("INSERT INTO orders VALUES (1, 1, 'early', now() - interval '2 hours')")
        tmp = tmp_path / name
        tmp.mkdir()
        slow = pg.connect(db, autocommit=False)
        slow.execute("INSERT INTO orders VALUES (2, 2, 'late', now() - interval '30 minutes')")
        try:
            assert _run(tmp, jdbc_job(tmp, pg, db, [{**ORDERS, "watermark_lag": lag}])).succeeded
        finally:
            slow.commit()
            slow.close()
        assert _run(tmp, jdbc_job(tmp, pg, db, [{**ORDERS, "watermark_lag": 0}])).succeeded  # later: the lag has passed
        results[name] = sorted(r["note"] for r in read_output(tmp / "output", "public.orders"))
    assert results == {"lag": ["early", "late"], "nolag": ["early"]}


@pytest.mark.spark
def test_on_spark_each_sub_range_is_a_task(tmp_path: Path, pg, db) -> None:
    with pg.connect(db) as conn:
        _create_orders(conn)
        conn.execute("INSERT INTO orders SELECT i, i, 'x', now() - interval '1 day' + i * interval '1 second' "
                     "FROM generate_series(1, 5000) i")
    write_job(tmp_path, jdbc_job(tmp_path, pg, db, [ORDERS]))
    done = run_cli("run", "job.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = read_output(tmp_path / "output", "public.orders")
    assert sorted(r["id"] for r in rows) == list(range(1, 5001))
    assert len(list((tmp_path / "output" / "public.orders").rglob("*.avro"))) == 4


def test_a_column_added_upstream_is_read_from_then_on_and_reported(tmp_path: Path, pg, db) -> None:
    with pg.connect(db) as conn:
        _create_orders(conn)
        conn.execute("INSERT INTO orders SELECT i, i, 'v1', now() - interval '1 day' FROM generate_series(1, 50) i")
    write_job(tmp_path, jdbc_job(tmp_path, pg, db, [ORDERS]))

    def run() -> str:
        done = run_cli("run", "job.yaml", "--in-process", cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr  # a notice, not a failure
        return done.stdout

    assert "since the last run" not in run()
    with pg.connect(db) as conn:
        conn.execute("ALTER TABLE orders ADD COLUMN channel text")
        conn.execute("INSERT INTO orders SELECT i, i, 'v1', now(), 'web' FROM generate_series(51, 60) i")
    out = run()
    assert "public.orders: column(s) channel added to public.orders since the last run: read from now on" in out
    rows = read_output(tmp_path / "output", "public.orders")
    assert {r["id"]: r.get("channel") for r in rows if r["id"] > 50} == {i: "web" for i in range(51, 61)}
    assert "since the last run" not in run()  # reported once: the commit kept the new column list
    with pg.connect(db) as conn:
        conn.execute("ALTER TABLE orders DROP COLUMN note")
    assert "public.orders: column(s) note no longer in public.orders" in run()


def test_a_small_tables_first_load_is_estimated_from_the_catalog_and_stays_in_the_driver(tmp_path: Path, pg, db) -> None:
    """20,000 rows: 1 KiB a row (nothing known yet) would send them to Spark; the table's own size keeps them here."""
    with pg.connect(db) as conn:
        _create_orders(conn)
        conn.execute("INSERT INTO orders SELECT i, i, 'x', now() - interval '1 day' + i * interval '1 second' "
                     "FROM generate_series(1, 20000) i")
        table_bytes = conn.execute("SELECT pg_table_size('orders')").fetchone()[0]
    write_job(tmp_path, jdbc_job(tmp_path, pg, db, [ORDERS]))
    shown = run_cli("plan", "job.yaml", "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    planned = json.loads(shown.stdout)
    assert planned["runs_in"] == "driver"
    total = sum(w["estimated_bytes"] for t in planned["tasks"] for w in t["workunits"])
    assert 0.9 * table_bytes <= total <= 1.1 * table_bytes < 20000 * 1024


def test_a_table_read_natively_stays_in_the_driver_over_the_limit_and_one_read_in_python_goes_to_spark(
        tmp_path: Path, pg, db) -> None:
    """The native reader's work runs outside Python's lock, as fast on the driver's two threads as on local[2]:
    it does not count against spark.in_driver_below; the row reader's does."""
    with pg.connect(db) as conn:
        _create_orders(conn)
        conn.execute("INSERT INTO orders SELECT i, i, 'x', now() - interval '1 day' + i * interval '1 second' "
                     "FROM generate_series(1, 20000) i")

    def where(reader: str) -> dict:
        job = jdbc_job(tmp_path, pg, db, [ORDERS], reader=reader, max_workunits=2)
        job["writer"] = {"class": "parquet"}
        job["spark"]["in_driver_below"] = "64KiB"
        write_job(tmp_path, job)
        shown = run_cli("plan", "job.yaml", "--json", cwd=tmp_path)
        assert shown.returncode == 0, shown.stdout + shown.stderr
        return json.loads(shown.stdout)

    native, rows = where("native"), where("rows")
    assert sum(t["estimated_bytes"] for t in native["tasks"]) > 64 * 1024
    assert native["runs_in"] == "driver" and all(t["native_share"] > 0.9 for t in native["tasks"])
    assert rows["runs_in"] == "local[2]", rows
    assert all(t["native_share"] == 0 for t in rows["tasks"])


def test_a_big_ranges_split_comes_from_a_sample_and_every_row_is_read_once(tmp_path: Path, pg, db,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Past SAMPLE_ABOVE rows the boundaries are quantiles of a sample of the table's pages, not a sort of every value:
    the tasks stay about even and every row is read once. A table the catalog counts past SAMPLE_ABOVE rows is not
    counted: the sample's estimate stands in (a scan less); a view is counted and split exactly."""
    from gobblin_py.builtin.sources.jdbc import postgres

    monkeypatch.setattr(postgres, "SAMPLE_ABOVE", 1000)
    monkeypatch.setattr(postgres, "SAMPLE_ROWS", 4000)
    sampleable: list[bool] = []
    asked = postgres.PostgresQueries._sampleable
    monkeypatch.setattr(postgres.PostgresQueries, "_sampleable", lambda q, conn: sampleable.append(asked(q, conn)) or sampleable[-1])
    with pg.connect(db) as conn:
        _create_orders(conn)
        conn.execute("INSERT INTO orders SELECT i, i, 'x', now() - interval '1 day' + i * interval '1 second' "
                     "FROM generate_series(1, 20000) i")
        conn.execute("CREATE VIEW orders_view AS SELECT * FROM orders")
        conn.execute("ANALYZE orders")  # the catalog's count: 20,000 rows
    counted: list[Any] = []
    count_range = postgres.PostgresQueries.count_range
    monkeypatch.setattr(postgres.PostgresQueries, "count_range", lambda q, conn, r: counted.append(q.table) or count_range(q, conn, r))
    for table in ("public.orders", "public.orders_view"):
        (tmp_path / table).mkdir()
        job = jdbc_job(tmp_path / table, pg, db, [{**ORDERS, "table": table}], partitions=4)
        spec = load_job(write_job(tmp_path / table, job))
        units = plan(spec, StateStore(spec.job.work_dir, spec.name)).workunits
        estimated = sum(JdbcSplit.of(u).estimated_rows for u in units)
        if table == "public.orders":  # the sample's estimate, not a count
            assert len(units) == 4 and 15000 <= estimated <= 25000 and not counted, (estimated, counted)
        else:
            assert len(units) == 4 and estimated == 20000 and len(counted) == 1, (estimated, counted)  # exact
        result = _run(tmp_path / table, job)
        assert result.succeeded, result.error
        ids = [r["id"] for r in read_output(tmp_path / table / "output", table)]
        assert sorted(ids) == list(range(1, 20001))  # each row once
        per_task = sorted(t.records_extracted for t in result.tasks)
        assert per_task[0] > 2000 and per_task[-1] < 8000, per_task  # about a quarter each
    assert sampleable == [True, True, False, False]  # the table sampled (planned twice), the view not
    # an incremental range of the same table is counted, not sampled: its count is an index range (cheaper)
    from gobblin_py.builtin.sources.jdbc.ranges import Range

    counted.clear()
    with pg.connect(db) as conn:
        lo, hi = conn.execute("SELECT min(updated_at) + interval '1000 seconds', max(updated_at) FROM orders").fetchone()
        queries = postgres.PostgresQueries(type("T", (), {**ORDERS, "key_columns": ["id"], "where": None})(), "public",
                                           "orders", ["id", "updated_at"], "timestamptz", "orders", watermark_not_null=False)
        rows, bounds = queries.split(conn, Range(lo, hi), 4)
    assert rows == 18999 and len(bounds) == 3 and len(counted) == 1, (rows, bounds, counted)


def _plan_of(pg: Any, db: str, spec: Any, unit: Any) -> tuple[str, str]:
    """The node types and the conditions of the plan PostgreSQL makes for the query `unit`'s extractor reads (EXPLAIN,
    sequential scans priced out)."""
    from psycopg import sql

    from gobblin_py.builtin.sources.jdbc.extractor import JdbcExtractor

    query, params = JdbcExtractor(spec.source.settings, unit, None)._select()  # type: ignore[arg-type]
    with pg.connect(db) as conn:
        conn.execute("SET enable_seqscan = off")
        [[explained]] = conn.execute(sql.SQL("EXPLAIN (FORMAT JSON) ") + query, params).fetchall()
    nodes, types, conditions = [explained[0]["Plan"]], [], []
    while nodes:
        node = nodes.pop()
        types.append(node["Node Type"])
        conditions += [f"{key}: {node[key]}" for key in ("Index Cond", "Filter") if key in node]
        nodes += node.get("Plans", [])
    return " ".join(types), "; ".join(conditions)


def test_a_not_null_watermarks_first_sub_range_is_an_index_range_and_a_nullable_ones_keeps_its_nulls(
        tmp_path: Path, pg, db) -> None:
    """The first sub-range of a first load, `(start, hi]`, reads the rows without a watermark too; of a NOT NULL column
    there are none, and without the `IS NULL` arm the condition is a range of the column's index (with it, PostgreSQL
    filtered the whole index: 0.62 s of the server's time for 500,000 rows against 0.19 s). A nullable column keeps
    the arm: its NULL rows are in the first load, each once."""
    with pg.connect(db) as conn:
        conn.execute("CREATE TABLE strict (id bigint PRIMARY KEY, note text, updated_at timestamptz NOT NULL)")
        conn.execute("INSERT INTO strict SELECT i, 'v1', now() - interval '1 day' + i * interval '1 second' "
                     "FROM generate_series(1, 20000) i")
        conn.execute("CREATE TABLE loose AS SELECT * FROM strict")  # the same rows, updated_at nullable
        conn.execute("ALTER TABLE loose ADD PRIMARY KEY (id)")
        conn.execute("INSERT INTO loose VALUES (20001, 'undated', NULL), (20002, 'undated', NULL)")
        for table in ("strict", "loose"):
            conn.execute(f"CREATE INDEX ON {table} (updated_at)")
            conn.execute(f"ANALYZE {table}")
    for table, rows, indexed in (("public.strict", 20000, True), ("public.loose", 20002, False)):
        (tmp_path / table).mkdir()
        job = jdbc_job(tmp_path / table, pg, db, [{**ORDERS, "table": table}], partitions=4)
        spec = load_job(write_job(tmp_path / table, job))
        units = plan(spec, StateStore(spec.job.work_dir, spec.name)).workunits
        [first] = [u for u in units if JdbcSplit.of(u).lo is None]
        assert JdbcSplit.of(first).watermark_not_null is indexed
        types, conditions = _plan_of(pg, db, spec, first)
        if indexed:  # one range of the index, read in its order: nothing filtered, no arm for NULLs
            assert "Index Scan" in types and "Bitmap" not in types, (types, conditions)
            assert conditions.startswith("Index Cond:") and "<=" in conditions and ";" not in conditions, conditions
        assert ("IS NULL" in conditions) is not indexed, conditions
        result = _run(tmp_path / table, job)
        assert result.succeeded, result.error
        ids = sorted(r["id"] for r in read_output(tmp_path / table / "output", table))
        assert ids == list(range(1, rows + 1))  # each row once, the nullable table's NULL ones included


@pytest.mark.parametrize("reader", ["auto", "rows"])
def test_warm_up_imports_what_a_task_imports_before_its_first_read(pg, db, reader: str) -> None:
    """`JdbcSource.warm_up` (run by the runner while it plans) imports the driver, the extractor and, unless `reader:
    rows`, the native reader: a fresh interpreter has them afterwards, not before."""
    import subprocess
    import sys

    modules = ["psycopg", "gobblin_py.builtin.sources.jdbc.extractor", "adbc_driver_postgresql.dbapi"]
    code = (f"import json, sys; from gobblin_py.builtin.sources.jdbc.source import JdbcSource; "
            f"s = JdbcSource(JdbcSource.Settings.model_validate({{'url': {pg.url(db)!r}, 'password_env': {PASSWORD_ENV!r}, "
            f"'reader': {reader!r}, 'tables': [{ORDERS!r}]}})); m = {modules!r}; before = [x in sys.modules for x in m]; "
            "s.warm_up(); print(json.dumps([before, [x in sys.modules for x in m]]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, after = json.loads(done.stdout)
    assert before == [False, False, False], before
    assert after == [True, True, reader == "auto"], after


def test_a_table_dropped_and_created_again_is_refused_naming_both_oids_until_reset(tmp_path: Path, pg, db) -> None:
    """A table reloaded by DROP and CREATE (a restore, a migration) with rows older than the committed watermark:
    before the fix the next run read only the rows above the watermark and said committed, the reloaded rows below it
    never read. Now the table is an input problem naming both relation oids (exit 1, the other tables go on), until
    `state reset` of the dataset, after which the new table is loaded whole."""
    with pg.connect(db) as conn:
        _create_orders(conn)
        conn.execute("INSERT INTO orders SELECT i, i, 'v1', now() - interval '2 days' FROM generate_series(1, 50) i")
        conn.execute("CREATE TABLE other (id bigint PRIMARY KEY, updated_at timestamptz)")
        conn.execute("INSERT INTO other SELECT i, now() - interval '1 day' FROM generate_series(1, 5) i")
    other = {"table": "public.other", "watermark_column": "updated_at", "primary_key": "id"}
    write_job(tmp_path, jdbc_job(tmp_path, pg, db, [ORDERS, other]))
    assert run_cli("run", "job.yaml", "--in-process", cwd=tmp_path).returncode == 0
    with pg.connect(db) as conn:
        old = conn.execute("SELECT 'public.orders'::regclass::oid::bigint").fetchone()[0]
        conn.execute("DROP TABLE orders")
        _create_orders(conn)  # reloaded: rows stamped before the committed watermark, and one after
        conn.execute("INSERT INTO orders SELECT i, i, 'reloaded', now() - interval '3 days' FROM generate_series(100, 140) i")
        conn.execute("INSERT INTO orders VALUES (141, 1, 'new', now())")
        conn.execute("INSERT INTO other SELECT i, now() FROM generate_series(6, 8) i")
        new = conn.execute("SELECT 'public.orders'::regclass::oid::bigint").fetchone()[0]
    refused = run_cli("run", "job.yaml", "--in-process", cwd=tmp_path)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert f"read from table (relation oid) {old}, and it is now {new}" in refused.stdout, refused.stdout
    assert "state reset job.yaml --dataset public.orders" in refused.stdout.replace("JOB.yaml", "job.yaml")
    assert sorted(r["id"] for r in read_output(tmp_path / "output", "public.orders")) == list(range(1, 51))
    assert sorted(r["id"] for r in read_output(tmp_path / "output", "public.other")) == list(range(1, 9))  # goes on
    reset = run_cli("state", "reset", "job.yaml", "--dataset", "public.orders", "--yes", cwd=tmp_path)
    assert reset.returncode == 0, reset.stderr
    assert run_cli("run", "job.yaml", "--in-process", cwd=tmp_path).returncode == 0
    ids = [r["id"] for r in read_output(tmp_path / "output", "public.orders")]
    assert sorted(ids) == [*range(1, 51), *range(100, 142)]  # the old table's rows stay: the message says to check
    assert run_cli("run", "job.yaml", "--in-process", cwd=tmp_path).returncode == 0  # the new oid is kept: no refusal


def test_a_table_taken_out_of_the_job_is_named_not_in_the_source(tmp_path: Path, pg, db) -> None:
    """The summary names a committed table the job no longer lists, instead of calling it "no new data"."""
    with pg.connect(db) as conn:
        _create_orders(conn)
        conn.execute("CREATE TABLE refunds (LIKE orders)")
        conn.execute("INSERT INTO orders VALUES (1, 2.5, 'a', now()); INSERT INTO refunds VALUES (1, 1, 'r', now())")
    refunds = {**ORDERS, "table": "public.refunds"}
    job = jdbc_job(tmp_path, pg, db, [ORDERS, refunds])
    write_job(tmp_path, job)
    first = run_cli("run", "job.yaml", "--in-process", cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    job["source"]["tables"] = [ORDERS]
    write_job(tmp_path, job)
    again = run_cli("run", "job.yaml", "--in-process", cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "in state, not in the source: public.refunds." in again.stdout, again.stdout
    assert "public.orders" in again.stdout and "no new data" in again.stdout
