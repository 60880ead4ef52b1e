"""Random histories against mysql_cdc into an Iceberg upsert table: DML transactions (key updates among them), a
transaction open across a run, TRUNCATE, binlog rotation, runs killed (SIGKILL) at a commit point or at a random
time, a snapshot spread over runs (small chunks, two a run), and `state reset`. The oracle: after every run that
exits 0 the table (read with pyiceberg) equals `SELECT` of the source by key; no key is ever twice in it."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from mysql_cdc.mysql_cdc_jobs import upsert_job
from mysql_cdc.test_mysql_cdc_iceberg import SETUP, change, source_rows, table_rows
from support.jobs import write_job

from gobblin_py.testing.crash import SIGKILLED, cli, commit_points, kill_at_random

pytestmark = [pytest.mark.crash]

RUN = ["run", "job.yaml", "--in-process"]
POINTS = commit_points(3) + ["commit.after_store_write"]


def _rows(tmp: Path) -> list[tuple[Any, ...]]:
    """The Iceberg table's rows; none before its first commit."""
    from pyiceberg.exceptions import NoSuchTableError

    try:
        return table_rows(tmp) if (tmp / "work" / "iceberg" / "catalog.db").exists() else []
    except NoSuchTableError:
        return []


@pytest.mark.parametrize("seed", [1, 2])
def test_random_history_keeps_the_table_equal(tmp_path: Path, binlog_maria: Any, mdb: str, seed: int) -> None:
    pytest.importorskip("pyiceberg")
    maria, rng, next_id = binlog_maria, random.Random(seed), [1000]
    maria.execute(mdb, *SETUP)
    write_job(tmp_path, upsert_job(tmp_path, maria, mdb, "acct", ["id"], snapshot={"chunk_rows": 6, "chunks_per_run": 2}))
    open_txn: Any = None
    steps = []
    for _ in range(14):
        step = rng.choice(["dml", "dml", "run", "run", "kill_at_point", "kill_at_random", "open", "truncate",
                           "rotate", "reset"])
        steps.append(step)
        if step == "dml":
            change(maria, mdb, rng, next_id)
        elif step == "open" and open_txn is None:  # committed after the next run (or two) started
            open_txn = maria.connect(mdb, autocommit=False)
            with open_txn.cursor() as cur:
                cur.execute("INSERT INTO acct VALUES (%s, 'open', 1, NULL, 1, NULL)", (next_id[0],))
                next_id[0] += 1
        elif step == "truncate":
            maria.execute(mdb, "TRUNCATE TABLE acct", "INSERT INTO acct VALUES (1, 'x', 1, NULL, 1, NULL)")
        elif step == "rotate":
            maria.root_execute("FLUSH BINARY LOGS")
        elif step == "reset":  # a commit a kill left pending is finished first, as `state reset` says
            assert cli(["recover", "job.yaml", "--all"], tmp_path).returncode == 0
            assert cli(["state", "reset", "job.yaml", "--dataset", f"{mdb}.acct", "--yes"], tmp_path).returncode == 0
        elif step == "kill_at_point":
            point = rng.choice(POINTS)
            code = cli(RUN, tmp_path, crash_at=point).returncode
            assert code in (SIGKILLED, 0), f"{steps}: {point} exited {code}"  # a run with nothing to commit: 0
        elif step == "kill_at_random":
            kill_at_random(RUN, tmp_path, after_s=rng.uniform(0.2, 2.0))
        else:
            done = cli(RUN, tmp_path)
            assert done.returncode == 0, f"{steps}: {done.stdout}{done.stderr}"
        if open_txn is not None and step in ("run", "kill_at_point", "kill_at_random"):
            open_txn.commit()
            open_txn.close()
            open_txn = None
        keys = Counter(r[0] for r in _rows(tmp_path))
        assert not keys or max(keys.values()) == 1, f"{steps}: a key twice in the table"
        if step == "run":
            # a snapshot spread over runs is equal only once its last chunk and the stream after it have run
            done = cli(RUN, tmp_path)
            assert done.returncode == 0, f"{steps}: {done.stdout}{done.stderr}"
    if open_txn is not None:
        open_txn.commit()
        open_txn.close()
    for _ in range(12):  # the snapshot's remaining chunks, then the stream: each run exits 0
        done = cli(RUN, tmp_path)
        assert done.returncode == 0, f"{steps}: {done.stdout}{done.stderr}"
    assert table_rows(tmp_path) == source_rows(maria, mdb), steps
