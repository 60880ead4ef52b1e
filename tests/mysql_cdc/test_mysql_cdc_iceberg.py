"""mysql_cdc into an Iceberg table kept equal to the source by key (`mode: upsert`): after every run, killed at the
commit boundaries or not, the table read back with pyiceberg holds exactly `SELECT … FROM acct` of MariaDB."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from mysql_cdc.mysql_cdc_jobs import run, upsert_job
from support.jobs import write_job

from gobblin_py.testing.crash import SIGKILLED, cli

SETUP = ("CREATE TABLE acct (id int PRIMARY KEY, owner varchar(40) NOT NULL, balance bigint, note text, "
         "amount decimal(10,2), seen datetime(6))",
         "INSERT INTO acct SELECT seq, CONCAT('o', seq), seq * 10, NULL, seq / 4, '2024-01-02 03:04:05.123456' "
         "FROM seq_1_to_40")
COLUMNS = ("id", "owner", "balance", "note", "amount", "seen")


def table_rows(tmp: Path) -> list[tuple[Any, ...]]:
    from pyiceberg.catalog import load_catalog

    catalog = load_catalog("gobblin_py", type="sql", uri=f"sqlite:///{tmp / 'work' / 'iceberg' / 'catalog.db'}")
    rows = catalog.load_table("db.acct").scan(selected_fields=COLUMNS).to_arrow().to_pylist()
    # a datetime is written as its wall-clock value in UTC (timestamp-micros): Iceberg gives it back with UTC's zone
    return sorted(tuple(v.replace(tzinfo=None) if c == "seen" and v is not None else v for c, v in
                        ((c, r[c]) for c in COLUMNS)) for r in rows)


def source_rows(maria: Any, db: str) -> list[tuple[Any, ...]]:
    return sorted(maria.query(db, f"SELECT {', '.join(COLUMNS)} FROM acct"))


def change(maria: Any, db: str, rng: random.Random, next_id: list[int]) -> None:
    """A few transactions of inserts, updates (a key several times in one), deletes, key updates and re-inserts."""
    conn = maria.connect(db, autocommit=False)
    try:
        with conn.cursor() as cur:
            for _ in range(rng.randint(2, 5)):
                cur.execute("SELECT id FROM acct")
                ids = [r[0] for r in cur.fetchall()]
                for _ in range(rng.randint(1, 6)):
                    what = rng.random()
                    if what < 0.3 or not ids:
                        cur.execute("INSERT INTO acct VALUES (%s, %s, %s, NULL, %s, NOW(6))",
                                    (next_id[0], f"n{next_id[0]}", rng.randint(0, 999), rng.randint(0, 99999) / 100))
                        ids.append(next_id[0])
                        next_id[0] += 1
                    elif what < 0.65:
                        key = rng.choice(ids)
                        for n in range(rng.randint(1, 3)):
                            cur.execute("UPDATE acct SET balance = balance + %s, note = %s WHERE id = %s",
                                        (n + 1, f"t{n}", key))
                    elif what < 0.8:
                        cur.execute("DELETE FROM acct WHERE id = %s", (ids.pop(rng.randrange(len(ids))),))
                    elif what < 0.9:
                        old = ids.pop(rng.randrange(len(ids)))
                        cur.execute("UPDATE acct SET id = %s WHERE id = %s", (next_id[0], old))
                        ids.append(next_id[0])
                        next_id[0] += 1
                    else:
                        key = rng.choice(ids)
                        cur.execute("DELETE FROM acct WHERE id = %s", (key,))
                        cur.execute("INSERT INTO acct VALUES (%s, 'again', -1, 're', 0, NULL)", (key,))
                conn.commit()
    finally:
        conn.close()


def test_the_table_equals_the_source_by_key_after_every_run(tmp_path: Path, binlog_maria: Any, mdb: str) -> None:
    pytest.importorskip("pyiceberg")
    binlog_maria.execute(mdb, *SETUP)
    job = upsert_job(tmp_path, binlog_maria, mdb, "acct", ["id"], snapshot={"chunk_rows": 7})
    rng, next_id = random.Random(3), [1000]
    for round_ in range(4):
        if round_:
            change(binlog_maria, mdb, rng, next_id)
        if round_ == 2:
            binlog_maria.execute(mdb, "TRUNCATE TABLE acct", "INSERT INTO acct VALUES (5, 'x', 1, NULL, 1.5, NULL)")
        done = run(tmp_path, job)
        assert done.succeeded, done.error
        assert table_rows(tmp_path) == source_rows(binlog_maria, mdb)


@pytest.mark.crash
def test_killed_at_each_commit_boundary_the_table_still_equals_the_source(tmp_path_factory: Any, binlog_maria: Any,
                                                                          mdb: str) -> None:
    """The sequence: the table's commit, the watermarks, the state; killed after each, and in recovery."""
    pytest.importorskip("pyiceberg")
    binlog_maria.execute(mdb, *SETUP)
    rng, next_id = random.Random(11), [1000]
    tmp = tmp_path_factory.mktemp("mysql-upsert")
    write_job(tmp, upsert_job(tmp, binlog_maria, mdb, "acct", ["id"]))
    first = cli(["run", "job.yaml", "--in-process"], tmp, crash_at="commit.after_step:1")  # killed in the snapshot's
    assert first.returncode == SIGKILLED
    for point in ["commit.after_store_write", "commit.after_step:1", "commit.after_step:2", "recovery.before_commit"]:
        change(binlog_maria, mdb, rng, next_id)
        if point.startswith("recovery."):
            assert cli(["run", "job.yaml", "--in-process"], tmp, crash_at="commit.after_step:1").returncode == SIGKILLED
        crashed = cli(["run", "job.yaml", "--in-process"], tmp, crash_at=point)
        assert crashed.returncode == SIGKILLED, f"{point}: {crashed.stdout}{crashed.stderr}"
        again = cli(["run", "job.yaml", "--in-process"], tmp)
        assert again.returncode == 0, f"{point}: {again.stdout}{again.stderr}"
        assert table_rows(tmp) == source_rows(binlog_maria, mdb), point
