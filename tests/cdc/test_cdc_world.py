"""What postgres_cdc checks before it reads, and what it does when the world changed: wal_level, a missing
publication, a user without REPLICATION, a slot dropped and re-created, a table altered in the range."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cdc.cdc_jobs import PASSWORD_ENV, cdc_job, read_changes, run, slot_position
from support.jobs import run_cli, write_job

from gobblin_py.demo.pg_server import PASSWORD

SETUP = "CREATE TABLE public.a (id int PRIMARY KEY, v text); INSERT INTO public.a VALUES (1, 'one');"


def _cli(tmp: Path, job: dict[str, Any]) -> tuple[int, str]:
    """`gobblin-py run` in a child process: exit code and output, never a traceback or the password."""
    write_job(tmp, job)
    done = run_cli("run", "job.yaml", "--in-process", cwd=tmp, env={PASSWORD_ENV: PASSWORD})  # not only after `pg` set it
    text = done.stdout + done.stderr
    assert "Traceback" not in text and PASSWORD not in text
    return done.returncode, text


def test_wal_level_replica_is_refused_before_anything_runs(tmp_path: Path) -> None:
    from gobblin_py.demo.pg_server import LocalPostgres

    with LocalPostgres() as plain:  # wal_level replica, the default
        plain.connect("postgres").execute(SETUP + "CREATE PUBLICATION pub FOR TABLE public.a")
        code, text = _cli(tmp_path, cdc_job(tmp_path, plain, "postgres"))
        assert code == 2 and "wal_level is 'replica'" in text and "wal_level = logical" in text
        assert plain.connect("postgres").execute("SELECT count(*) FROM pg_replication_slots").fetchone()[0] == 0
    assert not (tmp_path / "output").exists()


def test_missing_publication_and_no_replication_privilege(tmp_path: Path, pg: Any, db: str) -> None:
    conn = pg.connect(db)
    conn.execute(SETUP)
    code, text = _cli(tmp_path, cdc_job(tmp_path, pg, db))
    assert code == 2 and "publication 'pub' does not exist" in text and "create_publication" in text
    conn.execute("CREATE PUBLICATION pub FOR TABLE public.a")
    code, text = _cli(tmp_path, cdc_job(tmp_path, pg, db, tables=["public.a", "public.zz"]))
    assert code == 2 and "public.zz listed but not published" in text
    conn.execute(f"CREATE ROLE plain LOGIN PASSWORD '{PASSWORD}'; GRANT SELECT ON public.a TO plain")
    job = cdc_job(tmp_path, pg, db)
    job["source"]["url"] = job["source"]["url"].replace("gobblin@", "plain@")
    code, text = _cli(tmp_path, job)
    assert code == 2 and "user 'plain' may not use replication slots" in text and "REPLICATION" in text
    assert conn.execute("SELECT count(*) FROM pg_replication_slots WHERE database = %s", (db,)).fetchone()[0] == 0


def test_peek_up_to_an_lsn_gives_only_transactions_committing_before_it(pg: Any, db: str) -> None:
    """The rule the extractor relies on (PostgreSQL 16): peek's upto_lsn decodes every transaction whose commit
    record starts before it; the extractor keeps exactly those (commit LSN < end), whatever peek adds past it."""
    from gobblin_py.builtin.sources.postgres_cdc import pgoutput
    from gobblin_py.builtin.sources.postgres_cdc.settings import lsn_int

    conn = pg.connect(db)
    conn.execute(SETUP + "CREATE PUBLICATION pub FOR TABLE public.a")
    conn.execute("SELECT pg_create_logical_replication_slot('s1', 'pgoutput')")
    commits = []
    for i in range(2, 6):
        conn.execute("SET synchronous_commit = on")
        conn.execute("INSERT INTO public.a VALUES (%s, 'x')", (i,))
        commits.append(lsn_int(conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0]))

    def peeked(upto: int) -> list[int]:
        rows = conn.execute("SELECT data FROM pg_logical_slot_peek_binary_changes('s1', %s::pg_lsn, NULL, 'proto_version', "
                            "'1', 'publication_names', 'pub')", (f"{upto >> 32:X}/{upto & 0xFFFFFFFF:X}",)).fetchall()
        return [m.commit_lsn for m in (pgoutput.decode(bytes(d)) for (d,) in rows) if isinstance(m, pgoutput.Commit)]

    everything = peeked(commits[-1])
    assert len(everything) == 4
    for c in everything:
        assert [x for x in peeked(c + 1) if x <= c] == [x for x in everything if x <= c]  # all before, none lost
        assert all(x < c for x in peeked(c) if x != c) and c not in [x for x in peeked(c) if x < c]


def test_slot_dropped_and_recreated_fails_naming_slot_and_range(tmp_path: Path, pg: Any, db: str) -> None:
    conn = pg.connect(db)
    conn.execute(SETUP)
    job = cdc_job(tmp_path, pg, db, tables=["public.a"], create_publication=True)
    assert run(tmp_path, job).succeeded
    conn.execute("INSERT INTO public.a VALUES (2, 'lost')")
    conn.execute("SELECT pg_drop_replication_slot('s1')")
    conn.execute("SELECT pg_create_logical_replication_slot('s1', 'pgoutput')")
    code, text = _cli(tmp_path, job)
    assert code != 0 and "replication slot 's1' is at" in text and "past the committed position of table(s) public.a" in text
    assert "state reset" in text and "--dataset public.a" in text
    done = run_cli("state", "reset", "job.yaml", "--dataset", "public.a", "--yes", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    again = run(tmp_path, job)  # snapshotted again: row 2 is in it
    assert again.succeeded, again.error
    rows = read_changes(tmp_path / "output", "public.a")
    assert [(r["_op"], r["id"]) for r in rows if r["_op"] != "read"] == [("truncate", None)] * 2  # each snapshot's first
    assert sorted((r["_op"], r["id"]) for r in rows if r["_op"] == "read") == [("read", 1), ("read", 1), ("read", 2)]
    assert slot_position(conn) == int(next(iter(__import__("gobblin_py.state.store", fromlist=["x"]).StateStore(
        tmp_path / "work", "c").watermarks().values()))["lsn"])


def test_a_table_dropped_and_created_again_between_runs_fails_naming_both_oids(tmp_path: Path, pg: Any, db: str) -> None:
    """DROP and CREATE between runs leave no change of the old rows in the stream: the table's recorded relation oid
    tells, and the run fails closed instead of leaving the old rows in the output as if they still were."""
    conn = pg.connect(db)
    conn.execute(SETUP)
    job = cdc_job(tmp_path, pg, db, tables=["public.a"], create_publication=True)
    assert run(tmp_path, job).succeeded
    old = conn.execute("SELECT 'public.a'::regclass::oid").fetchone()[0]
    conn.execute("DROP TABLE public.a; CREATE TABLE public.a (id int PRIMARY KEY, v text); "
                 "INSERT INTO public.a VALUES (5, 'new'); ALTER PUBLICATION pub ADD TABLE public.a")
    new = conn.execute("SELECT 'public.a'::regclass::oid").fetchone()[0]
    code, text = _cli(tmp_path, job)
    assert code != 0 and f"dropped and created again since its last commit (relation oid {old}, now {new})" in text
    assert "--dataset public.a" in text
    assert run_cli("state", "reset", "job.yaml", "--dataset", "public.a", "--yes", cwd=tmp_path).returncode == 0
    assert run(tmp_path, job).succeeded
    rows = read_changes(tmp_path / "output", "public.a")
    assert [(r["_op"], r["id"]) for r in rows] == [("truncate", None), ("read", 1), ("truncate", None), ("read", 5)]


def test_another_cluster_at_the_same_address_fails_naming_both_system_identifiers(tmp_path: Path, pg: Any, db: str) -> None:
    """The database restored on (or replaced by) another PostgreSQL cluster: its LSNs mean nothing against the
    committed position. Here, a second real server with the same database, table, publication and slot."""
    from cdc.conftest import LOGICAL

    from gobblin_py.demo.pg_server import LocalPostgres

    conn = pg.connect(db)
    conn.execute(SETUP)
    job = cdc_job(tmp_path, pg, db, tables=["public.a"], create_publication=True)
    assert run(tmp_path, job).succeeded
    with LocalPostgres(LOGICAL) as other:
        other.create_database(db)
        other.connect(db).execute(SETUP + "INSERT INTO public.a VALUES (2, 'only there')")
        ids = [c.execute("SELECT system_identifier::text FROM pg_control_system()").fetchone()[0]
               for c in (conn, other.connect(db))]
        code, text = _cli(tmp_path, cdc_job(tmp_path, other, db, tables=["public.a"], create_publication=True))
        assert code != 0, text
        assert f"committed from PostgreSQL cluster {ids[0]}" in text and f"is now cluster {ids[1]}" in text
        assert "--dataset public.a" in text


def test_column_added_reads_null_before_it_and_a_dropped_column_fails_naming_it(tmp_path: Path, pg: Any, db: str) -> None:
    conn = pg.connect(db)
    conn.execute(SETUP)
    job = cdc_job(tmp_path, pg, db, tables=["public.a"], create_publication=True)
    assert run(tmp_path, job).succeeded
    conn.execute("INSERT INTO public.a VALUES (2, 'before')")
    conn.execute("ALTER TABLE public.a ADD COLUMN extra int")
    conn.execute("INSERT INTO public.a VALUES (3, 'after', 33)")
    result = run(tmp_path, job)
    assert result.succeeded, result.error
    rows = [r for r in read_changes(tmp_path / "output", "public.a") if r["_op"] == "insert"]
    assert [(r["id"], r.get("extra")) for r in rows] == [(2, None), (3, 33)]

    conn.execute("INSERT INTO public.a VALUES (4, 'old shape', 44)")
    conn.execute("ALTER TABLE public.a DROP COLUMN extra")
    code, text = _cli(tmp_path, job)
    assert code != 0 and "table public.a changed in the range read" in text and "column extra is not in the plan" in text
    assert "committed at" in text and "state reset" in text
    done = run_cli("state", "reset", "job.yaml", "--dataset", "public.a", "--yes", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    again = run(tmp_path, job)
    assert again.succeeded, again.error
    assert sorted(r["id"] for r in read_changes(tmp_path / "output", "public.a") if r["_op"] == "read")[-4:] == [1, 2, 3, 4]


def test_unchanged_toast_value_fails_without_replica_identity_full(tmp_path: Path, pg: Any, db: str) -> None:
    conn = pg.connect(db)
    conn.execute("CREATE TABLE public.a (id int PRIMARY KEY, big text, n int)")
    conn.execute("ALTER TABLE public.a ALTER COLUMN big SET STORAGE EXTERNAL")
    conn.execute("INSERT INTO public.a VALUES (1, repeat('x', 10000), 0)")
    job = cdc_job(tmp_path, pg, db, tables=["public.a"], create_publication=True)
    assert run(tmp_path, job).succeeded
    conn.execute("UPDATE public.a SET n = 1 WHERE id = 1")
    code, text = _cli(tmp_path, job)
    assert code != 0 and "column big" in text and "REPLICA IDENTITY FULL" in text
    conn.execute("ALTER TABLE public.a REPLICA IDENTITY FULL")
    conn.execute("UPDATE public.a SET n = 2 WHERE id = 1")
    done = run_cli("state", "reset", "job.yaml", "--dataset", "public.a", "--yes", cwd=tmp_path)
    assert done.returncode == 0
    assert run(tmp_path, job).succeeded
    conn.execute("UPDATE public.a SET n = 3 WHERE id = 1")
    assert run(tmp_path, job).succeeded
    [update] = [r for r in read_changes(tmp_path / "output", "public.a") if r["_op"] == "update"]
    assert update["n"] == 3 and update["big"] == "x" * 10000


@pytest.mark.parametrize("bound", [3])
def test_max_changes_ends_the_run_at_a_transaction_boundary(tmp_path: Path, pg: Any, db: str, bound: int) -> None:
    conn = pg.connect(db)
    conn.execute(SETUP)
    job = cdc_job(tmp_path, pg, db, tables=["public.a"], create_publication=True, max_changes=bound)
    assert run(tmp_path, job).succeeded
    with conn.transaction():
        for i in range(10, 20):
            conn.execute("INSERT INTO public.a VALUES (%s, 'big txn')", (i,))
    for i in range(20, 25):
        conn.execute("INSERT INTO public.a VALUES (%s, 'small')", (i,))
    seen = []
    for _ in range(8):
        assert run(tmp_path, job).succeeded
        rows = [r for r in read_changes(tmp_path / "output", "public.a") if r["_op"] == "insert"]
        seen.append(len(rows))
    assert seen[0] == 10  # the whole first transaction, never split
    assert seen[-1] == 15 and sorted(r["id"] for r in rows) == list(range(10, 25))
