"""What postgres_cdc assumes of its publication, each a check: it publishes every operation, no table has a row filter
or a column list, and each table stayed in it since its last commit (pgoutput decodes a change only when the table was
in the publication, with its operation published, as of the change's WAL position: a window lost there is lost for
good). Each test reproduced the loss first (the run exited 0 and said committed), then checks the refusal and that the
remedy gives every row once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cdc.cdc_jobs import PASSWORD_ENV, cdc_job, read_changes, run
from support.jobs import run_cli, write_job

from gobblin_py.demo.pg_server import PASSWORD

SETUP = ("CREATE TABLE public.a (id int PRIMARY KEY, v text); CREATE TABLE public.b (id int PRIMARY KEY, v text); "
         "INSERT INTO public.a VALUES (1, 'one'), (2, 'two'), (3, 'three'); INSERT INTO public.b VALUES (1, 'b1');")
FULL = "ALTER PUBLICATION pub SET (publish = 'insert, update, delete, truncate')"


def _cli(tmp: Path, job: dict[str, Any]) -> tuple[int, str]:
    """`gobblin-py run` in a child process: exit code and output, never a traceback or the password."""
    write_job(tmp, job)
    done = run_cli("run", "job.yaml", "--in-process", cwd=tmp, env={PASSWORD_ENV: PASSWORD})
    text = done.stdout + done.stderr
    assert "Traceback" not in text and PASSWORD not in text
    return done.returncode, text


def _reset(tmp: Path, dataset: str) -> None:
    done = run_cli("state", "reset", "job.yaml", "--dataset", dataset, "--yes", cwd=tmp)
    assert done.returncode == 0, done.stdout + done.stderr


def _replay(rows: list[dict[str, Any]]) -> dict[int, str]:
    """The table a consumer holds after applying the change log in (_lsn, _seq) order."""
    held: dict[int, str] = {}
    for r in rows:
        if r["_op"] == "truncate":
            held.clear()
        elif r["_op"] == "delete":
            held.pop(r["id"], None)
        else:
            held[r["id"]] = r["v"]
    return held


def _source(conn: Any, table: str) -> dict[int, str]:
    return dict(conn.execute(f"SELECT id, v FROM {table}").fetchall())


def _every_row_once(tmp: Path, conn: Any, table: str) -> None:
    """The output's last snapshot holds each row once, and the replayed change log equals the table."""
    rows = read_changes(tmp / "output", table)
    last = max(i for i, r in enumerate(rows) if r["_op"] == "truncate" and r["_seq"] == -1)
    reads = [r["id"] for r in rows[last:] if r["_op"] == "read"]
    assert len(reads) == len(set(reads))
    assert _replay(rows) == _source(conn, table)


def _first_run(tmp: Path, pg: Any, db: str, tables: list[str]) -> tuple[Any, dict[str, Any]]:
    conn = pg.connect(db)
    conn.execute(SETUP)
    job = cdc_job(tmp, pg, db, tables=tables, create_publication=True)
    first = run(tmp, job)
    assert first.succeeded, first.error
    return conn, job


