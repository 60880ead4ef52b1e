"""Exactly-once compaction under SIGKILL: the real CLI killed at every commit point of a partition's compaction
(and during the recovery of one, and at random times). At every kill a reader of the partition sees each record
exactly once (its old files or its merged ones, never both, never neither), and after the next run (a
compaction or an ingestion, which recovers it first) the partition holds every record exactly once, merged."""

from __future__ import annotations

import random
import shutil
from collections import Counter
from pathlib import Path

import fastavro
import pytest
from compaction.compaction_jobs import avro_files, compact, ingest, make_job, partition, read_partition

from gobblin_py.commit.store import CommitStepStore
from gobblin_py.state.store import CompactionFile
from gobblin_py.testing.crash import SIGKILLED, cli, commit_points, kill_at_random, time_to_point

pytestmark = pytest.mark.crash

EVERY_ID_ONCE = Counter(range(800))  # the 2026/01/01 partition of make_job's defaults


@pytest.fixture(scope="module")
def ingested(tmp_path_factory) -> tuple[Path, list[str]]:
    """One ingested job (4 small files in 2026/01/01), copied for each kill; the compaction's options (2 merged files)."""
    root = tmp_path_factory.mktemp("ingested")
    make_job(root)
    ingest(root)
    day1 = partition(root)
    total = sum((day1 / n).stat().st_size for n in avro_files(day1))
    return root, ["--partition", "2026/01/01", "--target-size", str(total // 2 + 100)]


def _copy(ingested: tuple[Path, list[str]], tmp: Path) -> Path:
    root = tmp / "job"
    shutil.copytree(ingested[0], root, symlinks=True)
    make_job(root)  # the job file, its paths in this copy (same inputs, already ingested)
    return root


def _assert_compacted_once(root: Path) -> None:
    day1 = partition(root)
    assert read_partition(day1) == EVERY_ID_ONCE
    assert len(avro_files(day1)) == 2 and all(n.startswith("compacted-") for n in avro_files(day1))
    assert not [p.name for p in day1.parent.iterdir() if p.name.startswith(".")]  # staging and replaced files gone
    assert CommitStepStore(root / "work").datasets("c") == []
    record = CompactionFile(root / "work" / "state" / "c", "clicks", "2026/01/01").read()
    assert record is not None and (record["files_in"], record["records_out"]) == (4, 800)


STEPS = 5  # stage 2 merged files, exchange the directories, remove the replaced files, record the compaction


@pytest.mark.parametrize("point", commit_points(STEPS))
def test_killed_at_every_commit_point_readers_see_every_record_once_and_the_rerun_finishes(
        ingested: tuple[Path, list[str]], tmp_path: Path, point: str) -> None:
    root = _copy(ingested, tmp_path)
    options = ingested[1]
    killed = compact(root, *options, crash_at=point)
    assert killed.returncode == SIGKILLED, killed.stdout + killed.stderr

    day1 = partition(root)
    assert read_partition(day1) == EVERY_ID_ONCE  # a reader at this moment: each record once
    exchanged = all(n.startswith("compacted-") for n in avro_files(day1))
    assert exchanged == (point in ("commit.after_step:3", "commit.after_step:4", "commit.after_step:5",
                                   "commit.before_record_removal", "commit.after_record_removal"))

    done = compact(root, *options)
    assert done.returncode == 0, done.stdout + done.stderr
    _assert_compacted_once(root)


def test_killed_while_recovering_a_compaction_then_an_ingestion_run_finishes_it(
        ingested: tuple[Path, list[str]], tmp_path: Path) -> None:
    root = _copy(ingested, tmp_path)
    assert compact(root, *ingested[1], crash_at="commit.after_step:2").returncode == SIGKILLED  # staged, not exchanged
    assert compact(root, *ingested[1], crash_at="recovery.before_commit").returncode == SIGKILLED
    assert read_partition(partition(root)) == EVERY_ID_ONCE
    run = cli(["run", "job.yaml", "--in-process"], root)  # an ingestion's recovery replays the compaction first
    assert run.returncode == 0, run.stdout + run.stderr
    _assert_compacted_once(root)


def test_killed_at_random_times(ingested: tuple[Path, list[str]], tmp_path: Path) -> None:
    rng = random.Random(18)
    args = ["compact", "job.yaml", "--in-process", *ingested[1]]
    probe = _copy(ingested, tmp_path / "probe")
    start = time_to_point(args, probe, "commit.before_store_write")
    landed = 0
    for n in range(6):
        root = _copy(ingested, tmp_path / f"kill{n}")
        code = kill_at_random(args, root, after_s=start + rng.uniform(-0.2, 0.6), window_s=0.05)
        landed += code == SIGKILLED
        assert read_partition(partition(root)) == EVERY_ID_ONCE
        done = cli(args, root)
        assert done.returncode == 0, done.stdout + done.stderr
        _assert_compacted_once(root)
    assert landed >= 3


def test_a_file_published_into_the_partition_while_its_compaction_is_pending_is_kept(
        ingested: tuple[Path, list[str]], tmp_path: Path) -> None:
    root = _copy(ingested, tmp_path)
    assert compact(root, *ingested[1], crash_at="commit.after_step:2").returncode == SIGKILLED  # staged, not exchanged
    day1 = partition(root)
    late = day1 / "late-00000000000000000000000000000000.avro"
    shutil.copy(day1 / avro_files(day1)[0], tmp_path / "one.avro")
    with open(tmp_path / "one.avro", "rb") as f:
        reader = fastavro.reader(f)
        schema, rows = reader.writer_schema, [dict(r, id=r["id"] + 10_000) for r in reader]
    with open(late, "wb") as out:  # as an ingestion would publish it, had the compaction's commit been blocked
        fastavro.writer(out, schema, rows)

    done = compact(root, *ingested[1])
    assert done.returncode == 0, done.stdout + done.stderr
    seen = read_partition(day1)
    assert seen == EVERY_ID_ONCE + Counter(r["id"] for r in rows)  # the late file's records are there, once
    assert late.name in avro_files(day1)  # carried through the exchange, merged by the next compaction
    again = compact(root, "--partition", "2026/01/01")
    assert again.returncode == 0 and read_partition(day1) == seen and len(avro_files(day1)) == 1
