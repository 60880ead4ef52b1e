"""A primary key updated (`UPDATE t SET id = 10 WHERE id = 1`) with postgres_cdc: the change log holds a delete of the
old key just before the update (same `_lsn`, consecutive `_seq`), so an Iceberg table kept by key (`mode: upsert`)
drops the old key and equals `SELECT * FROM` the source, under the default and FULL replica identity and with a
composite key. A table whose key update cannot be known (REPLICA IDENTITY USING INDEX on another index) fails closed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cdc.cdc_jobs import cdc_job, read_changes, run

pytest.importorskip("pyiceberg")


def upsert_job(tmp: Path, pg: Any, db: str, table: str, key: list[str]) -> dict[str, Any]:
    job = cdc_job(tmp, pg, db, tables=[table], create_publication=True)
    job["writer"] = {"class": "parquet"}
    job["publisher"] = {"class": "iceberg", "table": "db.t", "warehouse": str(tmp / "warehouse"), "mode": "upsert",
                        "key": key, "order_by": ["_lsn", "_seq"],
                        "delete_when": {"column": "_op", "equals": ["delete"]},
                        "truncate_when": {"column": "_op", "equals": ["truncate"]}}
    return job


def table_rows(tmp: Path, columns: list[str]) -> list[tuple[Any, ...]]:
    from pyiceberg.catalog import load_catalog

    catalog = load_catalog("gobblin_py", type="sql", uri=f"sqlite:///{tmp / 'work' / 'iceberg' / 'catalog.db'}")
    rows = catalog.load_table("db.t").scan(selected_fields=tuple(columns)).to_arrow().to_pylist()
    return sorted(tuple(r[c] for c in columns) for r in rows)


def source_rows(conn: Any, table: str, columns: list[str]) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in conn.execute(f"SELECT {', '.join(columns)} FROM {table}").fetchall())


@pytest.mark.parametrize("identity", ["DEFAULT", "FULL"])
def test_a_key_update_deletes_the_old_key_in_the_upsert_table(tmp_path: Path, pg: Any, db: str, identity: str) -> None:
    """Before the fix the table kept key 1 beside key 10 (both identities)."""
    cols = ["id", "v"]
    conn = pg.connect(db)
    conn.execute("CREATE TABLE public.o (id int PRIMARY KEY, v text)")
    conn.execute(f"ALTER TABLE public.o REPLICA IDENTITY {identity}")
    conn.execute("INSERT INTO public.o SELECT i, 'v' || i FROM generate_series(1, 6) AS i")
    job = upsert_job(tmp_path, pg, db, "public.o", ["id"])
    assert run(tmp_path, job).succeeded
    conn.execute("UPDATE public.o SET id = 10 WHERE id = 1")
    with conn.transaction():  # A→B then B→A in one transaction
        conn.execute("UPDATE public.o SET id = 20, v = 'moved' WHERE id = 2")
        conn.execute("UPDATE public.o SET id = 2 WHERE id = 20")
    with conn.transaction():  # the key updated, then a new row at the old key
        conn.execute("UPDATE public.o SET id = 30 WHERE id = 3")
        conn.execute("INSERT INTO public.o VALUES (3, 'new three')")
    conn.execute("UPDATE public.o SET v = 'same key' WHERE id = 4")  # not a key update
    done = run(tmp_path, job)
    assert done.succeeded, done.error
    assert table_rows(tmp_path, cols) == source_rows(conn, "public.o", cols)
    conn.execute("UPDATE public.o SET id = 11 WHERE id = 10")  # the key updated again, in the next run
    done = run(tmp_path, job)
    assert done.succeeded, done.error
    assert table_rows(tmp_path, cols) == source_rows(conn, "public.o", cols)
    assert [r[0] for r in table_rows(tmp_path, cols)] == [2, 3, 4, 5, 6, 11, 30]


def test_a_composite_key_update_deletes_the_old_key(tmp_path: Path, pg: Any, db: str) -> None:
    cols = ["a", "b", "v"]
    conn = pg.connect(db)
    conn.execute("CREATE TABLE public.c (a int, b text, v text, PRIMARY KEY (a, b))")
    conn.execute("INSERT INTO public.c VALUES (1, 'x', 'one'), (1, 'y', 'two'), (2, 'x', 'three')")
    job = upsert_job(tmp_path, pg, db, "public.c", ["a", "b"])
    assert run(tmp_path, job).succeeded
    conn.execute("UPDATE public.c SET b = 'z' WHERE a = 1 AND b = 'x'")  # one key column of two changes
    conn.execute("UPDATE public.c SET a = 3, v = 'moved' WHERE a = 2")
    done = run(tmp_path, job)
    assert done.succeeded, done.error
    assert table_rows(tmp_path, cols) == source_rows(conn, "public.c", cols)


def test_the_change_log_holds_the_old_keys_delete_just_before_the_update(tmp_path: Path, pg: Any, db: str) -> None:
    """Every consumer of the plain change-log files sees it too: a delete of key 1, then the update to key 10, in the
    same transaction (`_lsn`) at consecutive `_seq`; an update that keeps its key is one record, as before."""
    conn = pg.connect(db)
    conn.execute("CREATE TABLE public.o (id int PRIMARY KEY, v text); INSERT INTO public.o VALUES (1, 'a'), (2, 'b')")
    job = cdc_job(tmp_path, pg, db, tables=["public.o"], create_publication=True)
    assert run(tmp_path, job).succeeded
    with conn.transaction():
        conn.execute("UPDATE public.o SET v = 'b2' WHERE id = 2")
        conn.execute("UPDATE public.o SET id = 10 WHERE id = 1")
    assert run(tmp_path, job).succeeded
    changes = [r for r in read_changes(tmp_path / "output", "public.o") if r["_op"] not in ("read", "truncate")]
    assert [(r["_op"], r["id"], r["v"]) for r in changes] == [("update", 2, "b2"), ("delete", 1, None), ("update", 10, "a")]
    assert len({r["_lsn"] for r in changes}) == 1 and [r["_seq"] for r in changes] == [0, 1, 2]


def test_replica_identity_using_another_index_is_refused_before_anything_runs(tmp_path: Path, pg: Any, db: str) -> None:
    """USING INDEX on a unique index other than the primary key: pgoutput sends the old row's index columns only when
    they change, never the old primary key, so a primary key update cannot be known. Before the fix the run succeeded
    and the upsert table kept key 1 beside key 10; now planning refuses the table, naming it and the fix, nothing
    committed; after the fix (identity back to DEFAULT, the table snapshotted again) the table equals the source."""
    from support.jobs import run_cli, write_job

    conn = pg.connect(db)
    conn.execute("CREATE TABLE public.o (id int PRIMARY KEY, email text NOT NULL, v text)")
    conn.execute("CREATE UNIQUE INDEX o_email ON public.o (email)")
    conn.execute("INSERT INTO public.o VALUES (1, 'a@x', 'a'), (2, 'b@x', 'b')")
    job = upsert_job(tmp_path, pg, db, "public.o", ["id"])
    assert run(tmp_path, job).succeeded
    conn.execute("ALTER TABLE public.o REPLICA IDENTITY USING INDEX o_email")
    conn.execute("INSERT INTO public.o VALUES (3, 'c@x', 'c')")
    conn.execute("UPDATE public.o SET id = 10 WHERE id = 1")
    write_job(tmp_path, job)
    done = run_cli("run", "job.yaml", "--in-process", cwd=tmp_path)
    text = done.stdout + done.stderr
    assert done.returncode == 2 and "Traceback" not in text, text
    for said in ("table public.o has REPLICA IDENTITY USING INDEX o_email, not its primary key o_pkey",
                 "ALTER TABLE public.o REPLICA IDENTITY DEFAULT", "state reset JOB.yaml --dataset public.o"):
        assert said in text, text
    assert table_rows(tmp_path, ["id", "email", "v"]) == [(1, "a@x", "a"), (2, "b@x", "b")]
    conn.execute("ALTER TABLE public.o REPLICA IDENTITY DEFAULT")
    reset = run_cli("state", "reset", "job.yaml", "--dataset", "public.o", "--yes", cwd=tmp_path)
    assert reset.returncode == 0, reset.stdout + reset.stderr
    assert run(tmp_path, job).succeeded
    assert table_rows(tmp_path, ["id", "email", "v"]) == source_rows(conn, "public.o", ["id", "email", "v"])


def test_replica_identity_nothing_refuses_the_update_in_postgresql_itself(pg: Any, db: str) -> None:
    """REPLICA IDENTITY NOTHING (or DEFAULT without a primary key) on a published table: PostgreSQL refuses the UPDATE
    and DELETE themselves (the publication must publish them), so no key update is ever missed."""
    import psycopg

    conn = pg.connect(db)
    conn.execute("CREATE TABLE public.n (id int PRIMARY KEY, v text); ALTER TABLE public.n REPLICA IDENTITY NOTHING")
    conn.execute("CREATE PUBLICATION pub FOR TABLE public.n; INSERT INTO public.n VALUES (1, 'a')")
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match="replica identity"):
        conn.execute("UPDATE public.n SET id = 10 WHERE id = 1")


@pytest.mark.parametrize("identity", ["USING INDEX o_pkey", "FULL, no primary key"])
def test_other_identities_that_send_the_old_key_keep_the_table_equal(tmp_path: Path, pg: Any, db: str, identity: str) -> None:
    """USING INDEX on the primary key's own index sends the old key as DEFAULT does; FULL on a table without a primary
    key (kept by a unique column) sends the whole old row, and every changed row comes as delete + update."""
    cols = ["id", "v"]
    conn = pg.connect(db)
    if identity.startswith("FULL"):
        conn.execute("CREATE TABLE public.o (id int NOT NULL UNIQUE, v text); ALTER TABLE public.o REPLICA IDENTITY FULL")
    else:
        conn.execute("CREATE TABLE public.o (id int CONSTRAINT o_pkey PRIMARY KEY, v text);"
                     "ALTER TABLE public.o REPLICA IDENTITY USING INDEX o_pkey")
    conn.execute("INSERT INTO public.o SELECT i, 'v' || i FROM generate_series(1, 4) AS i")
    job = upsert_job(tmp_path, pg, db, "public.o", ["id"])
    assert run(tmp_path, job).succeeded
    with conn.transaction():
        conn.execute("UPDATE public.o SET id = 10 WHERE id = 1")
        conn.execute("UPDATE public.o SET v = 'w' WHERE id = 2")
        conn.execute("UPDATE public.o SET id = 30 WHERE id = 3")
        conn.execute("INSERT INTO public.o VALUES (3, 'again')")
    done = run(tmp_path, job)
    assert done.succeeded, done.error
    assert table_rows(tmp_path, cols) == source_rows(conn, "public.o", cols)
