"""DDL that changes the values of a captured table's existing rows without any change in the WAL, so no change record
ever carries them: `ADD COLUMN … DEFAULT 7` (PostgreSQL's fast default: pg_attribute.atthasmissing), a column added
with a volatile default (the table rewritten, nothing decoded), `ALTER COLUMN … TYPE … USING …` (every row rewritten).
Each test reproduced the divergence first (the run exited 0 and the Iceberg upsert table kept the old values); now
the table fails alone, naming the column, what changed and the re-snapshot, and the remedy makes it equal the source.
DDL that leaves existing rows as they were (a column added without a default or dropped, a default set, a table
truncated or rewritten as it is) keeps running."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cdc.cdc_jobs import PASSWORD_ENV, cdc_job
from support.jobs import run_cli, write_job

from gobblin_py.demo.pg_server import PASSWORD

pytest.importorskip("pyiceberg")

SETUP = ("CREATE TABLE public.a (id int PRIMARY KEY, v text, n int); CREATE TABLE public.b (id int PRIMARY KEY, v text, "
         "n int); INSERT INTO public.a SELECT i, 'a' || i, i FROM generate_series(1, 5) AS i; "
         "INSERT INTO public.b SELECT i, 'b' || i, i FROM generate_series(1, 3) AS i;")


def _job(tmp: Path, pg: Any, db: str) -> dict[str, Any]:
    """Tables a and b of publication `pub`, each kept by key in an Iceberg table (db.public_a, db.public_b)."""
    job = cdc_job(tmp, pg, db, tables=["public.a", "public.b"], create_publication=True)
    job["writer"] = {"class": "parquet"}
    job["publisher"] = {"class": "iceberg", "table": "db.{dataset}", "warehouse": str(tmp / "warehouse"),
                        "mode": "upsert", "key": ["id"], "order_by": ["_lsn", "_seq"],
                        "delete_when": {"column": "_op", "equals": ["delete"]},
                        "truncate_when": {"column": "_op", "equals": ["truncate"]}}
    return job


def _cli(tmp: Path, *args: str) -> tuple[int, str]:
    """`gobblin-py ARGS` in a child process: exit code and output, never a traceback or the password."""
    done = run_cli(*args, cwd=tmp, env={PASSWORD_ENV: PASSWORD})
    text = done.stdout + done.stderr
    assert "Traceback" not in text and PASSWORD not in text
    return done.returncode, text


def _run(tmp: Path) -> tuple[int, str]:
    return _cli(tmp, "run", "job.yaml", "--in-process")


def _columns(conn: Any, table: str) -> list[str]:
    return [r[0] for r in conn.execute("SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
                                       "AND NOT attisdropped ORDER BY attnum", (table,)).fetchall()]


def _source(conn: Any, table: str) -> dict[int, tuple[Any, ...]]:
    return {r[0]: tuple(r) for r in conn.execute(f"SELECT {', '.join(_columns(conn, table))} FROM {table}").fetchall()}


def _iceberg(tmp: Path, conn: Any, table: str) -> dict[int, tuple[Any, ...]]:
    """The Iceberg table of `table` read with pyiceberg, by key, in the source's columns (one it lacks reads None)."""
    from pyiceberg.catalog import load_catalog

    catalog = load_catalog("gobblin_py", type="sql", uri=f"sqlite:///{tmp / 'work' / 'iceberg' / 'catalog.db'}")
    rows = catalog.load_table(f"db.{table.replace('.', '_')}").scan().to_arrow().to_pylist()
    columns = _columns(conn, table)
    return {r["id"]: tuple(r.get(c) for c in columns) for r in rows}


def _equal(tmp: Path, conn: Any, table: str) -> None:
    assert _iceberg(tmp, conn, table) == _source(conn, table)


