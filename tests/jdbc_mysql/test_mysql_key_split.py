"""A MariaDB first load split on the table's integer primary key (`first_load_split: key`): the same rows as the
watermark split, each slice a range scan of the PRIMARY index, a high watermark taken before any slice is read (rows
changed during the load are the next run's), and slices that keep their names and are read once across a SIGKILL
mid-load, a failed slice and the next runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from jdbc.jdbc_jobs import read_output
from jdbc_mysql.mysql_jobs import mysql_job
from support.jobs import write_job

from gobblin_py.builtin.sources.jdbc.mysql import MySqlQueries
from gobblin_py.builtin.sources.jdbc.ranges import FIRST_PREFIX, KeyRange, Range, committed
from gobblin_py.builtin.sources.jdbc.settings import TableSettings
from gobblin_py.builtin.sources.jdbc.split import JdbcSplit
from gobblin_py.config import load_job
from gobblin_py.crashpoints import PAUSE_ENV
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.planning import plan
from gobblin_py.runtime.runner import JobRunner
from gobblin_py.state.store import StateStore
from gobblin_py.testing.crash import SIGKILLED, cli

RUN = ["run", "job.yaml", "--in-process"]
ORDERS = {"table": "orders", "watermark_column": "version", "primary_key": "id"}
CREATE = ("CREATE TABLE orders (id bigint PRIMARY KEY, version bigint, amount decimal(10,2) NOT NULL, note varchar(32), "
          "KEY v (version))")
FILL = ("INSERT INTO orders SELECT seq * 3, IF(seq % 97 = 0, NULL, (seq * 7919) % 1200 + 1), seq * 0.25, "
        "CONCAT('n', seq) FROM seq_1_to_1200")  # ids with gaps, versions not in id order, a few without a version


def _job(tmp: Path, maria: Any, db: str, **source: Any) -> dict[str, Any]:
    tmp.mkdir(parents=True, exist_ok=True)
    job = mysql_job(tmp, maria, db, [ORDERS], **{"partitions": 4, **source})
    job["job"]["commit_parallelism"] = 1
    return job


def _run(tmp: Path, job: dict[str, Any]) -> Any:
    return JobRunner(load_job(write_job(tmp, job)), InProcessExecutor()).run()


def _rows(output: Path) -> list[tuple[Any, ...]]:
    return sorted((r["id"], r["version"], str(r["amount"]), r["note"]) for r in read_output(output, "orders"))


def _table(maria: Any, db: str) -> list[tuple[Any, ...]]:
    with maria.connect(db) as conn, conn.cursor() as cur:
        cur.execute("SELECT id, version, CAST(amount AS CHAR), note FROM orders ORDER BY id")
        return sorted(tuple(r) for r in cur.fetchall())


def _files(output: Path) -> list[str]:
    return sorted(str(p.relative_to(output)) for p in output.rglob("*.avro"))


def test_the_key_split_reads_the_watermark_splits_rows_in_range_scans_of_the_primary_key(tmp_path: Path, maria,
                                                                                         mdb) -> None:
    maria.execute(mdb, CREATE, FILL)
    job = _job(tmp_path / "key", maria, mdb)
    spec = load_job(write_job(tmp_path / "key", job))
    units = plan(spec, StateStore(spec.job.work_dir, spec.name)).workunits
    splits = [JdbcSplit.of(u) for u in units]
    assert sorted(u.watermark_key for u in units) == [f"{FIRST_PREFIX}{n}" for n in range(1, 5)]
    assert {(p.key_column, p.lo, p.hi) for p in splits} == {("id", None, 1200)}  # one high, taken before any read
    edges = sorted((p.key_lo is not None, p.key_lo, p.key_hi is None, p.key_hi) for p in splits)
    assert [(lo, hi) for _, lo, _, hi in edges] == [(None, 902), (902, 1801), (1801, 2700), (2700, None)]
    q = MySqlQueries(TableSettings(**ORDERS), mdb, "orders", ["id", "version", "amount", "note"], "integer", "orders")
    query, params = q.select_keys(Range(None, 1200), KeyRange(902, 1801))
    with maria.connect(mdb) as conn, conn.cursor() as cur:
        cur.execute("EXPLAIN " + query, params)
        names = [d[0] for d in cur.description]
        [plan_row] = [dict(zip(names, r)) for r in cur.fetchall()]
    assert (plan_row["type"], plan_row["key"]) == ("range", "PRIMARY"), plan_row  # its own rows, not a full scan

    by_key = _run(tmp_path / "key", job)
    assert by_key.succeeded, by_key.error
    by_wm = _run(tmp_path / "wm", _job(tmp_path / "wm", maria, mdb, first_load_split="watermark"))
    assert by_wm.succeeded, by_wm.error
    assert _rows(tmp_path / "key" / "output") == _rows(tmp_path / "wm" / "output") == _table(maria, mdb)
    marks = StateStore(tmp_path / "key" / "work", "j").watermarks()["orders"]
    assert committed("integer", marks, "orders").high == 1200  # the slices chain over the whole key: high is theirs


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


def test_rows_changed_during_a_key_split_first_load_are_read_by_the_next_run_once(tmp_path: Path, maria, mdb) -> None:
    """The run is stopped (SIGSTOP) at its first batch; rows of every slice get a new version and new rows arrive; then
    it goes on. A slice that read without the first load's high would take a changed row's new version, and the next
    run would take it again."""
    maria.execute(mdb, CREATE, FILL)
    write_job(tmp_path, _job(tmp_path, maria, mdb, reader="rows", fetch_rows=20))
    env = {**os.environ, PAUSE_ENV: "jdbc.batch_read"}
    proc = subprocess.Popen([sys.executable, "-m", "gobblin_py.cli.main", *RUN], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not _stopped(proc.pid):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run never read a batch"
        time.sleep(0.05)
    maria.execute(mdb, "UPDATE orders SET version = 5000 + id, note = 'changed' WHERE id % 300 = 0",
                  "INSERT INTO orders SELECT 10000 + seq, 6000 + seq, 1, 'new' FROM seq_1_to_5",
                  "INSERT INTO orders VALUES (-7, 6100, 1, 'below the least key')")
    os.kill(proc.pid, signal.SIGCONT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out + err
    again = cli(RUN, tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    rows = _rows(tmp_path / "output")
    pairs = [(r[0], r[1]) for r in rows]
    assert len(pairs) == len(set(pairs)), "a row version read twice"
    final = _table(maria, mdb)
    assert set(final) <= set(rows), f"lost: {sorted(set(final) - set(rows))[:5]}"  # every row's last version is in
    assert {r[0] for r in rows} == {r[0] for r in final}


@pytest.mark.crash
@pytest.mark.parametrize("nth", [1, 9])
def test_killed_mid_load_then_run_again_reads_every_row_once_under_the_same_names(tmp_path_factory, maria,
                                                                                  nth: int) -> None:
    """SIGKILL at the nth batch read of a key-split first load, then a clean run: every row once, and the files and
    watermarks of a run that was never killed (the slices' names are a function of the table's key, not of the run)."""
    db = maria.create_database(f"keysplit_kill_{nth}")
    maria.execute(db, CREATE, FILL)
    ref = tmp_path_factory.mktemp("ref")
    write_job(ref, _job(ref, maria, db, fetch_rows=50))
    assert cli(RUN, ref).returncode == 0
    tmp = tmp_path_factory.mktemp("killed")
    write_job(tmp, _job(tmp, maria, db, fetch_rows=50))
    crashed = cli(RUN, tmp, crash_at=f"jdbc.batch_read:{nth}")
    assert crashed.returncode == SIGKILLED, crashed.stdout + crashed.stderr
    again = cli(RUN, tmp)
    assert again.returncode == 0, again.stdout + again.stderr
    assert _rows(tmp / "output") == _rows(ref / "output") == _table(maria, db)
    assert _files(tmp / "output") == _files(ref / "output") and len(_files(ref / "output")) == 4
    assert StateStore(tmp / "work", "j").watermarks() == StateStore(ref / "work", "j").watermarks()


def test_a_failed_slice_is_read_again_up_to_the_first_loads_high_under_commit_policy_successful(tmp_path: Path, maria,
                                                                                                 mdb) -> None:
    """One slice fails (a zero date the native reader refuses) and the others are published; rows arriving after do
    not move the first load's high: the next run reads only the failed slice, up to that high, and the run after it
    the new rows: every row once."""
    maria.execute(mdb, "SET SESSION sql_mode = ''", CREATE, FILL, "ALTER TABLE orders ADD COLUMN day date",
                  "UPDATE orders SET day = '2024-01-01'", "UPDATE orders SET day = '0000-00-00' WHERE id = 2001")
    job = _job(tmp_path, maria, mdb, reader="native")
    job["job"]["commit_policy"] = "successful"
    first = _run(tmp_path, job)
    assert not first.succeeded
    marks = StateStore(tmp_path / "work", "j").watermarks()["orders"]
    assert sorted(marks) == [f"{FIRST_PREFIX}{n}" for n in (1, 2, 4)]  # the slice of id 2001 is the third
    maria.execute(mdb, "UPDATE orders SET day = '2024-01-02' WHERE id = 2001",
                  "INSERT INTO orders SELECT 3600 + seq, 1200 + seq, 1, 'new', '2024-01-03' FROM seq_1_to_10")
    spec = load_job(write_job(tmp_path, job))
    [unit] = plan(spec, StateStore(spec.job.work_dir, spec.name)).workunits
    p = JdbcSplit.of(unit)
    assert (unit.watermark_key, p.hi, p.key_lo, p.key_hi) == (f"{FIRST_PREFIX}3", 1200, 1801, 2700)
    second = _run(tmp_path, job)
    assert second.succeeded, second.error
    assert committed("integer", StateStore(tmp_path / "work", "j").watermarks()["orders"], "orders").high == 1200
    third = _run(tmp_path, job)
    assert third.succeeded, third.error
    assert sum(d.records_written for d in third.datasets) == 10
    ids = [r["id"] for r in read_output(tmp_path / "output", "orders")]
    assert sorted(ids) == sorted(r[0] for r in _table(maria, mdb))  # every row once