def test_pgoutput_decodes_by_the_publication_as_of_each_change(pg: Any, db: str) -> None:
    """The rule the checks rest on (PostgreSQL 16): a change made while its table was out of the publication, or while
    its operation was not published, is never decoded, even once the publication is restored; a table added back
    gets a new pg_publication_rel row (a new oid), and ALTER PUBLICATION … SET (publish …) a new pg_publication xmin."""
    from gobblin_py.builtin.sources.postgres_cdc import pgoutput

    conn = pg.connect(db)
    conn.execute("SET synchronous_commit = on")  # the server's default is off: peek reads only flushed WAL
    conn.execute(SETUP + "CREATE PUBLICATION pub FOR TABLE public.a")
    conn.execute("SELECT pg_create_logical_replication_slot('s1', 'pgoutput')")

    def identity() -> tuple[Any, ...]:
        return conn.execute("SELECT p.xmin::text, r.oid FROM pg_publication p LEFT JOIN pg_publication_rel r ON "
                            "r.prpubid = p.oid WHERE p.pubname = 'pub'").fetchone()

    before = identity()
    conn.execute("ALTER PUBLICATION pub ADD TABLE public.b")  # another table: neither changes
    assert identity() == before
    conn.execute("ALTER PUBLICATION pub DROP TABLE public.a")
    conn.execute("INSERT INTO public.a VALUES (10, 'while out'); DELETE FROM public.a WHERE id = 1")
    conn.execute("ALTER PUBLICATION pub ADD TABLE public.a")
    readded = identity()
    assert readded[0] == before[0] and readded[1] != before[1]
    conn.execute("ALTER PUBLICATION pub SET (publish = 'insert, update')")
    conn.execute("DELETE FROM public.a WHERE id = 2")
    conn.execute(FULL)
    assert identity()[0] != before[0] and identity()[1] == readded[1]
    conn.execute("INSERT INTO public.a VALUES (11, 'after'); DELETE FROM public.a WHERE id = 3")
    rows = conn.execute("SELECT data FROM pg_logical_slot_peek_binary_changes('s1', NULL, NULL, 'proto_version', '1', "
                        "'publication_names', 'pub')").fetchall()
    changes = [(type(m).__name__, int(bytes((m.new if isinstance(m, pgoutput.Insert) else m.old)[0])))
               for m in (pgoutput.decode(bytes(d)) for (d,) in rows) if isinstance(m, (pgoutput.Insert, pgoutput.Delete))]
    assert changes == [("Insert", 11), ("Delete", 3)]  # insert 10, delete 1 and delete 2 are gone for good


def test_a_publication_that_does_not_publish_deletes_is_refused_then_the_table_is_snapshotted_again(
        tmp_path: Path, pg: Any, db: str) -> None:
    """Defect 1: publish narrowed to 'insert, update', then a delete: the run exited 0 and the deleted row stayed."""
    conn, job = _first_run(tmp_path, pg, db, ["public.a"])
    conn.execute("ALTER PUBLICATION pub SET (publish = 'insert, update')")
    conn.execute("DELETE FROM public.a WHERE id = 2; INSERT INTO public.a VALUES (4, 'four')")
    code, text = _cli(tmp_path, job)
    assert code == 2, (code, text, _replay(read_changes(tmp_path / "output", "public.a")))
    assert "publication 'pub' does not publish delete, truncate" in text and FULL in text
    assert "state reset" in text  # what the deletes made meanwhile need
    conn.execute(FULL)
    code, text = _cli(tmp_path, job)  # restored: the window stays lost, so the table fails until it is snapshotted
    assert code == 1, text
    assert "public.a" in text and "publication 'pub' was altered" in text and "--dataset public.a --yes" in text
    _reset(tmp_path, "public.a")
    conn.execute("DELETE FROM public.a WHERE id = 3")
    again = run(tmp_path, job)
    assert again.succeeded, again.error
    _every_row_once(tmp_path, conn, "public.a")
    assert _source(conn, "public.a") == {1: "one", 4: "four"}


def test_publish_flags_narrowed_and_restored_between_runs_fail_the_tables_closed(tmp_path: Path, pg: Any, db: str) -> None:
    """No run saw it narrowed, and the flags look right again, but a delete in between was never decoded: the
    publication's row (its xmin) changed since the tables' last commit, and every table fails naming it."""
    conn, job = _first_run(tmp_path, pg, db, ["public.a", "public.b"])
    conn.execute("ALTER PUBLICATION pub SET (publish = 'insert, update')")
    conn.execute("DELETE FROM public.a WHERE id = 1")
    conn.execute(FULL)
    code, text = _cli(tmp_path, job)
    assert code == 1, (code, text, _replay(read_changes(tmp_path / "output", "public.a")))
    assert "publication 'pub' was altered" in text and "--dataset public.a --yes" in text and "--dataset public.b" in text
    _reset(tmp_path, "public.a")
    _reset(tmp_path, "public.b")
    assert run(tmp_path, job).succeeded
    for table in ("public.a", "public.b"):
        _every_row_once(tmp_path, conn, table)


