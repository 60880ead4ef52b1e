"""Each failure of the jdbc source named, through the real CLI: one line saying what and where, no traceback,
no password."""

from __future__ import annotations

from pathlib import Path

import pytest
from jdbc.jdbc_jobs import PASSWORD_ENV, jdbc_job, run_job

from gobblin_py.demo.pg_server import PASSWORD, free_port

TABLE = {"table": "public.t", "watermark_column": "updated", "primary_key": "id"}


@pytest.fixture
def table(pg, db) -> str:
    with pg.connect(db) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, updated bigint NOT NULL)")
        conn.execute("INSERT INTO t SELECT i, i FROM generate_series(1, 100) i")
    return db


def _run(tmp: Path, job: dict, env: dict | None = None) -> tuple[int, str]:
    return run_job(tmp, job, PASSWORD, env)


def test_unreachable_database_fails_fast_naming_it(tmp_path: Path, pg, table) -> None:
    job = jdbc_job(tmp_path, pg, table, [TABLE])
    port = free_port()  # nothing listens there
    job["source"]["url"] = f"postgresql://gobblin@127.0.0.1:{port}/{table}"
    code, text = _run(tmp_path, job)
    assert code == 1, text
    assert f"cannot connect to PostgreSQL 127.0.0.1:{port}, database {table}: connection to server at" in text
    assert "Check that the database is running and source.url is right" in text


def test_bad_password_names_the_user_and_the_variable_never_the_password(tmp_path: Path, pg, table) -> None:
    code, text = _run(tmp_path, jdbc_job(tmp_path, pg, table, [TABLE]), env={PASSWORD_ENV: "wrong-" + PASSWORD})
    assert code == 2, text  # a configuration to fix (user or password), as an unknown table
    assert f"authentication failed for user 'gobblin'; check the user in source.url and the password in ${PASSWORD_ENV}" in text
    assert "wrong-" not in text


def test_unknown_table(tmp_path: Path, pg, table) -> None:
    code, text = _run(tmp_path, jdbc_job(tmp_path, pg, table, [{**TABLE, "table": "public.nope"}]))
    assert code == 2, text  # the job names what is not there: a bad job file, as validate would say
    assert f"table public.nope (source.tables[0]): no such table or view in database {table}" in text


@pytest.mark.parametrize("key, value", [("watermark_column", "changed"), ("primary_key", ["id", "other"]),
                                        ("columns", ["id", "missing"])])
def test_unknown_column_named_with_the_columns_there_are(tmp_path: Path, pg, table, key, value) -> None:
    code, text = _run(tmp_path, jdbc_job(tmp_path, pg, table, [{**TABLE, key: value}]))
    assert code == 2, text  # the job names what is not there: a bad job file, as validate would say
    name = value if isinstance(value, str) else value[1]
    assert "table public.t (source.tables[0]): " in text and f"{name!r} is not a column of the table (columns: id, updated)" in text


def test_unknown_column_in_where(tmp_path: Path, pg, table) -> None:
    code, text = _run(tmp_path, jdbc_job(tmp_path, pg, table, [{**TABLE, "where": "nope > 1"}]))
    assert code == 2, text  # the job names what is not there: a bad job file, as validate would say
    assert 'table public.t (source.tables[0]): column "nope" does not exist; check watermark_column, primary_key, columns and where' in text


def test_query_timeout_names_the_setting(tmp_path: Path, pg, table) -> None:
    slow = {**TABLE, "where": "pg_sleep(0.02) IS NOT NULL"}  # 100 rows: 2 s a scan
    code, text = _run(tmp_path, jdbc_job(tmp_path, pg, table, [slow], statement_timeout="300ms"))
    assert code == 1, text
    assert "table public.t: planning (the range's row count and quantiles) was cancelled after statement_timeout 300ms; " \
           "raise source.statement_timeout, or index the watermark column" in text


def test_validation_refuses_a_password_in_the_url_and_an_unset_variable(tmp_path: Path, pg, table) -> None:
    job = jdbc_job(tmp_path, pg, table, [TABLE])
    job["source"]["url"] = f"postgresql://gobblin:{PASSWORD}@127.0.0.1:{pg.port}/{table}"
    code, text = _run(tmp_path, job)
    assert code == 2 and "holds a secret (a password in the URL's user info): remove it from the url" in text
    job = jdbc_job(tmp_path, pg, table, [TABLE], password_env="GOBBLIN_TEST_UNSET_VARIABLE")
    code, text = _run(tmp_path, job)
    assert code == 2 and "password_env: the environment variable it names is not set" in text
    assert "GOBBLIN_TEST_UNSET_VARIABLE" not in text  # it may be the password itself, given by mistake


def test_without_psycopg_the_job_says_what_to_install(tmp_path: Path, pg, table) -> None:
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "psycopg.py").write_text("raise ImportError('psycopg is not installed (blocked by the test)')\n")
    code, text = _run(tmp_path, jdbc_job(tmp_path, pg, table, [TABLE]), env={"PYTHONPATH": str(blocker)})
    assert code == 2, text
    assert "the jdbc source needs psycopg 3: pip install 'gobblin-py[jdbc]'" in text


SLOW_VIEW = """CREATE FUNCTION slow(i int) RETURNS int IMMUTABLE LANGUAGE plpgsql AS 'BEGIN PERFORM pg_sleep(0.05); RETURN i; END';
CREATE VIEW v AS SELECT id, updated, slow(id) AS x FROM t"""
VIEW = {"table": "public.v", "watermark_column": "updated", "primary_key": "id"}


@pytest.fixture
def slow_view(pg, table) -> str:
    """A view whose column `x` takes 50 ms a row to read (5 s for the 100 rows); planning never reads it."""
    with pg.connect(table) as conn:
        conn.execute(SLOW_VIEW)
    return table


@pytest.mark.parametrize("reader", ["rows", "native"])
def test_a_read_cancelled_by_the_timeout_names_the_range_and_the_setting(tmp_path: Path, pg, slow_view, reader) -> None:
    job = jdbc_job(tmp_path, pg, slow_view, [VIEW], statement_timeout="1s", partitions=1, reader=reader)
    code, text = _run(tmp_path, job)
    assert code == 1, text
    assert "table public.v: reading (None, 100] was cancelled after statement_timeout 1s; raise source.statement_timeout" in text


@pytest.mark.parametrize("reader", ["rows", "native"])
def test_a_connection_ended_by_the_server_mid_read_is_named_and_nothing_committed(tmp_path: Path, pg, slow_view,
                                                                                 reader) -> None:
    import threading

    def terminate() -> None:  # as an operator's pg_terminate_backend, or a failover, would
        with pg.connect(slow_view) as admin:
            for _ in range(100):
                ended = admin.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
                                      "application_name = 'gobblin-py' AND state = 'active' AND now() - query_start > "
                                      "interval '0.5 s'").fetchone()[0]  # the read: planning's queries are quick
                if ended:
                    return
                threading.Event().wait(0.1)

    killer = threading.Thread(target=terminate)
    killer.start()
    job = jdbc_job(tmp_path, pg, slow_view, [VIEW], partitions=1, reader=reader)
    code, text = _run(tmp_path, job)
    killer.join()
    assert code != 0, text
    assert f"lost the connection to PostgreSQL 127.0.0.1:{pg.port} reading public.v (None, 100]" in text
    assert not (tmp_path / "output").exists() or not list((tmp_path / "output").rglob("*.avro"))