@pytest.mark.parametrize("ddl, named", [
    ("ALTER TABLE public.a ADD COLUMN c int DEFAULT 7", "column c was added with DEFAULT 7"),
    ("ALTER TABLE public.a ADD COLUMN c float8 DEFAULT random()", "column c was added with DEFAULT random()"),
    ("ALTER TABLE public.a ALTER COLUMN n TYPE bigint USING n * 100", "column n changed type from integer to bigint"),
    ("ALTER TABLE public.a ALTER COLUMN n TYPE int USING n + 1", "column n was altered"),
])
def test_ddl_that_changes_existing_rows_without_the_wal_fails_the_table_alone(tmp_path: Path, pg: Any, db: str,
                                                                             ddl: str, named: str) -> None:
    """Before the fix each run exited 0 and public.a's Iceberg table kept null (or the old n) in every row that
    existed before the DDL; the source had 7 (a random value, n × 100, n + 1) there."""
    conn = pg.connect(db)
    conn.execute(SETUP)
    write_job(tmp_path, _job(tmp_path, pg, db))
    assert _run(tmp_path)[0] == 0
    conn.execute(ddl)
    conn.execute("INSERT INTO public.a (id, v, n) VALUES (10, 'after', 10); INSERT INTO public.b VALUES (10, 'b10', 10)")
    code, text = _run(tmp_path)
    assert code == 1, (code, text, _iceberg(tmp_path, conn, "public.a"), _source(conn, "public.a"))
    assert f"table public.a: {named}" in text, text
    assert "gobblin-py state reset JOB.yaml --dataset public.a --yes" in text and "table public.b" not in text, text
    _equal(tmp_path, conn, "public.b")  # the other table went on
    assert _run(tmp_path)[0] == 1  # still failing: nothing of public.a was read
    assert _cli(tmp_path, "state", "reset", "job.yaml", "--dataset", "public.a", "--yes")[0] == 0
    code, text = _run(tmp_path)
    assert code == 0, text
    for table in ("public.a", "public.b"):
        _equal(tmp_path, conn, table)
    conn.execute("UPDATE public.a SET v = 'later' WHERE id = 1")  # the snapshot recorded the table as it is now
    assert _run(tmp_path)[0] == 0
    _equal(tmp_path, conn, "public.a")


def test_ddl_that_leaves_existing_rows_as_they_were_keeps_running(tmp_path: Path, pg: Any, db: str) -> None:
    """A column added without a default (then given one), a default set on a column, a column dropped, a type widened
    in place (varchar(10) → varchar(20): no rewrite), a TRUNCATE and a VACUUM FULL (the table rewritten as it was):
    no row's value changed outside the WAL, so every run exits 0 and the Iceberg table equals the source."""
    conn = pg.connect(db)
    conn.execute(SETUP + "ALTER TABLE public.b ADD COLUMN w varchar(10) DEFAULT 'w'")  # before the first commit
    write_job(tmp_path, _job(tmp_path, pg, db))
    assert _run(tmp_path)[0] == 0
    for ddl in ("ALTER TABLE public.a ADD COLUMN c int",
                "ALTER TABLE public.a ALTER COLUMN c SET DEFAULT 5; ALTER TABLE public.a ALTER COLUMN n SET DEFAULT 1",
                "ALTER TABLE public.a DROP COLUMN v; ALTER TABLE public.b ALTER COLUMN w TYPE varchar(20)",
                "VACUUM FULL public.a; VACUUM FULL public.b",
                "TRUNCATE public.a"):
        for statement in ddl.split("; "):  # one at a time: VACUUM runs outside a transaction block
            conn.execute(statement)
        conn.execute("INSERT INTO public.a (id, n) VALUES ((SELECT coalesce(max(id), 0) + 1 FROM public.a), 0); "
                     "UPDATE public.b SET n = n + 1 WHERE id = 1")
        code, text = _run(tmp_path)
        assert code == 0, (ddl, text)
        for table in ("public.a", "public.b"):
            _equal(tmp_path, conn, table)
