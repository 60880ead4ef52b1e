"""Exactly-once compaction of a Delta table partition under SIGKILL at every commit point (publish each merged file,
the Delta commit, the compaction record): at every kill delta-rs reads each record once (the old files or the merged
ones), and after the next compaction (which recovers it first) the partition is the merged files, in ONE commit."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest
from compaction.compaction_jobs import compact, ingest
from compaction_delta.delta_table_jobs import (
    APP0,
    DAY0,
    compaction_commits,
    ids,
    make_delta_table_job,
    partition_files,
    table,
)

from gobblin_py.commit.store import CommitStepStore
from gobblin_py.testing.crash import SIGKILLED, commit_points, each_point

pytestmark = pytest.mark.crash
pytest.importorskip("deltalake")

EVERY_ID_ONCE = Counter(range(1200))
STEPS = 4  # publish 2 merged files, the Delta commit, record the compaction


@pytest.fixture(scope="module")
def ingested(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("delta-compaction")
    make_delta_table_job(root)
    ingest(root)
    total = sum(f["size"] for f in partition_files(root, DAY0))
    return {"root": root, "options": ["--partition", "2026/01/01", "--target-size", str(total // 2 + 100)]}


def test_killed_at_every_commit_point_readers_see_every_record_once_and_the_rerun_finishes(tmp_path: Path, ingested: dict) -> None:
    def check(n: int, point: str) -> None:
        root = tmp_path / str(n)
        shutil.copytree(ingested["root"], root, symlinks=True)
        make_delta_table_job(root)  # the job file pointing here (the inputs rewritten as they were)
        killed = compact(root, *ingested["options"], crash_at=point)
        assert killed.returncode == SIGKILLED, f"{point}: {killed.stdout}{killed.stderr}"
        assert ids(root) == EVERY_ID_ONCE, point  # a reader at the kill
        done = compact(root, *ingested["options"])
        assert done.returncode == 0, f"{point}: {done.stdout}{done.stderr}"
        assert ids(root) == EVERY_ID_ONCE, point
        files = partition_files(root, DAY0)
        assert len(files) == 2 and all(f["path"].startswith(f"data/{DAY0}/compacted-") for f in files), point
        assert len(compaction_commits(root)) == 1 and table(root).transaction_version(APP0) == 1, point
        assert CommitStepStore(root / "work").datasets("c") == [], point

    each_point(commit_points(STEPS), check)
