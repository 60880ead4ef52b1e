"""mysql_cdc end to end on a real MariaDB: a first run snapshots each table in key chunks (changes written between the
chunks included once), later runs read the binlog; the change files replayed by key equal `SELECT *`."""

from __future__ import annotations

import random
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from mysql_cdc.mysql_cdc_jobs import cdc_job, read_changes, replay, run


def _rows(maria: Any, db: str, table: str = "t") -> dict[Any, Any]:
    return dict(maria.query(db, f"SELECT id, v FROM {table}"))


def _random_dml(maria: Any, db: str, rng: random.Random, rounds: int, next_id: list[int]) -> None:
    """Transactions of inserts, updates, deletes and key updates from another connection."""
    conn = maria.connect(db, autocommit=False)
    try:
        with conn.cursor() as cur:
            for _ in range(rounds):
                cur.execute("SELECT id FROM t")
                ids = [r[0] for r in cur.fetchall()]
                for _ in range(rng.randint(1, 5)):
                    what = rng.random()
                    if what < 0.35 or not ids:
                        cur.execute("INSERT INTO t VALUES (%s, %s)", (next_id[0], f"n{next_id[0]}"))
                        ids.append(next_id[0])
                        next_id[0] += 1
                    elif what < 0.7:
                        cur.execute("UPDATE t SET v = CONCAT(v, '+') WHERE id = %s", (rng.choice(ids),))
                    elif what < 0.85:
                        cur.execute("DELETE FROM t WHERE id = %s", (ids.pop(rng.randrange(len(ids))),))
                    else:  # a key update: the row moves to a new key
                        old = ids.pop(rng.randrange(len(ids)))
                        cur.execute("UPDATE t SET id = %s WHERE id = %s", (next_id[0], old))
                        ids.append(next_id[0])
                        next_id[0] += 1
                conn.commit()
    finally:
        conn.close()


def test_snapshot_then_changes_equal_the_table(tmp_path: Path, binlog_maria: Any, mdb: str) -> None:
    maria = binlog_maria
    maria.execute(mdb, "CREATE TABLE t (id int PRIMARY KEY, v varchar(200))",
                  "INSERT INTO t SELECT seq, CONCAT('v', seq) FROM seq_1_to_500")
    job = cdc_job(tmp_path, maria, mdb, ["t"], snapshot={"chunk_rows": 60})
    rng, next_id = random.Random(7), [1000]
    writer = threading.Thread(target=_random_dml, args=(maria, mdb, rng, 40, next_id))
    writer.start()  # changes while the chunks are read
    try:
        first = run(tmp_path, job)
    finally:
        writer.join()
    assert first.succeeded, first
    for _ in range(3):
        _random_dml(maria, mdb, rng, 15, next_id)
        assert run(tmp_path, job).succeeded
        rows = read_changes(tmp_path / "output", f"{mdb}.t")
        assert replay(rows, "id", "v") == _rows(maria, mdb)
    reads = [r for r in rows if r["_op"] == "read"]
    assert max(Counter(r["id"] for r in reads).values()) == 1, "a key read twice by the snapshot"
    changes = [r for r in rows if r["_op"] not in ("read", "truncate")]
    assert {r["_op"] for r in changes} == {"insert", "update", "delete"}
    assert len({(r["_pos"], r["_seq"]) for r in rows}) == len(rows)
    assert all(r["_xid"] is not None and r["_commit_ts"] is not None for r in changes)


