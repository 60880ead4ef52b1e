"""The `delta` publisher in upsert mode under SIGKILL at every commit point of the first load (which creates the
table) and of each run of updates and deletes after it (one delta-rs merge each), and during the recovery of a
killed commit: after the next run the table read by delta-rs and DuckDB equals the source's state by key, each key
once, one MERGE per committed run (known by its commit id, never applied twice), and no task output left."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from builtin.test_delta_upsert import delta_upsert_job, read_back
from builtin.test_iceberg_upsert import FIRST, SECOND, expected, write_changes
from commit.test_iceberg_upsert_crash import _ok as _run
from commit.test_iceberg_upsert_crash import killed_at_each_point_of_a_first_load, killed_at_each_point_of_update_runs

from gobblin_py.state.store import StateStore
from gobblin_py.testing.crash import commit_points, each_point, recovery_points

deltalake = pytest.importorskip("deltalake")
pytestmark = pytest.mark.crash
POINTS = commit_points(3)  # the merge, the watermarks, the state (no error files)


def _fresh(tmp: Path) -> Path:
    from support.jobs import write_job

    tmp.mkdir(parents=True)
    write_changes(tmp, "c-001.jsonl", FIRST)
    write_job(tmp, delta_upsert_job(tmp))
    return tmp


def _equal(tmp: Path, point: str, *batches: list[dict]) -> None:
    assert read_back(tmp) == expected(*batches), point
    history = deltalake.DeltaTable(str(tmp / "lake" / "customers")).history()
    merged = [h for h in history if "gobblin-py.upsert" in h]
    assert [h["operation"] for h in merged] == ["MERGE"] * len(batches), f"{point}: one MERGE per committed run"
    assert len({h["gobblin-py.commit-id"] for h in merged}) == len(batches), point
    marks = StateStore(tmp / "work", "u").watermarks()["customers"]
    assert json.loads(merged[0]["gobblin-py.watermarks"]).items() <= marks.items(), point
    assert not [p for p in (tmp / "work" / "task-output").rglob("*") if p.is_file()], f"{point}: task output left"


def test_killed_at_every_commit_point_of_the_first_load_the_table_is_the_source(tmp_path: Path) -> None:
    killed_at_each_point_of_a_first_load(tmp_path, POINTS, _fresh, _equal)


def test_killed_at_every_commit_point_of_an_update_run_the_table_is_the_source(tmp_path: Path) -> None:
    killed_at_each_point_of_update_runs(_fresh(tmp_path / "t"), POINTS, _equal)


def test_killed_after_the_merge_then_during_recovery_the_next_run_applies_it_once(tmp_path: Path) -> None:
    def check(n: int, point: str) -> None:
        tmp = _fresh(tmp_path / str(n))
        _run(tmp, "first load")
        write_changes(tmp, "c-002.jsonl", SECOND)
        _run(tmp, "commit.after_step:1", crash_at="commit.after_step:1")  # merged, the watermarks not moved
        _run(tmp, point, crash_at=point)
        _run(tmp, point)
        _equal(tmp, point, FIRST, SECOND)

    each_point(recovery_points(), check)
