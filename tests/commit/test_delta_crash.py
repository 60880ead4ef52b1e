"""The `delta` publisher under SIGKILL at every commit point, the Delta commit included: after the next run every
record is in its table exactly once, and each table is its creation plus ONE add commit (no duplicate)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from builtin.test_delta_publisher import DATASETS, commits, delta_ids, delta_job, duckdb_ids, table
from support.jobs import write_job

from gobblin_py.state.store import StateStore
from gobblin_py.testing.crash import SIGKILLED, cli, commit_points, each_point

pytestmark = pytest.mark.crash
RUN = ["run", "job.yaml", "--in-process"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("reference")
    write_job(tmp, delta_job(tmp))
    done = cli(RUN, tmp)
    assert done.returncode == 0, done.stdout + done.stderr
    tables = {d: table(tmp, d) for d in DATASETS}
    files = sum(len(t.file_uris()) for t in tables.values()) + len(list((tmp / "lake" / "_errors").rglob("*.jsonl")))
    return {"tmp": tmp, "ids": {d: delta_ids(t) for d, t in tables.items()}, "steps": files + 3 * len(DATASETS),
            "watermarks": StateStore(tmp / "work", "t").watermarks()}


def test_killed_at_every_commit_point_each_record_is_in_the_table_once(tmp_path: Path, reference: dict) -> None:
    points = commit_points(reference["steps"])
    assert len(points) > reference["steps"] > 2 * len(DATASETS) + 3

    def check(n: int, point: str) -> None:
        tmp = tmp_path / str(n)
        tmp.mkdir()
        shutil.copytree(reference["tmp"] / "data", tmp / "data")
        write_job(tmp, delta_job(tmp))
        killed = cli(RUN, tmp, crash_at=point)
        assert killed.returncode == SIGKILLED, f"{point}: {killed.stdout}{killed.stderr}"
        again = cli(RUN, tmp)
        assert again.returncode == 0, f"{point}: {again.stdout}{again.stderr}"
        assert StateStore(tmp / "work", "t").watermarks() == reference["watermarks"], point
        for d in DATASETS:
            t = table(tmp, d)
            ids = delta_ids(t)
            assert ids == reference["ids"][d] and set(ids.values()) == {1}, f"{point}: {d}"
            assert duckdb_ids(t) == ids, f"{point}: {d}"
            assert t.version() == 1 and len(commits(t)) == 1, f"{point}: {d}: one creation, one add"
            assert t.transaction_version(f"gobblin-py/t/{d}") == 1, point
        leftovers = list((tmp / "work" / "task-output").rglob("*.parquet"))
        assert not leftovers, f"{point}: task output left behind: {leftovers[:3]}"

    each_point(points, check)
