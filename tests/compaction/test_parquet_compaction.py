"""`gobblin-py compact` on Parquet files published to directories: a partition's small files merged by the parquet
writer into ceil(bytes / target) files of as many rows each, swapped in by the same directory exchange as Avro
files; read back by DuckDB (an engine that did not write them) at every SIGKILL of the commit and after the rerun."""

from __future__ import annotations

import math
import shutil
from collections import Counter
from pathlib import Path

import duckdb
import pytest
import yaml
from compaction.compaction_jobs import add_input, compact, ingest, make_job, partition

from gobblin_py.commit.store import CommitStepStore
from gobblin_py.testing.crash import SIGKILLED, commit_points


def make_parquet_job(root: Path, **kwargs: object) -> Path:
    """compaction_jobs' job (small files per day partition) with the parquet writer."""
    path = make_job(root, **kwargs)  # type: ignore[arg-type]
    job = yaml.safe_load(path.read_text())
    job["writer"] = {"class": "parquet", "partition": {"column": "ts", "granularity": "DAY"}}
    path.write_text(yaml.safe_dump(job))
    return path


def parquet_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".parquet") and not p.name.startswith((".", "_")))


def read_ids(directory: Path) -> Counter[int]:
    """How many times DuckDB, listing the partition as a query engine does, sees each id."""
    files = [str(directory / n) for n in parquet_files(directory)]
    return Counter(r[0] for r in duckdb.connect().execute("SELECT id FROM read_parquet(?)", [files]).fetchall())


def test_a_partition_of_parquet_files_becomes_ceil_bytes_over_target_files(tmp_path: Path) -> None:
    make_parquet_job(tmp_path, files=9, per_file=300)
    ingest(tmp_path)
    day1 = partition(tmp_path, 1)
    total = sum((day1 / n).stat().st_size for n in parquet_files(day1))
    assert len(parquet_files(day1)) == 6
    target = total // 3 + 1

    done = compact(tmp_path, "--target-size", str(target))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "clicks/2026/01/01  compacted  6 files" in done.stdout and "→ 3 files" in done.stdout
    assert read_ids(day1) == Counter(range(1800))
    names = parquet_files(day1)
    assert len(names) == math.ceil(total / target) == 3 and all(n.startswith("compacted-") for n in names)
    rows = duckdb.connect().execute("SELECT count(*) FROM read_parquet(?) GROUP BY filename ORDER BY 1",
                                    [[str(day1 / n) for n in names]]).fetchall()
    assert [r[0] for r in rows] == [600, 600, 600]  # as many rows each
    assert not [p.name for p in day1.parent.iterdir() if p.name.startswith(".")]

    again = compact(tmp_path, "--target-size", str(target))
    assert "clicks/2026/01/01  left alone: 3 file(s) of its last compaction, no file added since" in again.stdout
    add_input(tmp_path, "late", range(9000, 9050))
    ingest(tmp_path)
    late = compact(tmp_path, "--target-size", str(target))
    assert late.returncode == 0 and "clicks/2026/01/01  compacted  4 files" in late.stdout, late.stdout + late.stderr
    assert read_ids(day1) == Counter([*range(1800), *range(9000, 9050)])


def test_dedup_keeps_the_latest_row_per_key(tmp_path: Path) -> None:
    make_parquet_job(tmp_path, files=3, per_file=100)  # 200 records of 7 users on January 1st
    ingest(tmp_path)
    done = compact(tmp_path, "--dedup-key", "user", "--order-by", "id", "--min-files", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "clicks/2026/01/01  compacted  2 files" in done.stdout and "193 duplicates removed" in done.stdout
    assert read_ids(partition(tmp_path, 1)) == Counter(range(193, 200))


def test_a_dedup_order_by_not_in_the_files_is_refused_before_any_file_is_written(tmp_path: Path) -> None:
    make_parquet_job(tmp_path, files=3, per_file=100)
    ingest(tmp_path)
    day1 = partition(tmp_path, 1)
    before = parquet_files(day1)
    done = compact(tmp_path, "--dedup-key", "user", "--order-by", "idd", "--min-files", "1")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--order-by 'idd': no field of that name in partition clicks/2026/01/01 (did you mean 'id'?" in done.stderr
    assert parquet_files(day1) == before and read_ids(day1) == Counter(range(200))


EVERY_ID_ONCE = Counter(range(800))  # January 1st of make_job's defaults
STEPS = 5  # stage 2 merged files, exchange the directories, remove the replaced files, record the compaction
EXCHANGED = ("commit.after_step:3", "commit.after_step:4", "commit.after_step:5", "commit.before_record_removal",
             "commit.after_record_removal")


@pytest.fixture(scope="module")
def ingested(tmp_path_factory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("parquet")
    make_parquet_job(root)
    ingest(root)
    day1 = partition(root)
    total = sum((day1 / n).stat().st_size for n in parquet_files(day1))
    return root, ["--partition", "2026/01/01", "--target-size", str(total // 2 + 100)]


@pytest.mark.crash
@pytest.mark.parametrize("point", commit_points(STEPS))
def test_killed_at_every_commit_point_readers_see_every_row_once_and_the_rerun_finishes(
        ingested: tuple[Path, list[str]], tmp_path: Path, point: str) -> None:
    root = tmp_path / "job"
    shutil.copytree(ingested[0], root, symlinks=True)
    make_parquet_job(root)  # the job file's paths in this copy (same inputs, already ingested)
    killed = compact(root, *ingested[1], crash_at=point)
    assert killed.returncode == SIGKILLED, killed.stdout + killed.stderr
    day1 = partition(root)
    assert read_ids(day1) == EVERY_ID_ONCE  # a reader at this moment: each row once
    assert all(n.startswith("compacted-") for n in parquet_files(day1)) == (point in EXCHANGED)

    done = compact(root, *ingested[1])
    assert done.returncode == 0, done.stdout + done.stderr
    assert read_ids(day1) == EVERY_ID_ONCE
    names = parquet_files(day1)
    assert len(names) == 2 and all(n.startswith("compacted-") for n in names)
    assert not [p.name for p in day1.parent.iterdir() if p.name.startswith(".")]
    assert CommitStepStore(root / "work").datasets("c") == []