def test_a_run_without_changes_commits_nothing_new(tmp_path: Path, binlog_maria: Any, mdb: str) -> None:
    maria = binlog_maria
    maria.execute(mdb, "CREATE TABLE t (id int PRIMARY KEY, v text)", "INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    job = cdc_job(tmp_path, maria, mdb, ["t"])
    assert run(tmp_path, job).succeeded
    assert run(tmp_path, job).succeeded
    maria.execute(mdb, "UPDATE t SET v = 'b2' WHERE id = 2")
    maria.root_execute("FLUSH BINARY LOGS")  # the range read crosses into the next binlog file
    maria.execute(mdb, "TRUNCATE TABLE t", "INSERT INTO t VALUES (3, 'c')")
    maria.root_execute("FLUSH BINARY LOGS")  # and ends in a file holding only its header (no event of the table)
    assert run(tmp_path, job).succeeded
    rows = read_changes(tmp_path / "output", f"{mdb}.t")
    assert [r["_op"] for r in rows] == ["truncate", "read", "read", "update", "truncate", "insert"]
    assert rows[-1]["_pos"] >> 32 == (rows[3]["_pos"] >> 32) + 1  # the update and the insert: in two binlog files
    assert replay(rows, "id", "v") == {3: "c"}


def test_a_table_taken_out_of_the_job_is_named_not_in_the_source(tmp_path: Path, binlog_maria: Any, mdb: str) -> None:
    """A committed table the job no longer lists is named in the summary, not "no new data"; listed again, it reads
    the changes made while it was out from its own committed position."""
    from gobblin_py.runtime.job_result import DatasetStatus

    maria = binlog_maria
    maria.execute(mdb, "CREATE TABLE t (id int PRIMARY KEY, v text)", "CREATE TABLE u (id int PRIMARY KEY, v text)",
                  "INSERT INTO t VALUES (1, 'a')", "INSERT INTO u VALUES (1, 'x')")
    assert run(tmp_path, cdc_job(tmp_path, maria, mdb, ["t", "u"])).succeeded
    maria.execute(mdb, "UPDATE u SET v = 'y' WHERE id = 1", "INSERT INTO u VALUES (2, 'z')")
    out = run(tmp_path, cdc_job(tmp_path, maria, mdb, ["t"]))
    assert out.succeeded
    assert {d.dataset: d.status for d in out.datasets}[f"{mdb}.u"] is DatasetStatus.NOT_IN_SOURCE
    maria.execute(mdb, "UPDATE t SET v = 'b' WHERE id = 1")
    assert run(tmp_path, cdc_job(tmp_path, maria, mdb, ["t", "u"])).succeeded
    assert replay(read_changes(tmp_path / "output", f"{mdb}.u"), "id", "v") == {1: "y", 2: "z"}
    assert replay(read_changes(tmp_path / "output", f"{mdb}.t"), "id", "v") == {1: "b"}


def test_no_file_the_job_writes_holds_the_password(tmp_path: Path, binlog_maria: Any, mdb: str) -> None:
    """The password comes from password_env; nothing written (state, commit records, events, logs, output) holds it."""
    from jdbc_mysql.mariadb_server import PASSWORD

    maria = binlog_maria
    maria.execute(mdb, "CREATE TABLE t (id int PRIMARY KEY, v text)", "INSERT INTO t VALUES (1, 'a')")
    job = cdc_job(tmp_path, maria, mdb, ["t"])
    assert run(tmp_path, job).succeeded
    maria.execute(mdb, "UPDATE t SET v = 'b' WHERE id = 1")
    assert run(tmp_path, job).succeeded
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(written) > 5
    assert not [p for p in written if PASSWORD.encode() in p.read_bytes()]


def test_the_grants_the_docs_name_are_enough(tmp_path: Path, binlog_maria: Any, mdb: str) -> None:
    """REPLICATION SLAVE, REPLICATION CLIENT and SELECT (docs/sources/mysql_cdc.md): a snapshot, then changes."""
    from jdbc_mysql.mariadb_server import PASSWORD

    maria, user = binlog_maria, f"cdc_{mdb[-8:]}"
    maria.root_execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{PASSWORD}'",
                       f"GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO '{user}'@'%'")
    maria.execute(mdb, "CREATE TABLE t (id int PRIMARY KEY, v text)", "INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    job = cdc_job(tmp_path, maria, mdb, ["t"])
    job["source"]["url"] = f"mysql://{user}@{maria.host}:{maria.port}/{mdb}"
    assert run(tmp_path, job).succeeded
    maria.execute(mdb, "UPDATE t SET v = 'b2' WHERE id = 2", "DELETE FROM t WHERE id = 1")
    assert run(tmp_path, job).succeeded  # the stream after the snapshot
    maria.execute(mdb, "INSERT INTO t VALUES (3, 'c')")
    assert run(tmp_path, job).succeeded  # and the GTID check of its position
    assert replay(read_changes(tmp_path / "output", f"{mdb}.t"), "id", "v") == {2: "b2", 3: "c"}
