"""`gobblin-py compact` on a job publishing to a Delta table: a day partition's small Parquet files become
ceil(bytes / target) merged files in ONE Delta commit (its files removed, the merged ones added, tagged by a
transaction), every record read back once by delta-rs; the next compaction leaves the merged partition alone; a
commit whose merged input left the table meanwhile is refused, naming it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from compaction.compaction_jobs import compact, ingest
from compaction_delta.delta_table_jobs import (
    APP0,
    DAY0,
    DAY1,
    compaction_commits,
    ids,
    make_delta_table_job,
    partition_files,
    table,
)

from gobblin_py.commit.store import CommitStepStore
from gobblin_py.state.store import CompactionFile

pytest.importorskip("deltalake")


def test_a_partition_becomes_ceil_bytes_over_target_files_in_one_delta_commit(tmp_path: Path) -> None:
    make_delta_table_job(tmp_path, files=6, per_file=200)
    ingest(tmp_path)
    before = ids(tmp_path)
    assert len(before) == 1200 and set(before.values()) == {1}
    inputs = partition_files(tmp_path, DAY0)
    assert len(inputs) == 4
    target = sum(f["size"] for f in inputs) // 2 + 100
    version = table(tmp_path).version()

    done = compact(tmp_path, "--partition", "2026/01/01", "--target-size", str(target))
    assert done.returncode == 0, done.stdout + done.stderr
    assert ids(tmp_path) == before
    merged = partition_files(tmp_path, DAY0)
    assert len(merged) == math.ceil(sum(f["size"] for f in inputs) / target) == 2
    assert all(f["path"].startswith(f"data/{DAY0}/compacted-") for f in merged)
    assert sum(f["records"] for f in merged) == 800
    assert len(partition_files(tmp_path, DAY1)) == 2  # another partition: untouched
    t = table(tmp_path)
    assert t.version() == version + 1 and t.transaction_version(APP0) == 1
    [commit] = compaction_commits(tmp_path)
    counts = json.loads(commit["gobblin-py.compaction"])
    assert (counts["files_in"], counts["files_out"], counts["records_in"], counts["records_out"]) == (4, 2, 800, 800)
    assert CommitStepStore(tmp_path / "work").datasets("c") == []
    state = CompactionFile(tmp_path / "work" / "state" / "c", "clicks", DAY0).read()
    assert state is not None and state["files_in"] == 4

    again = compact(tmp_path, "--partition", "2026/01/01", "--target-size", str(target))
    assert again.returncode == 0 and "of its last compaction" in again.stdout, again.stdout
    assert table(tmp_path).version() == version + 1


def test_a_merged_file_gone_from_the_table_stops_the_commit_naming_it(tmp_path: Path) -> None:
    make_delta_table_job(tmp_path, files=6, per_file=200)
    ingest(tmp_path)
    inputs = partition_files(tmp_path, DAY0)
    target = str(sum(f["size"] for f in inputs) // 2 + 100)
    killed = compact(tmp_path, "--partition", "2026/01/01", "--target-size", target, crash_at="commit.after_store_write")
    assert killed.returncode != 0
    from deltalake.transaction import RemoveAction

    t = table(tmp_path)  # another writer removes one of the files the pending compaction merged
    gone = inputs[0]
    t.create_write_transaction([RemoveAction(gone["path"], True, 0, gone["size"], {"ts_day": "2026-01-01"})], "append",
                               t.schema(), ["ts_day"])
    done = compact(tmp_path, "--partition", "2026/01/01", "--target-size", target)
    assert done.returncode != 0
    assert "no longer in the table" in done.stdout + done.stderr and gone["path"] in done.stdout + done.stderr
    assert len(partition_files(tmp_path, DAY0)) == 3 and not compaction_commits(tmp_path)  # nothing replaced