@pytest.mark.parametrize("narrowing, named", [("WHERE (id % 2 = 0)", "row filter"), ("(id)", "column list")])
def test_a_row_filter_or_column_list_is_refused_then_the_table_is_snapshotted_again(
        tmp_path: Path, pg: Any, db: str, narrowing: str, named: str) -> None:
    """Defect 2: a row filter (odd ids never decoded) or a column list (v read as null): the run exited 0."""
    conn, job = _first_run(tmp_path, pg, db, ["public.a"])
    conn.execute(f"ALTER PUBLICATION pub SET TABLE public.a {narrowing}")
    conn.execute("INSERT INTO public.a VALUES (10, 'ten'), (11, 'eleven'); UPDATE public.a SET v = 'uno' WHERE id = 1")
    code, text = _cli(tmp_path, job)
    assert code == 2, (code, text, _replay(read_changes(tmp_path / "output", "public.a")))
    assert f"publication 'pub' has a {named} on table public.a" in text
    assert "ALTER PUBLICATION pub DROP TABLE public.a; ALTER PUBLICATION pub ADD TABLE public.a" in text
    conn.execute("ALTER PUBLICATION pub DROP TABLE public.a; ALTER PUBLICATION pub ADD TABLE public.a")
    code, text = _cli(tmp_path, job)  # its membership row is new: the changes under the filter stay lost
    assert code == 1 and "public.a" in text and "--dataset public.a --yes" in text, text
    _reset(tmp_path, "public.a")
    assert run(tmp_path, job).succeeded
    _every_row_once(tmp_path, conn, "public.a")
    assert _source(conn, "public.a")[11] == "eleven"


def test_a_table_dropped_from_the_publication_and_added_back_fails_alone(tmp_path: Path, pg: Any, db: str) -> None:
    """Defect 3: out of the publication and back between runs, with an insert and a delete in between: the run
    exited 0 without them. Now that table fails naming the publication and the reset; the other table commits."""
    conn, job = _first_run(tmp_path, pg, db, ["public.a", "public.b"])
    conn.execute("ALTER PUBLICATION pub DROP TABLE public.a")
    conn.execute("INSERT INTO public.a VALUES (10, 'while out'); DELETE FROM public.a WHERE id = 1")
    conn.execute("ALTER PUBLICATION pub ADD TABLE public.a")
    conn.execute("INSERT INTO public.a VALUES (11, 'back'); INSERT INTO public.b VALUES (2, 'b2')")
    code, text = _cli(tmp_path, job)
    assert code == 1, (code, text, _replay(read_changes(tmp_path / "output", "public.a")))
    assert "table public.a left publication 'pub' and was added back" in text and "--dataset public.a --yes" in text
    assert _replay(read_changes(tmp_path / "output", "public.b")) == {1: "b1", 2: "b2"}  # the other table went on
    code, text = _cli(tmp_path, job)  # still failing, still named: the slot was held at its position
    assert code == 1 and "table public.a left publication 'pub'" in text
    _reset(tmp_path, "public.a")
    assert run(tmp_path, job).succeeded
    for table in ("public.a", "public.b"):
        _every_row_once(tmp_path, conn, table)
    assert _source(conn, "public.a") == {2: "two", 3: "three", 10: "while out", 11: "back"}


