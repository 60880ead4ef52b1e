"""Retention on a files dataset (`maintain --retention`): whole day partitions older than the retention are deleted
through the commit log, the young ones kept, nothing outside the dataset touched; a dry run changes nothing; a
partition a pending commit touches is refused, named; a SIGKILL at every commit point of the deletion sequence is
completed by the next `maintain --yes` (or `run`)."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest
import yaml
from compaction.compaction_jobs import DAY_MS, JAN1, add_input, ingest, make_job, partition, read_partition

from gobblin_py.commit.store import CommitStepStore
from gobblin_py.testing.crash import SIGKILLED, cli, commit_points, each_point

JAN2_NOON = (JAN1 + DAY_MS + DAY_MS // 2) / 1000


def _retention() -> str:
    """A retention whose cutoff is noon of January 2nd 2026: January 1st ended before it, January 2nd did not."""
    return f"{time.time() - JAN2_NOON:.0f}"


def maintain(root: Path, *args: str, crash_at: str | None = None):
    return cli(["maintain", "job.yaml", "--retention", _retention(), *args], root, crash_at=crash_at)


def tree(root: Path) -> dict[str, str]:
    """Every file under `root` with its content's digest, and every directory."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(root.rglob("*"))}


@pytest.fixture(scope="module")
def ingested(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ingested")
    make_job(root)
    ingest(root)
    assert read_partition(partition(root, 1)) and read_partition(partition(root, 2))
    return root


def _copy(ingested: Path, tmp: Path) -> Path:
    import shutil

    root = tmp / "job"
    shutil.copytree(ingested, root, symlinks=True)
    make_job(root)
    (root / "output" / "elsewhere").mkdir()
    (root / "output" / "elsewhere" / "keep.txt").write_text("not the dataset's")
    return root


def _assert_retained(root: Path, day2: dict) -> None:
    assert not (root / "output" / "clicks" / "2026" / "01" / "01").exists()
    assert {k: v for k, v in tree(root / "output").items() if "2026/01/02" in k} == day2
    assert (root / "output" / "elsewhere" / "keep.txt").read_text() == "not the dataset's"
    assert CommitStepStore(root / "work").datasets("c") == []


def test_dry_run_lists_the_old_partition_and_changes_nothing(ingested: Path, tmp_path: Path) -> None:
    root = _copy(ingested, tmp_path)
    before, commits = tree(root / "output"), tree(root / "work" / "commits") if (root / "work" / "commits").exists() else {}
    dry = maintain(root)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert f"would delete: {partition(root, 1)}" in dry.stdout
    assert "2026/01/02" not in dry.stdout
    assert tree(root / "output") == before
    assert (tree(root / "work" / "commits") if (root / "work" / "commits").exists() else {}) == commits


def test_yes_deletes_the_old_partition_only(ingested: Path, tmp_path: Path) -> None:
    root = _copy(ingested, tmp_path)
    day2 = {k: v for k, v in tree(root / "output").items() if "2026/01/02" in k}
    done = maintain(root, "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"deleted: {partition(root, 1)}" in done.stdout
    _assert_retained(root, day2)
    events = (root / "work" / "events" / "c.jsonl").read_text()
    assert "MaintenanceAction" in events and str(partition(root, 1)) in events
    again = cli(["run", "job.yaml", "--in-process", "-q"], root)  # the state still says day 1 was ingested: nothing comes back
    assert again.returncode == 0, again.stdout + again.stderr
    assert not partition(root, 1).exists()


def test_a_partition_a_pending_commit_touches_is_refused_and_named(ingested: Path, tmp_path: Path) -> None:
    root = _copy(ingested, tmp_path)
    add_input(root, "late", range(5000, 5010), day=0)  # late data for January 1st
    killed = cli(["run", "job.yaml", "--in-process"], root, crash_at="commit.after_store_write:1")
    assert killed.returncode == SIGKILLED, killed.stdout + killed.stderr
    [record] = CommitStepStore(root / "work").datasets("c")
    dry = maintain(root)
    assert dry.returncode == 0 and "refused: partition 2026/01/01 of clicks" in dry.stdout and record in dry.stdout, dry.stdout
    assert "would delete" not in dry.stdout


@pytest.mark.crash
def test_killed_at_every_commit_point_the_next_maintain_or_run_finishes(ingested: Path, tmp_path: Path) -> None:
    """Where the deletion's record was left pending, odd points recover it with `run` (which deletes the partition
    and ingests nothing again), the others with `maintain`."""
    def check(n: int, point: str) -> None:
        (tmp_path / str(n)).mkdir()
        root = _copy(ingested, tmp_path / str(n))
        day2 = {k: v for k, v in tree(root / "output").items() if "2026/01/02" in k}
        killed = maintain(root, "--yes", crash_at=point)
        assert killed.returncode == SIGKILLED, killed.stdout + killed.stderr
        assert {k: v for k, v in tree(root / "output").items() if "2026/01/02" in k} == day2
        if n % 2 and CommitStepStore(root / "work").datasets("c"):
            done = cli(["run", "job.yaml", "--in-process", "-q"], root)
        else:
            done = maintain(root, "--yes")
        assert done.returncode == 0, done.stdout + done.stderr
        _assert_retained(root, day2)

    each_point(commit_points(1), check)


def test_a_dataset_under_a_deep_directory_is_maintained(tmp_path: Path) -> None:
    """The record of a deletion is named by its target; a final directory deep enough that the name, written as a
    file name, passes the file system's 255 bytes still gets its record (named by a digest of the target), which the
    next `maintain` completes after a kill."""
    root = tmp_path / "job"
    root.mkdir()
    make_job(root)
    deep = root / "lake" / ("a" * 60) / ("b" * 60) / ("c" * 60)
    job = yaml.safe_load((root / "job.yaml").read_text())
    job["publisher"]["final_dir"] = str(deep)
    (root / "job.yaml").write_text(yaml.safe_dump(job))
    ingest(root)
    day1 = deep / "clicks" / "2026" / "01" / "01"
    assert read_partition(day1)
    killed = maintain(root, "--yes", crash_at="commit.after_store_write")
    assert killed.returncode == SIGKILLED, killed.stdout + killed.stderr
    [record] = CommitStepStore(root / "work").datasets("c")
    assert record.startswith("maintain/retention/clicks-") and len(record) < 100, record
    done = maintain(root, "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"recovered the pending commit of dataset {record}" in done.stderr and not day1.exists()
    assert read_partition(deep / "clicks" / "2026" / "01" / "02")
    assert CommitStepStore(root / "work").datasets("c") == []
