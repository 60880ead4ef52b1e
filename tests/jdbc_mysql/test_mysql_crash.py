"""Exactly-once for a MySQL job: the real CLI SIGKILLed at a commit point of a first load and of an incremental run,
then run again: every row once, the same files and watermarks as clean runs (the PostgreSQL suite covers every point:
the commit path does not depend on the database)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from jdbc_mysql.mysql_jobs import mysql_job
from support.jobs import write_job

from gobblin_py.state.store import StateStore
from gobblin_py.testing.crash import SIGKILLED, cli, duplicates, snapshot

pytestmark = pytest.mark.crash

RUN = ["run", "job.yaml", "--in-process"]


@pytest.fixture(scope="module")
def source_db(maria) -> str:
    """Read-only for every run: 600 orders, integer versions, so every run plans the same ranges (and names)."""
    db = maria.create_database("crash_orders")
    maria.execute(db, "CREATE TABLE orders (id int PRIMARY KEY, amount decimal(10,2) NOT NULL, note text, version bigint)",
                  "INSERT INTO orders WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < 600) "
                  "SELECT i, i * 0.25, CONCAT('n', i), i FROM seq",
                  "INSERT INTO orders VALUES (601, 1, 'no version', NULL)")  # in the first load only
    return db


def _job(tmp: Path, maria: Any, db: str, lag: int) -> None:
    job = mysql_job(tmp, maria, db, [{"table": "orders", "watermark_column": "version", "primary_key": "id",
                                      "watermark_lag": lag}])
    job["job"]["commit_parallelism"] = 1
    write_job(tmp, job)


def _clean(tmp: Path, maria: Any, db: str, lags: list[int]) -> dict:
    for lag in lags:
        _job(tmp, maria, db, lag)
        done = cli(RUN, tmp)
        assert done.returncode == 0, done.stdout + done.stderr
    return {"snapshot": snapshot(tmp / "output"), "watermarks": StateStore(tmp / "work", "j").watermarks()}


@pytest.mark.parametrize("runs, point", [([0], "commit.after_store_write"), ([200, 0], "commit.after_step:3")],
                         ids=["first-load", "incremental"])
def test_killed_at_a_commit_point_then_run_again(tmp_path_factory, maria, source_db: str, runs: list[int],
                                                 point: str) -> None:
    reference = _clean(tmp_path_factory.mktemp("ref"), maria, source_db, runs)
    assert sum(reference["snapshot"]["records"].values()) == 601
    tmp = tmp_path_factory.mktemp("p")
    if len(runs) > 1:
        _clean(tmp, maria, source_db, runs[:-1])
    _job(tmp, maria, source_db, runs[-1])
    crashed = cli(RUN, tmp, crash_at=point)
    assert crashed.returncode == SIGKILLED, f"{point} was never reached: {crashed.stdout}{crashed.stderr}"
    again = cli(RUN, tmp)
    assert again.returncode == 0, f"{point}: {again.stdout}{again.stderr}"
    snap = snapshot(tmp / "output")
    assert duplicates(snap) == 0 and snap == reference["snapshot"]
    assert StateStore(tmp / "work", "j").watermarks() == reference["watermarks"]