def test_a_schema_dropped_from_a_tables_in_schema_publication_and_added_back(tmp_path: Path, pg: Any, db: str) -> None:
    """FOR TABLES IN SCHEMA: the table's membership is the schema's pg_publication_namespace row; out and back fails."""
    conn = pg.connect(db)
    conn.execute("CREATE SCHEMA s; CREATE TABLE s.t (id int PRIMARY KEY, v text); INSERT INTO s.t VALUES (1, 'x'); "
                 "CREATE PUBLICATION pub FOR TABLES IN SCHEMA s")
    job = cdc_job(tmp_path, pg, db)
    assert run(tmp_path, job).succeeded
    conn.execute("ALTER PUBLICATION pub DROP TABLES IN SCHEMA s")
    conn.execute("DELETE FROM s.t WHERE id = 1; INSERT INTO s.t VALUES (2, 'y')")
    conn.execute("ALTER PUBLICATION pub ADD TABLES IN SCHEMA s")
    code, text = _cli(tmp_path, job)
    assert code == 1 and "table s.t left publication 'pub' and was added back" in text, text
    _reset(tmp_path, "s.t")
    assert run(tmp_path, job).succeeded
    _every_row_once(tmp_path, conn, "s.t")


def test_a_table_removed_from_the_publication_is_named_until_its_state_is_dropped(tmp_path: Path, pg: Any, db: str) -> None:
    """Without `tables`, a table that leaves the publication used to drop out silently (its changes after its last
    commit never read); now it is named each run. Added back later, once the slot passed it, it fails alone."""
    conn = pg.connect(db)
    conn.execute(SETUP + "CREATE PUBLICATION pub FOR TABLE public.a, public.b")
    job = cdc_job(tmp_path, pg, db)
    assert run(tmp_path, job).succeeded
    conn.execute("UPDATE public.a SET v = 'uno' WHERE id = 1; ALTER PUBLICATION pub DROP TABLE public.a")
    conn.execute("INSERT INTO public.b VALUES (2, 'b2')")
    code, text = _cli(tmp_path, job)
    assert code == 1 and "table public.a is no longer in publication 'pub'" in text and "--dataset public.a" in text, text
    assert _replay(read_changes(tmp_path / "output", "public.b")) == {1: "b1", 2: "b2"}
    conn.execute("ALTER PUBLICATION pub ADD TABLE public.a; INSERT INTO public.a VALUES (12, 'back')")
    code, text = _cli(tmp_path, job)
    assert code == 1 and "table public.a left publication 'pub' and was added back" in text, text
    _reset(tmp_path, "public.a")
    assert run(tmp_path, job).succeeded
    for table in ("public.a", "public.b"):
        _every_row_once(tmp_path, conn, table)


def test_a_for_all_tables_publication_dropped_and_created_again(tmp_path: Path, pg: Any, db: str) -> None:
    """FOR ALL TABLES: every table's membership is the publication itself; dropped and created again (a window with
    no publication at all: PostgreSQL 16 then fails to decode the slot past it), every table fails naming it and the
    slot's drop; the remedy reads every row once."""
    conn = pg.connect(db)
    conn.execute(SETUP + "CREATE PUBLICATION pub FOR ALL TABLES")
    job = cdc_job(tmp_path, pg, db)
    assert run(tmp_path, job).succeeded
    conn.execute("DROP PUBLICATION pub")
    conn.execute("DELETE FROM public.a WHERE id = 1; INSERT INTO public.b VALUES (3, 'b3')")
    conn.execute("CREATE PUBLICATION pub FOR ALL TABLES")
    code, text = _cli(tmp_path, job)
    assert code == 1, text
    assert all(f"publication 'pub' was dropped and created again since table public.{t}'s" in text for t in "ab"), text
    assert "SELECT pg_drop_replication_slot('s1')" in text
    conn.execute("SELECT pg_drop_replication_slot('s1')")
    _reset(tmp_path, "public.a")
    _reset(tmp_path, "public.b")
    assert run(tmp_path, job).succeeded
    for table in ("public.a", "public.b"):
        _every_row_once(tmp_path, conn, table)


