"""One decode of the slot per run, routed to every table (issue 45): tables at different committed positions (one
added later, one reset) whose changes share transactions each get exactly their own; a run killed in the middle of
the routed decode, or between two tables reading it, leaves every change once after the next run."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from cdc.cdc_jobs import cdc_job, read_changes, run, slot_position
from support.jobs import write_job

from gobblin_py.state.store import StateStore
from gobblin_py.testing.crash import SIGKILLED, cli, each_point

RUN = ["run", "job.yaml", "--in-process"]


def _replay(rows: list[dict[str, Any]]) -> dict[int, tuple[Any, ...]]:
    """The table an upsert of the change records in (_lsn, _seq) order gives: id → (v, n)."""
    table: dict[int, tuple[Any, ...]] = {}
    for r in rows:
        if r["_op"] == "truncate":
            table.clear()
        elif r["_op"] == "delete":
            table.pop(r["id"], None)
        else:
            table[r["id"]] = (r["v"], r["n"])
    return table


def _equal(tmp: Path, conn: Any, table: str) -> None:
    """The table's change records, read back with the Apache avro package, are each once and replay to its SELECT."""
    rows = read_changes(tmp / "output", table)
    assert max(Counter(repr(sorted(r.items())) for r in rows).values()) == 1, f"{table}: a record twice"
    changes = [(r["_lsn"], r["_seq"]) for r in rows if r["_op"] != "read"]
    assert len(set(changes)) == len(changes), f"{table}: a change twice"
    want = {i: (v, n) for i, v, n in conn.execute(f"SELECT id, v, n FROM {table}").fetchall()}
    assert _replay(rows) == want, table


def _interleaved(conn: Any, tables: list[str], start: int) -> None:
    """Transactions each inserting, updating and deleting in every table, in turn."""
    for t in range(3):
        with conn.transaction():
            for k, table in enumerate(tables):
                i = start + 10 * t + k
                conn.execute(f"INSERT INTO {table} VALUES (%s, %s, %s)", (i, f"{table}-{i}", i))
                conn.execute(f"UPDATE {table} SET n = n + 1 WHERE id = (SELECT min(id) FROM {table})")
            conn.execute(f"DELETE FROM {tables[0]} WHERE id = (SELECT max(id) FROM {tables[0]})")


def _tables(conn: Any, *names: str) -> None:
    for name in names:
        conn.execute(f"CREATE TABLE {name} (id int PRIMARY KEY, v text, n int);"
                     f"INSERT INTO {name} VALUES (1, '{name}-1', 1), (2, '{name}-2', 2)")


def test_tables_at_different_positions_each_get_their_own_changes(tmp_path: Path, pg: Any, db: str) -> None:
    """a and b from the start, c added to the publication later, b reset: each run's tables sit at different
    committed positions and share every transaction, and each table's output is its SELECT after every run."""
    conn = pg.connect(db)
    _tables(conn, "public.a", "public.b", "public.c")
    conn.execute("CREATE PUBLICATION pub FOR TABLE public.a, public.b")
    job = cdc_job(tmp_path, pg, db, tables=["public.a", "public.b"], create_slot=True)
    assert run(tmp_path, job).succeeded
    _interleaved(conn, ["public.a", "public.b", "public.c"], 100)
    assert run(tmp_path, job).succeeded
    for table in ("public.a", "public.b"):
        _equal(tmp_path, conn, table)

    conn.execute("ALTER PUBLICATION pub ADD TABLE public.c")  # c joins: snapshotted while a and b read their changes
    job["source"]["tables"] = ["public.a", "public.b", "public.c"]
    _interleaved(conn, ["public.c", "public.a", "public.b"], 200)
    assert run(tmp_path, job).succeeded
    _interleaved(conn, ["public.b", "public.c", "public.a"], 300)
    assert run(tmp_path, job).succeeded  # c's position is its snapshot's end, past a's and b's
    for table in ("public.a", "public.b", "public.c"):
        _equal(tmp_path, conn, table)

    reset = cli(["state", "reset", "job.yaml", "--dataset", "public.b", "--yes"], tmp_path)
    assert reset.returncode == 0, reset.stdout + reset.stderr
    _interleaved(conn, ["public.a", "public.b", "public.c"], 400)
    assert run(tmp_path, job).succeeded  # b snapshotted again, its old records replaced by the snapshot's truncate
    _interleaved(conn, ["public.c", "public.b", "public.a"], 500)
    conn.execute("TRUNCATE public.c")
    _interleaved(conn, ["public.a", "public.c"], 600)
    assert run(tmp_path, job).succeeded
    for table in ("public.a", "public.b", "public.c"):
        _equal(tmp_path, conn, table)
    conn.close()


def _published(tmp_path: Path, pg: Any, prefix: str, n: int) -> tuple[str, Any, list[str], dict[str, Any]]:
    """A database of its own with `n` tables in one publication, and the job over them in `tmp_path/<n>` (creating
    the slot): the database, a connection to it, the tables and the job."""
    db = pg.create_database(f"{prefix}{n}_{tmp_path.name[-8:].lower()}")
    conn = pg.connect(db)
    names = [f"public.t{i}" for i in range(n)]
    _tables(conn, *names)
    conn.execute(f"CREATE PUBLICATION pub FOR TABLE {', '.join(names)}")
    (tmp_path / str(n)).mkdir()
    return db, conn, names, cdc_job(tmp_path / str(n), pg, db, tables=names, create_slot=True)


def _sessions(pg: Any, db: str, job: dict[str, Any], tmp: Path) -> int:
    """The connections the job's run opened to `db` (the server logs each with log_connections on)."""
    log = pg.dir / "log"
    before = log.read_text(errors="replace").count(f"database={db} application_name=gobblin-py cdc")
    assert run(tmp, job).succeeded
    return log.read_text(errors="replace").count(f"database={db} application_name=gobblin-py cdc") - before


