"""`gobblin-py compact`: small files of a partition merged into files near the target size, on Spark tasks and
through the commit log; late files merged by the next compaction; dedup; the job lock; the `compaction:` section."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from pathlib import Path

import fastavro
import pytest
import yaml
from compaction.compaction_jobs import (
    add_input,
    avro_files,
    compact,
    ingest,
    make_job,
    partition,
    read_partition,
    records,
)

from gobblin_py.commit.store import CommitStepStore
from gobblin_py.compaction.compactor import Compactor
from gobblin_py.compaction.plan import CompactionOptions, compaction_options
from gobblin_py.config import load_job
from gobblin_py.runtime.executors.spark import SharedSparkExecutor
from gobblin_py.runtime.runner import JobRunner
from gobblin_py.state.lock import JobLock
from gobblin_py.state.store import CompactionFile
from gobblin_py.testing.crash import cli


@pytest.mark.spark
def test_compaction_on_spark_merges_each_partition_into_files_near_the_target_size(tmp_path: Path, spark) -> None:
    make_job(tmp_path, files=9, per_file=300, commit_parallelism=4)  # both partitions commit side by side
    ingest(tmp_path)
    day1, day2 = partition(tmp_path, 1), partition(tmp_path, 2)
    assert len(avro_files(day1)) == 6 and len(avro_files(day2)) == 3
    before = {p: read_partition(p) for p in (day1, day2)}
    total = sum((day1 / n).stat().st_size for n in avro_files(day1))
    target = total // 3

    job = load_job(tmp_path / "job.yaml")
    report = Compactor(JobRunner(job, SharedSparkExecutor(job, spark))).run(CompactionOptions(target_bytes=target))

    assert report.succeeded, report.to_json()
    assert {p.partition: p.status for p in report.partitions} == {"clicks/2026/01/01": "compacted", "clicks/2026/01/02": "compacted"}
    for p in (day1, day2):
        assert read_partition(p) == before[p]  # every record, once
        assert all(n.startswith("compacted-") for n in avro_files(p))
    out = [(day1 / n).stat().st_size for n in avro_files(day1)]
    merged = sum(out)
    assert len(out) == math.ceil(merged / target)  # files near the target size, the last one the rest
    assert all(s >= target * 0.8 for s in sorted(out)[1:])
    assert not [p for p in day1.parent.iterdir() if p.name.startswith(".")]  # the replaced files are gone
    assert CommitStepStore(tmp_path / "work").datasets("c") == []
    state = CompactionFile(tmp_path / "work" / "state" / "c", "clicks", "2026/01/01").read()
    assert state is not None and state["files_in"] == 6 and state["records_in"] == state["records_out"] == 1800
    assert state["files"] == avro_files(day1)
    other = CompactionFile(tmp_path / "work" / "state" / "c", "clicks", "2026/01/02").read()  # not overwritten by the first
    assert other is not None and other["run_id"] == state["run_id"] == report.result.run_id and other["files"] == avro_files(day2)

    again = Compactor(JobRunner(job, SharedSparkExecutor(job, spark))).run(CompactionOptions(target_bytes=target))
    assert again.succeeded and again.partitions == []  # nothing left to merge
    assert "clicks/2026/01/01" in again.skipped


def test_late_files_are_merged_by_the_next_compaction_never_lost_nor_doubled(tmp_path: Path) -> None:
    make_job(tmp_path)
    ingest(tmp_path)
    assert compact(tmp_path).returncode == 0
    day1 = partition(tmp_path, 1)
    assert len(avro_files(day1)) == 1
    add_input(tmp_path, "late-1", range(5000, 5100))
    add_input(tmp_path, "late-2", range(5100, 5150))
    ingest(tmp_path)
    assert len(avro_files(day1)) == 3  # the compacted file and two late ones
    assert set(read_partition(day1)) == set(range(800)) | set(range(5000, 5150))

    done = compact(tmp_path, "--partition", "2026/01/01")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "clicks/2026/01/01  compacted  3 files" in done.stdout
    seen = read_partition(day1)
    assert set(seen) == set(range(800)) | set(range(5000, 5150)) and set(seen.values()) == {1}
    assert len(avro_files(day1)) == 1


def test_dedup_keeps_the_latest_record_per_key_and_reports_how_many_it_removed(tmp_path: Path) -> None:
    make_job(tmp_path, files=3, per_file=100)  # 300 records of 7 users
    ingest(tmp_path)
    day1 = partition(tmp_path, 1)
    done = compact(tmp_path, "--dedup-key", "user", "--order-by", "id", "--min-files", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "clicks/2026/01/01  compacted  2 files" in done.stdout and "193 duplicates removed" in done.stdout
    kept = records(day1)
    assert sorted((r["user"], r["id"]) for r in kept) == sorted((f"u{i % 7}", i) for i in range(193, 200))

    done = compact(tmp_path, "--dedup-key", "user", "--keep", "first", "--order-by", "amount", "--min-files", "1", "--json")
    assert done.returncode == 0
    assert sorted(r["id"] for r in records(day1)) == list(range(193, 200))  # one per user already: none removed
    assert '"duplicates_removed": 0' in done.stdout


def test_the_compaction_section_sets_what_the_command_line_does_not(tmp_path: Path) -> None:
    make_job(tmp_path, files=6, per_file=50, target_size="1MB", min_files=3, dedup={"key": "user", "order_by": "id"})
    ingest(tmp_path)
    done = compact(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "clicks/2026/01/02  left alone: 2 file(s), fewer than min_files 3" in done.stdout
    assert len(records(partition(tmp_path, 1))) == 7 and len(records(partition(tmp_path, 2))) == 100

    job = load_job(tmp_path / "job.yaml")
    options = compaction_options(job, target_size="2KB", min_files=1, keep="first")
    assert (options.target_bytes, options.min_files, options.dedup.key, options.dedup.keep, options.dedup.order_by) == \
        (2000, 1, "user", "first", "id")


def test_recent_partitions_are_left_alone_with_older_than(tmp_path: Path) -> None:
    make_job(tmp_path)
    ingest(tmp_path)
    old = time.time() - 3 * 86400
    for name in avro_files(partition(tmp_path, 2)):
        os.utime(partition(tmp_path, 2) / name, (old, old))
    done = compact(tmp_path, "--older-than", "1d")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "clicks/2026/01/01  left alone: written to more recently than --older-than" in done.stdout
    assert len(avro_files(partition(tmp_path, 1))) == 4 and len(avro_files(partition(tmp_path, 2))) == 1


@pytest.mark.parametrize("args, message", [
    (["--target-size", "huge"], "--target-size: 'huge' is not a size"),
    (["--older-than", "soon"], "--older-than: 'soon' is not a duration"),
    (["--dataset", "clikcs"], "dataset 'clikcs' has no committed output to compact (did you mean 'clicks'?"),
    (["--keep", "first"], "--keep and --order-by go with --dedup-key FIELD"),
    (["--dedup-key", "user", "--keep", "last"], "--keep: expected latest or first; got 'last'"),
])
def test_bad_options_exit_2_naming_the_option(tmp_path: Path, args: list[str], message: str) -> None:
    make_job(tmp_path, files=1)
    ingest(tmp_path)
    done = compact(tmp_path, *args)
    assert done.returncode == 2 and message in done.stderr, done.stderr


@pytest.mark.parametrize("args, message", [
    (["--dedup-key", "user", "--order-by", "idd"],
     "--order-by 'idd': no field of that name in partition clicks/2026/01/01 (did you mean 'id'? its fields: amount, country, id, kind, ts, user)"),
    (["--dedup-key", "usr"],
     "--dedup-key 'usr': no field of that name in partition clicks/2026/01/01 (did you mean 'user'? its fields: amount, country, id, kind, ts, user)"),
])
def test_a_dedup_field_not_in_the_schema_is_refused_before_any_file_is_written(tmp_path: Path, args: list[str], message: str) -> None:
    make_job(tmp_path, files=3, per_file=100)
    ingest(tmp_path)
    day1 = partition(tmp_path, 1)
    before = {name: (day1 / name).read_bytes() for name in avro_files(day1)}
    done = compact(tmp_path, *args, "--min-files", "1")
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr and "nothing was compacted" in done.stderr, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert {name: (day1 / name).read_bytes() for name in avro_files(day1)} == before  # not one record deleted
    assert not [p.name for p in day1.parent.iterdir() if p.name.startswith(".")]


def test_a_dedup_field_of_the_compaction_section_is_named_by_its_key(tmp_path: Path) -> None:
    make_job(tmp_path, files=3, per_file=100, dedup={"key": "user", "order_by": "tss"})
    ingest(tmp_path)
    done = compact(tmp_path, "--min-files", "1")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "compaction.dedup.order_by 'tss': no field of that name in partition clicks/2026/01/01 (did you mean 'ts'?" in done.stderr


def test_a_bad_compaction_section_is_refused_at_validation(tmp_path: Path) -> None:
    make_job(tmp_path, files=1, target_size="big", min_file=2)
    done = cli(["validate", "job.yaml"], tmp_path)
    assert done.returncode == 2
    assert "compaction.target_size: 'big' is not a size" in done.stderr
    assert "compaction.min_file: unknown key 'min_file'" in done.stderr and "did you mean 'min_files'" in done.stderr


def test_compaction_and_ingestion_exclude_each_other_through_the_job_lock(tmp_path: Path) -> None:
    make_job(tmp_path)
    ingest(tmp_path)
    with JobLock(tmp_path / "work", "c"):  # an ingestion run holds the lock: the compaction is refused
        done = compact(tmp_path)
    assert done.returncode == 1 and "job 'c' is already running" in done.stderr, done.stderr
    assert len(avro_files(partition(tmp_path, 1))) == 4  # untouched

    env = {**os.environ, "GOBBLIN_PY_CRASH_WINDOW_S": "0.3"}  # the compaction pauses at each commit point
    env.pop("GOBBLIN_PY_CRASH_AT", None)
    running = subprocess.Popen([sys.executable, "-m", "gobblin_py.cli.main", "compact", "job.yaml", "--in-process"],
                               cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lock_file = tmp_path / "work" / "locks" / "c.lock"
        deadline = time.monotonic() + 30
        while not (lock_file.exists() and lock_file.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.05)
        add_input(tmp_path, "late", range(9000, 9010))
        blocked = cli(["run", "job.yaml", "--in-process"], tmp_path)  # ingestion while the compaction holds the lock
        assert blocked.returncode == 1 and "already running" in blocked.stderr + blocked.stdout
    finally:
        out, err = running.communicate(timeout=120)
    assert running.returncode == 0, out + err
    ingest(tmp_path)  # the ingestion that was refused runs next: its late file is not lost
    assert set(read_partition(partition(tmp_path, 1))) == set(range(800)) | set(range(9000, 9010))


@pytest.mark.parametrize("change, message", [
    ({"job": {"lock": False, "delivery": "at_least_once"}}, "job.lock: compaction needs the job lock"),  # exactly-once refuses it at validation
    ({"writer": {"class": "jsonl", "codec": None}}, "writer: compaction merges Avro files; this branch's writer is jsonl"),
])
def test_a_job_compaction_cannot_keep_exactly_once_is_refused_before_anything_runs(tmp_path: Path, change: dict, message: str) -> None:
    job = yaml.safe_load(make_job(tmp_path, files=1).read_text())
    for section, values in change.items():
        job[section].update(values)
        job[section] = {k: v for k, v in job[section].items() if v is not None}
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(job))
    done = compact(tmp_path)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert not (tmp_path / "work" / "locks").exists()


def test_files_written_with_an_older_schema_are_read_into_the_newest_one(tmp_path: Path) -> None:
    make_job(tmp_path, files=3)
    ingest(tmp_path)
    day1 = partition(tmp_path, 1)
    newest = records(day1)
    old_schema = {"type": "record", "name": "Event", "namespace": "gobblin_py.example", "fields": [
        {"name": "id", "type": "long"}, {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "user", "type": "string"}, {"name": "kind", "type": "string"}]}
    old = day1 / "part-old-00000000000000000000000000000000.avro"
    with open(old, "wb") as out:
        fastavro.writer(out, old_schema, [{"id": 7000 + i, "ts": 0, "user": "old", "kind": "view"} for i in range(5)])
    os.utime(old, (1, 1))  # written long before the others: theirs is the newest schema
    done = compact(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    merged = records(day1)
    assert len(avro_files(day1)) == 1 and len(merged) == len(newest) + 5
    assert [(r["user"], r["amount"], r["country"]) for r in merged if r["id"] >= 7000] == [("old", None, None)] * 5