def test_a_partition_detached_and_attached_again_fails_alone(tmp_path: Path, pg: Any, db: str) -> None:
    """FOR TABLE of a partitioned table: each partition is a dataset, in the publication through its parent's row; a
    partition detached (out of the publication) and attached again has a new pg_inherits link, and fails alone."""
    conn = pg.connect(db)
    conn.execute("CREATE TABLE public.p (id int PRIMARY KEY, v text) PARTITION BY RANGE (id); "
                 "CREATE TABLE public.p1 PARTITION OF public.p FOR VALUES FROM (0) TO (100); "
                 "CREATE TABLE public.p2 PARTITION OF public.p FOR VALUES FROM (100) TO (200); "
                 "INSERT INTO public.p VALUES (1, 'x'), (101, 'y'); CREATE PUBLICATION pub FOR TABLE public.p")
    job = cdc_job(tmp_path, pg, db)
    assert run(tmp_path, job).succeeded
    conn.execute("ALTER TABLE public.p DETACH PARTITION public.p1")
    conn.execute("INSERT INTO public.p1 VALUES (2, 'while detached'); DELETE FROM public.p1 WHERE id = 1")
    conn.execute("ALTER TABLE public.p ATTACH PARTITION public.p1 FOR VALUES FROM (0) TO (100)")
    conn.execute("INSERT INTO public.p VALUES (3, 'z'), (102, 'w')")
    code, text = _cli(tmp_path, job)
    assert code == 1, (code, text, _replay(read_changes(tmp_path / "output", "public.p1")))
    assert "table public.p1 left publication 'pub' and was added back" in text and "--dataset public.p1 --yes" in text
    assert _replay(read_changes(tmp_path / "output", "public.p2")) == {101: "y", 102: "w"}  # the other one went on
    _reset(tmp_path, "public.p1")
    assert run(tmp_path, job).succeeded
    for table in ("public.p1", "public.p2"):
        _every_row_once(tmp_path, conn, table)


def test_the_publication_renamed_and_the_job_pointed_at_the_new_name(tmp_path: Path, pg: Any, db: str) -> None:
    """A job that now reads another publication (here the same one, renamed) cannot know what that one published
    before: every table fails naming both names and the slot's drop (PostgreSQL 16 cannot decode by the new name from
    before it existed); the remedy reads every row once."""
    conn, job = _first_run(tmp_path, pg, db, ["public.a"])
    conn.execute("DELETE FROM public.a WHERE id = 1; ALTER PUBLICATION pub RENAME TO pub2")
    job["source"]["publication"] = "pub2"
    code, text = _cli(tmp_path, job)
    assert code == 1 and "committed from publication 'pub', and the job now reads 'pub2'" in text, text
    assert "SELECT pg_drop_replication_slot('s1')" in text and "--dataset schema.table" in text
    conn.execute("SELECT pg_drop_replication_slot('s1')")
    _reset(tmp_path, "public.a")
    assert run(tmp_path, job).succeeded
    _every_row_once(tmp_path, conn, "public.a")


def test_a_table_new_to_a_publication_created_again_names_the_publication_not_the_slot(tmp_path: Path, pg: Any,
                                                                                       db: str) -> None:
    """A table the job has not committed yet, in a publication dropped and created again: decoding its range reaches
    the window without the publication. The run said the slot had been dropped during the run (it had not); it now
    names the publication and the remedy."""
    conn = pg.connect(db)
    conn.execute(SETUP + "CREATE PUBLICATION pub FOR TABLE public.a")
    job = cdc_job(tmp_path, pg, db)
    assert run(tmp_path, job).succeeded
    conn.execute("DROP PUBLICATION pub")
    conn.execute("INSERT INTO public.a VALUES (7, 'a7'); INSERT INTO public.b VALUES (7, 'b7')")
    conn.execute("CREATE PUBLICATION pub FOR TABLE public.a, public.b")
    code, text = _cli(tmp_path, job)
    assert code == 1, text
    assert "was dropped during the run" not in text, text
    assert "publication 'pub'" in text and "state reset" in text, text
