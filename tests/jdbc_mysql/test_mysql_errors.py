"""Each failure of the jdbc source on MySQL/MariaDB named, through the real CLI, with the PostgreSQL exit codes:
one line saying what and where, no traceback, no password."""

from __future__ import annotations

from pathlib import Path

import pytest
from jdbc.jdbc_jobs import run_job
from jdbc_mysql.mariadb_server import PASSWORD, free_port
from jdbc_mysql.mysql_jobs import PASSWORD_ENV, mysql_job

TABLE = {"table": "t", "watermark_column": "updated", "primary_key": "id"}


@pytest.fixture
def table(maria, mdb) -> str:
    maria.execute(mdb, "CREATE TABLE t (id int PRIMARY KEY, updated bigint NOT NULL)",
                  "INSERT INTO t VALUES (1, 1), (2, 2), (3, 3)")
    return mdb


def _run(tmp: Path, job: dict, env: dict | None = None) -> tuple[int, str]:
    return run_job(tmp, job, PASSWORD, env)


def test_unreachable_database_fails_naming_it(tmp_path: Path, maria, table) -> None:
    job = mysql_job(tmp_path, maria, table, [TABLE])
    port = free_port()  # nothing listens there
    job["source"]["url"] = f"mysql://gobblin@127.0.0.1:{port}/{table}"
    code, text = _run(tmp_path, job)
    assert code == 1, text
    assert f"cannot connect to MySQL 127.0.0.1:{port}, database {table}: Can't connect to MySQL server" in text
    assert "Check that the database is running and source.url is right" in text


def test_bad_password_names_the_user_and_the_variable_never_the_password(tmp_path: Path, maria, table) -> None:
    code, text = _run(tmp_path, mysql_job(tmp_path, maria, table, [TABLE]), env={PASSWORD_ENV: "wrong-" + PASSWORD})
    assert code == 2, text
    assert f"MariaDB 127.0.0.1:{maria.port}, database {table}: authentication failed for user 'gobblin'; check the " \
           f"user in source.url and the password in ${PASSWORD_ENV}" in text
    assert "wrong-" not in text


def test_unknown_table_and_database(tmp_path: Path, maria, table) -> None:
    code, text = _run(tmp_path, mysql_job(tmp_path, maria, table, [{**TABLE, "table": f"{table}.nope"}]))
    assert code == 2, text
    assert f"table {table}.nope (source.tables[0]): no such table or view in database {table}" in text
    code, text = _run(tmp_path, mysql_job(tmp_path, maria, "no_such_db", [TABLE]))
    assert code == 2 and "database 'no_such_db' does not exist; check source.url" in text, text


@pytest.mark.parametrize("key, value", [("watermark_column", "changed"), ("columns", ["id", "missing"])])
def test_unknown_column_named_with_the_columns_there_are(tmp_path: Path, maria, table, key, value) -> None:
    code, text = _run(tmp_path, mysql_job(tmp_path, maria, table, [{**TABLE, key: value}]))
    assert code == 2, text
    name = value if isinstance(value, str) else value[1]
    assert "table t (source.tables[0]): " in text and f"{name!r} is not a column of the table (columns: id, updated)" in text


def test_unknown_column_in_where(tmp_path: Path, maria, table) -> None:
    code, text = _run(tmp_path, mysql_job(tmp_path, maria, table, [{**TABLE, "where": "nope > 1"}]))
    assert code == 2, text
    assert "table t (source.tables[0]): Unknown column 'nope' in " in text  # 'where clause' or 'WHERE', by version
    assert "(error 1054); check watermark_column, primary_key, columns and where" in text


def test_query_timeout_names_the_setting(tmp_path: Path, maria, table) -> None:
    slow = {**TABLE, "where": "SLEEP(0.2) = 0"}  # 3 rows: 0.6 s a scan
    code, text = _run(tmp_path, mysql_job(tmp_path, maria, table, [slow], statement_timeout="300ms"))
    assert code == 1, text
    assert "table t: planning (the range's row count and quantiles) was cancelled after statement_timeout 300ms" in text


@pytest.mark.parametrize("reader", ["rows", "native"])
def test_a_read_cancelled_by_the_timeout_names_the_range_and_the_setting(tmp_path: Path, maria, table, reader) -> None:
    """A view whose column `x` sleeps 0.5 s a row: planning never reads it, the read runs past the timeout."""
    maria.execute(table, "CREATE VIEW v AS SELECT id, updated, SLEEP(0.5) AS x FROM t")
    view = {"table": "v", "watermark_column": "updated", "primary_key": "id"}
    job = mysql_job(tmp_path, maria, table, [view], statement_timeout="1s", partitions=1, reader=reader)
    job["writer"] = {"class": "parquet"}
    code, text = _run(tmp_path, job)
    assert code == 1, text
    assert "table v: reading (None, 3] was cancelled after statement_timeout 1s; raise source.statement_timeout" in text