def test_the_tables_of_one_slot_share_one_connection(tmp_path: Path, pg: Any) -> None:
    """Issue 45: the tables' WorkUnits of the slot's MultiWorkUnit read through one connection (the first table's,
    given back to the task), not one each: a run over 6 tables opens no more connections than over 1 table, but the
    slot step's one (the last table's commit finds the slot behind: it looks, then advances it)."""
    with pg.connect("postgres") as admin:
        admin.execute("ALTER SYSTEM SET log_connections = on")
        admin.execute("SELECT pg_reload_conf()")
    try:
        opened = {}
        for n in (1, 6):
            db, conn, names, job = _published(tmp_path, pg, "share", n)
            job["job"]["commit_parallelism"] = 1  # the slot steps' connections in a fixed order
            assert run(tmp_path / str(n), job).succeeded
            _interleaved(conn, names, 100)
            opened[n] = _sessions(pg, db, job, tmp_path / str(n))
            for table in names:
                _equal(tmp_path / str(n), conn, table)
            # the slot steps' kept connections ended by the server (a restart, a timeout): the next run opens new ones
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND "
                         "application_name = 'gobblin-py cdc'", (db,))
            _interleaved(conn, names, 200)
            assert run(tmp_path / str(n), job).succeeded
            for table in names:
                _equal(tmp_path / str(n), conn, table)
            marks = StateStore(tmp_path / str(n) / "work", "c").watermarks()
            assert slot_position(conn) == min(int(m["lsn"]) for m in marks.values())
            conn.close()
            with pg.connect(db) as c:
                c.execute("SELECT pg_drop_replication_slot('s1')")
        assert opened[6] <= opened[1] + 1, opened
    finally:
        with pg.connect("postgres") as admin:
            admin.execute("ALTER SYSTEM RESET log_connections")
            admin.execute("SELECT pg_reload_conf()")


@pytest.mark.crash
def test_kill_in_the_routed_decode(tmp_path_factory: Any, pg: Any) -> None:
    """SIGKILL while the decode spools (at its second transaction), once it is whole, and between the first and the
    second table reading it; then changes keep coming and a rerun: every change once in every table."""
    points = ["postgres_cdc.decode_midway:2", "postgres_cdc.spool_read:1", "postgres_cdc.spool_read:2"]
    dirs = [tmp_path_factory.mktemp("route") for _ in points]
    dbs = [pg.create_database(f"route_{n}") for n in range(len(points))]
    tables = ["public.a", "public.b", "public.c"]

    def check(n: int, point: str) -> None:
        tmp, db, slot = dirs[n], dbs[n], f"route_{n}"
        conn = pg.connect(db)
        _tables(conn, *tables)
        write_job(tmp, cdc_job(tmp, pg, db, tables=tables, create_publication=True, slot=slot))
        first = cli(RUN, tmp)
        assert first.returncode == 0, first.stdout + first.stderr
        _interleaved(conn, tables, 100)
        crashed = cli(RUN, tmp, crash_at=point)
        assert crashed.returncode == SIGKILLED, f"{point}: {crashed.stdout}{crashed.stderr}"
        _interleaved(conn, tables[::-1], 200)
        again = cli(RUN, tmp)
        assert again.returncode == 0, f"{point}: {again.stdout}{again.stderr}"
        for table in tables:
            _equal(tmp, conn, table)
        conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
        conn.close()

    each_point(points, check)


def _catalog_reads(pg: Any, db: str, job: dict[str, Any], tmp: Path) -> int:
    """The statements reading columns or indexes (pg_attribute, pg_index) the job's run sent to `db` (the server logs
    every statement, with its database)."""
    log = pg.dir / "log"
    start = len(log.read_text(errors="replace"))
    assert run(tmp, job).succeeded
    entries = re.split(r"\n(?=\d{4}-\d\d-\d\d )", log.read_text(errors="replace")[start:])
    sent = [e for e in entries if f"db={db} " in e and ("statement: " in e or "execute " in e)]  # simple or extended
    return sum(1 for e in sent if "pg_attribute" in e or "pg_index" in e)


def test_planning_reads_the_catalog_once_for_all_tables(tmp_path: Path, pg: Any) -> None:
    """Issue 45: a run over 6 tables plans from the catalog's columns and keys in as many statements as over 1 table
    (one query each for all tables, the primary key carried to the extractors), not four or five a table; each table's
    task then reads its primary key once more, the one check that a key changed since planning fails closed."""
    with pg.connect("postgres") as admin:
        admin.execute("ALTER SYSTEM SET log_statement = 'all'")
        admin.execute("ALTER SYSTEM SET log_line_prefix = '%m [%p] db=%d '")
        admin.execute("SELECT pg_reload_conf()")
    try:
        reads = {}
        for n in (1, 6):
            db, conn, names, job = _published(tmp_path, pg, "cat", n)
            assert run(tmp_path / str(n), job).succeeded
            _interleaved(conn, names, 100)
            reads[n] = _catalog_reads(pg, db, job, tmp_path / str(n))
            for table in names:
                _equal(tmp_path / str(n), conn, table)
            conn.execute("SELECT pg_drop_replication_slot('s1')")
            conn.close()
        assert reads[1] > 0 and reads[6] - reads[1] == 6 - 1, reads  # planning's alike; one key check a table more
    finally:
        with pg.connect("postgres") as admin:
            admin.execute("ALTER SYSTEM RESET log_statement")
            admin.execute("ALTER SYSTEM RESET log_line_prefix")
            admin.execute("SELECT pg_reload_conf()")
