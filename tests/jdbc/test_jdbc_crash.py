"""Exactly-once for a JDBC job: the real CLI SIGKILLed at every commit point of a first load and of an
incremental run, then run again: every row version once, the same files and watermarks as clean runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from jdbc.jdbc_jobs import jdbc_job
from support.jobs import write_job

from gobblin_py.state.store import StateStore
from gobblin_py.testing.crash import SIGKILLED, cli, commit_points, duplicates, each_point, recovery_points, snapshot

pytestmark = pytest.mark.crash

RUN = ["run", "job.yaml", "--in-process"]
STEPS = 6  # 4 sub-range files + watermarks + state


@pytest.fixture(scope="module")
def source_db(pg) -> str:
    """Read-only for every run: 600 orders, integer versions, so every run plans the same ranges (and names)."""
    db = pg.create_database("crash_orders")
    with pg.connect(db) as conn:
        conn.execute("CREATE TABLE orders (id int PRIMARY KEY, amount numeric(10,2) NOT NULL, note text, version bigint)")
        conn.execute("INSERT INTO orders SELECT i, i * 0.25, 'n' || i, i FROM generate_series(1, 600) i")
        conn.execute("INSERT INTO orders VALUES (601, 1, 'no version', NULL)")  # in the first load only
    return db


def _job(tmp: Path, pg: Any, db: str, lag: int) -> None:
    job = jdbc_job(tmp, pg, db, [{"table": "public.orders", "watermark_column": "version", "primary_key": "id",
                                  "watermark_lag": lag}])
    job["job"]["commit_parallelism"] = 1
    write_job(tmp, job)


def _clean(tmp: Path, pg: Any, db: str, lags: list[int]) -> dict:
    for lag in lags:
        _job(tmp, pg, db, lag)
        done = cli(RUN, tmp)
        assert done.returncode == 0, done.stdout + done.stderr
    return {"snapshot": snapshot(tmp / "output"), "watermarks": StateStore(tmp / "work", "j").watermarks()}


def _assert_same(tmp: Path, reference: dict) -> None:
    snap = snapshot(tmp / "output")
    assert duplicates(snap) == 0
    assert snap == reference["snapshot"]
    assert StateStore(tmp / "work", "j").watermarks() == reference["watermarks"]
    assert cli(["inspect-commits", "job.yaml"], tmp).returncode == 0


@pytest.mark.parametrize("runs", [[0], [200, 0]], ids=["first-load", "incremental"])
def test_kill_at_every_commit_point_then_run_again(tmp_path_factory, pg, source_db: str, runs: list[int]) -> None:
    reference = _clean(tmp_path_factory.mktemp("ref"), pg, source_db, runs)
    assert sum(reference["snapshot"]["records"].values()) == 601
    points = commit_points(STEPS) + recovery_points()[:1]
    dirs = [tmp_path_factory.mktemp("p") for _ in points]

    def check(n: int, point: str) -> None:
        tmp = dirs[n]
        if len(runs) > 1:
            _clean(tmp, pg, source_db, runs[:-1])
        _job(tmp, pg, source_db, runs[-1])
        if point.startswith("recovery."):  # killed mid-commit, then killed again while recovering
            assert cli(RUN, tmp, crash_at="commit.after_step:3").returncode == SIGKILLED
        crashed = cli(RUN, tmp, crash_at=point)
        assert crashed.returncode == SIGKILLED, f"{point} was never reached: {crashed.stdout}{crashed.stderr}"
        again = cli(RUN, tmp)
        assert again.returncode == 0, f"{point}: {again.stdout}{again.stderr}"
        _assert_same(tmp, reference)

    each_point(points, check)
