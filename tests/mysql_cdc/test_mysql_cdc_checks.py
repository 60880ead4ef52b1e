"""Each assumption mysql_cdc makes about the server is checked before anything is read, and a broken one fails closed
with what changed and the fix, as the CLI prints it (no traceback): the binlog settings, the binlog purged past a
committed position, another server, a column added, a table dropped and created again, a table without a primary
key."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from mysql_cdc.mysql_cdc_jobs import cdc_job, read_changes, replay
from support.jobs import write_job

from gobblin_py.testing.crash import cli

RUN = ["run", "job.yaml", "--in-process"]


def _run(tmp: Path) -> Any:
    done = cli(RUN, tmp)
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    return done


def _ready(tmp: Path, maria: Any, db: str) -> None:
    """A table `t` captured once (snapshot committed)."""
    maria.execute(db, "CREATE TABLE t (id int PRIMARY KEY, v text)", "INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    write_job(tmp, cdc_job(tmp, maria, db, ["t"]))
    first = _run(tmp)
    assert first.returncode == 0, first.stdout + first.stderr


def test_binlog_format_not_row_is_refused(tmp_path: Path, binlog_maria: Any, mdb: str) -> None:
    _ready(tmp_path, binlog_maria, mdb)
    binlog_maria.root_execute("SET GLOBAL binlog_format = 'STATEMENT'")
    try:
        done = _run(tmp_path)
    finally:
        binlog_maria.root_execute("SET GLOBAL binlog_format = 'ROW'")
    assert done.returncode != 0
    assert "binlog_format is STATEMENT" in done.stderr and "SET GLOBAL binlog_format = 'ROW'" in done.stderr


def test_binlog_row_image_not_full_is_refused(tmp_path: Path, binlog_maria: Any, mdb: str) -> None:
    _ready(tmp_path, binlog_maria, mdb)
    binlog_maria.root_execute("SET GLOBAL binlog_row_image = 'MINIMAL'")
    try:
        done = _run(tmp_path)
    finally:
        binlog_maria.root_execute("SET GLOBAL binlog_row_image = 'FULL'")
    assert done.returncode != 0 and "binlog_row_image is MINIMAL" in done.stderr


def _purge_all_but_the_newest(maria: Any, db: str) -> None:
    maria.root_execute("FLUSH BINARY LOGS")
    last = maria.query(db, "SHOW MASTER STATUS")[0][0]
    for _ in range(100):  # MariaDB keeps a file until its binlog checkpoint (the engine's log flushed) has passed it
        maria.root_execute(f"PURGE BINARY LOGS TO '{last}'")
        if maria.query(db, "SHOW BINARY LOGS")[0][0] == last:
            break
        time.sleep(0.1)
    assert maria.query(db, "SHOW BINARY LOGS")[0][0] == last


def test_binlog_purged_past_the_committed_position(tmp_path: Path, binlog_maria: Any, mdb: str) -> None:
    maria = binlog_maria
    _ready(tmp_path, maria, mdb)
    maria.execute(mdb, "INSERT INTO t VALUES (3, 'lost')")
    _purge_all_but_the_newest(maria, mdb)
    done = _run(tmp_path)
    assert done.returncode != 0
    assert "no longer holds its committed position" in done.stderr and "purged" in done.stderr, done.stderr
    assert f"state reset JOB.yaml --dataset {mdb}.t --yes" in done.stderr
    reset = cli(["state", "reset", "job.yaml", "--dataset", f"{mdb}.t", "--yes"], tmp_path)
    assert reset.returncode == 0, reset.stderr
    assert _run(tmp_path).returncode == 0  # snapshotted again: the row whose change was purged is there
    assert replay(read_changes(tmp_path / "output", f"{mdb}.t"), "id", "v") == {1: "a", 2: "b", 3: "lost"}


def test_a_purged_binlog_names_every_table_it_stops_in_one_run(tmp_path: Path, binlog_maria: Any, mdb: str) -> None:
    maria = binlog_maria
    maria.execute(mdb, "CREATE TABLE t (id int PRIMARY KEY, v text)", "INSERT INTO t VALUES (1, 'a')",
                  "CREATE TABLE u (id int PRIMARY KEY, v text)", "INSERT INTO u VALUES (1, 'b')")
    write_job(tmp_path, cdc_job(tmp_path, maria, mdb, ["t", "u"]))
    assert _run(tmp_path).returncode == 0
    maria.execute(mdb, "INSERT INTO t VALUES (2, 'lost t')", "INSERT INTO u VALUES (2, 'lost u')")
    _purge_all_but_the_newest(maria, mdb)
    done = _run(tmp_path)
    assert done.returncode != 0
    assert "2 tables cannot go on" in done.stderr, done.stderr
    for table in ("t", "u"):  # both, with their fixes, so one round of resets brings both back
        assert f"table {mdb}.{table}: the binlog" in done.stderr and f"--dataset {mdb}.{table} --yes" in done.stderr
        reset = cli(["state", "reset", "job.yaml", "--dataset", f"{mdb}.{table}", "--yes"], tmp_path)
        assert reset.returncode == 0, reset.stderr
    assert _run(tmp_path).returncode == 0
    assert replay(read_changes(tmp_path / "output", f"{mdb}.t"), "id", "v") == {1: "a", 2: "lost t"}
    assert replay(read_changes(tmp_path / "output", f"{mdb}.u"), "id", "v") == {1: "b", 2: "lost u"}


def test_another_server_is_refused(tmp_path: Path, binlog_maria: Any, mdb: str) -> None:
    _ready(tmp_path, binlog_maria, mdb)
    binlog_maria.root_execute("SET GLOBAL server_id = 2")
    try:
        done = _run(tmp_path)
    finally:
        binlog_maria.root_execute("SET GLOBAL server_id = 1")
    assert done.returncode != 0 and "server_id 1 → 2" in done.stderr and "Snapshot it again" in done.stderr


def test_a_column_added_fails_the_table_until_it_is_snapshotted_again(tmp_path: Path, binlog_maria: Any,
                                                                       mdb: str) -> None:
    maria = binlog_maria
    _ready(tmp_path, maria, mdb)
    maria.execute(mdb, "UPDATE t SET v = 'a2' WHERE id = 1", "ALTER TABLE t ADD COLUMN w int NOT NULL DEFAULT 7",
                  "UPDATE t SET v = 'b2' WHERE id = 2")
    done = _run(tmp_path)
    assert done.returncode != 0
    assert "column w added (int(11))" in done.stdout + done.stderr
    assert cli(["state", "reset", "job.yaml", "--dataset", f"{mdb}.t", "--yes"], tmp_path).returncode == 0
    assert _run(tmp_path).returncode == 0
    rows = read_changes(tmp_path / "output", f"{mdb}.t")
    assert {r["id"]: (r["v"], r.get("w")) for r in rows if r["_op"] == "read" and "w" in r} == {1: ("a2", 7), 2: ("b2", 7)}


def test_a_table_dropped_and_created_again_in_the_range(tmp_path: Path, binlog_maria: Any, mdb: str) -> None:
    maria = binlog_maria
    _ready(tmp_path, maria, mdb)
    maria.execute(mdb, "DROP TABLE t", "CREATE TABLE t (id int PRIMARY KEY, v text)", "INSERT INTO t VALUES (9, 'z')")
    done = _run(tmp_path)
    assert done.returncode != 0
    assert f"table {mdb}.t changed in the binlog range read: `DROP TABLE" in done.stdout + done.stderr


def test_a_table_without_a_primary_key_is_refused(tmp_path: Path, binlog_maria: Any, mdb: str) -> None:
    binlog_maria.execute(mdb, "CREATE TABLE nokey (id int, v text)")
    write_job(tmp_path, cdc_job(tmp_path, binlog_maria, mdb, ["nokey"]))
    done = _run(tmp_path)
    assert done.returncode != 0 and f"table {mdb}.nokey has no primary key" in done.stderr
    assert "ADD PRIMARY KEY" in done.stderr


def test_another_server_with_the_same_server_id_and_binlog_name(tmp_path: Path, binlog_maria: Any, mdb: str) -> None:
    """A promoted replica or a restore at the job's url: the same server_id (1) and binlog name, its binlog as long
    as the committed position, but another history there (the GTID position it stands for, kept with the commit)."""
    from jdbc_mysql.mariadb_server import LocalMariaDB

    from gobblin_py.state.store import StateStore

    maria = binlog_maria
    _ready(tmp_path, maria, mdb)
    maria.execute(mdb, "INSERT INTO t VALUES (3, 'c')")
    assert _run(tmp_path).returncode == 0  # the stream after the snapshot: a binlog position with its GTID
    maria.execute(mdb, "INSERT INTO t VALUES (4, 'd')")
    assert _run(tmp_path).returncode == 0
    committed = int(StateStore(tmp_path / "work", "c").watermarks()[f"{mdb}.t"]["binlog"])
    with LocalMariaDB(binlog=True) as other:
        other.create_database(mdb)
        other.execute(mdb, "CREATE TABLE t (id int PRIMARY KEY, v text)")
        for _ in range((committed >> 32) - 1):
            other.root_execute("FLUSH BINARY LOGS")
        for n in range(100):  # past the committed offset in the same file, by other transactions
            other.execute(mdb, f"INSERT INTO t VALUES ({n}, '{'x' * 100}')")
        assert other.query(mdb, "SHOW BINARY LOGS")[-1][1] > committed & 0xFFFFFFFF
        write_job(tmp_path, cdc_job(tmp_path, other, mdb, ["t"]))
        done = _run(tmp_path)
    assert done.returncode != 0
    assert "stands for GTID position" in done.stderr and "another server's binlog" in done.stderr, done.stderr


def test_compressed_binlog_events_are_refused_not_passed_over(tmp_path: Path, binlog_maria: Any, mdb: str) -> None:
    """MariaDB's `log_bin_compress` writes row events mysql-replication does not know, and passes over: their changes
    were lost without a word. A run is refused while it is on; changes written compressed while it was on fail the
    read that meets them, naming it, and nothing of them is committed."""
    _ready(tmp_path, binlog_maria, mdb)
    big = "x" * 2000  # above log_bin_compress_min_len (256): the event is compressed
    binlog_maria.root_execute("SET GLOBAL log_bin_compress = ON")
    try:
        binlog_maria.execute(mdb, f"INSERT INTO t VALUES (3, '{big}')")
        refused = _run(tmp_path)
    finally:
        binlog_maria.root_execute("SET GLOBAL log_bin_compress = OFF")
    assert refused.returncode != 0 and "log_bin_compress is ON" in refused.stderr, refused.stderr
    failed = _run(tmp_path)  # compression off, the compressed change still in the range
    assert failed.returncode != 0 and "compressed (MariaDB log_bin_compress)" in failed.stderr, failed.stderr
    assert 3 not in replay(read_changes(tmp_path / "output", f"{mdb}.t"), "id", "v")  # nothing of it committed
