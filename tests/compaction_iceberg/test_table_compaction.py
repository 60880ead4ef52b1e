"""`gobblin-py compact` on a job publishing to an Iceberg table: each selected table partition's small Parquet files
become ceil(bytes / target) merged files in ONE replace snapshot, every record read back once by DuckDB from the
files pyiceberg plans; late files merged by the next compaction; dedup; a replay that finds files added since
removes only the files it merged; what cannot be compacted is refused naming the key."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import yaml
from builtin.test_iceberg_publisher import _schema_with, catalog, table_ids
from compaction.compaction_jobs import JAN1, add_input, compact, ingest
from compaction_iceberg.table_jobs import (
    DAY0,
    DAY1,
    TABLE,
    compaction_snapshots,
    ids,
    make_table_job,
    partition_files,
    table,
)

from gobblin_py.commit.store import CommitStepStore
from gobblin_py.compaction.compactor import Compactor
from gobblin_py.compaction.plan import CompactionOptions
from gobblin_py.config import load_job
from gobblin_py.runtime.executors.spark import SharedSparkExecutor
from gobblin_py.runtime.runner import JobRunner
from gobblin_py.state.store import CompactionFile
from gobblin_py.testing.crash import SIGKILLED, cli


def _sizes(root: Path, partition: str) -> list[int]:
    return [f["file_size_in_bytes"] for f in partition_files(root, partition)]


@pytest.mark.spark
def test_each_table_partition_becomes_ceil_bytes_over_target_files_in_one_replace_snapshot(tmp_path: Path, spark) -> None:
    make_table_job(tmp_path, files=9, per_file=300)
    ingest(tmp_path)
    before = ids(tmp_path)
    assert len(before) == 2700 and set(before.values()) == {1}
    in0, in1 = _sizes(tmp_path, DAY0), _sizes(tmp_path, DAY1)
    assert (len(in0), len(in1)) == (6, 3)
    target = sum(in0) // 3 + 1
    snapshots_before = len(table(tmp_path).snapshots())

    job = load_job(tmp_path / "job.yaml")
    report = Compactor(JobRunner(job, SharedSparkExecutor(job, spark))).run(CompactionOptions(target_bytes=target))

    assert report.succeeded, report.to_json()
    rel0, rel1 = f"{TABLE}/{DAY0}", f"{TABLE}/{DAY1}"
    assert {p.partition: p.status for p in report.partitions} == {rel0: "compacted", rel1: "compacted"}
    assert ids(tmp_path) == before  # every record once, read by DuckDB from the files the table now lists
    out0 = partition_files(tmp_path, DAY0)
    assert len(out0) == math.ceil(sum(in0) / target) == 3
    assert len(partition_files(tmp_path, DAY1)) == math.ceil(sum(in1) / target)
    assert sorted(f["record_count"] for f in out0) == [600, 600, 600]  # as many rows each
    assert all("/data/ts_day=2026-01-01/compacted-" in f["file_path"] for f in out0)

    snaps = compaction_snapshots(tmp_path)
    assert len(table(tmp_path).snapshots()) == snapshots_before + 2  # one snapshot per compacted partition
    assert [s["operation"] for s in snaps] == ["replace", "replace"]
    assert sorted((s["deleted-data-files"], s["added-data-files"]) for s in snaps) == \
        sorted([("6", "3"), ("3", str(math.ceil(sum(in1) / target)))])
    assert {s["gobblin-py.commit-id"] for s in snaps} == {f"c/{report.result.run_id}/{rel0}", f"c/{report.result.run_id}/{rel1}"}
    assert CommitStepStore(tmp_path / "work").datasets("c") == []
    state = CompactionFile(tmp_path / "work" / "state" / "c", TABLE, DAY0).read()
    assert state is not None and (state["files_in"], state["files_out"], state["records_in"], state["records_out"]) == (6, 3, 1800, 1800)
    assert sorted(state["files"]) == sorted(Path(f["file_path"]).name for f in out0)

    again = Compactor(JobRunner(job, SharedSparkExecutor(job, spark))).run(CompactionOptions(target_bytes=target))
    assert again.succeeded and again.partitions == []
    assert again.skipped[rel0] == "3 file(s) of its last compaction, no file added since"
    shown = cli(["state", "show", "job.yaml"], tmp_path)  # the compaction snapshots move no watermark
    assert shown.returncode == 0 and "(as in the state store)" in shown.stdout, shown.stdout


def test_late_files_are_merged_by_the_next_compaction_never_lost_nor_doubled(tmp_path: Path) -> None:
    make_table_job(tmp_path)
    ingest(tmp_path)
    done = compact(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{TABLE}/{DAY0}  compacted  4 files" in done.stdout and "800 records" in done.stdout
    assert len(partition_files(tmp_path, DAY0)) == 1
    add_input(tmp_path, "late-1", range(5000, 5100))
    add_input(tmp_path, "late-2", range(5100, 5150))
    ingest(tmp_path)
    assert len(partition_files(tmp_path, DAY0)) == 3  # the compacted file and two late ones
    day1_files = partition_files(tmp_path, DAY1)

    done = compact(tmp_path, "--partition", "2026/01/01")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{TABLE}/{DAY0}  compacted  3 files" in done.stdout
    seen = ids(tmp_path)
    assert set(seen) == set(range(1200)) | set(range(5000, 5150)) and set(seen.values()) == {1}
    assert len(partition_files(tmp_path, DAY0)) == 1
    assert partition_files(tmp_path, DAY1) == day1_files  # not under the prefix: untouched
    assert [s["gobblin-py.compaction"].count(DAY0) for s in compaction_snapshots(tmp_path)] == [1, 0, 1]


def test_dedup_keeps_the_latest_record_per_key_in_an_overwrite_snapshot(tmp_path: Path) -> None:
    make_table_job(tmp_path, files=3, per_file=100)  # January 1st: ids 0-199 of 7 users; January 2nd: 200-299
    ingest(tmp_path)
    done = compact(tmp_path, "--dedup-key", "user", "--order-by", "id", "--min-files", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{TABLE}/{DAY0}  compacted  2 files" in done.stdout and "193 duplicates removed" in done.stdout
    assert f"{TABLE}/{DAY1}  compacted  1 file" in done.stdout and "93 duplicates removed" in done.stdout
    assert ids(tmp_path) == Counter([*range(193, 200), *range(293, 300)])
    snaps = compaction_snapshots(tmp_path)
    assert [(s["operation"], s["deleted-records"], s["added-records"]) for s in snaps] == \
        [("overwrite", "200", "7"), ("overwrite", "100", "7")]  # records removed: not a replace
    rows = pq.read_table(partition_files(tmp_path, DAY0)[0]["file_path"].removeprefix("file://"))
    assert sorted(zip(rows["user"].to_pylist(), rows["id"].to_pylist())) == sorted((f"u{i % 7}", i) for i in range(193, 200))


def test_a_dedup_field_not_in_the_table_schema_is_refused_before_any_file_is_written(tmp_path: Path) -> None:
    make_table_job(tmp_path, files=3, per_file=100)
    ingest(tmp_path)
    before = ids(tmp_path)
    done = compact(tmp_path, "--dedup-key", "user", "--order-by", "idd", "--min-files", "1")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"--order-by 'idd': no field of that name in partition {TABLE}/{DAY0} (did you mean 'id'?" in done.stderr
    assert ids(tmp_path) == before and compaction_snapshots(tmp_path) == []


def test_a_replay_after_files_were_added_removes_only_the_files_it_merged(tmp_path: Path) -> None:
    make_table_job(tmp_path)
    ingest(tmp_path)
    killed = compact(tmp_path, "--partition", "2026/01/01", crash_at="commit.after_step:1")  # published, not replaced
    assert killed.returncode == SIGKILLED, killed.stdout + killed.stderr
    # another writer adds a file to the partition before the compaction's commit is replayed
    [first] = [f["file_path"] for f in partition_files(tmp_path, DAY0)][:1]
    rows = pq.read_table(first.removeprefix("file://"))
    rows = rows.set_column(rows.schema.get_field_index("id"), rows.schema.field("id"), pc.add(rows["id"], 10_000))
    extra = tmp_path / "warehouse" / "db" / "clicks" / "data" / "other-writer.parquet"
    pq.write_table(rows, extra)
    table(tmp_path).add_files([f"file://{extra}"])

    done = cli(["recover", "job.yaml", "--dataset", f"{TABLE}/{DAY0}"], tmp_path)  # replays the replace
    assert done.returncode == 0, done.stdout + done.stderr
    everything = Counter([*range(1200), *rows["id"].to_pylist()])
    assert ids(tmp_path) == everything  # every record once, the other writer's too
    names = sorted(Path(f["file_path"]).name for f in partition_files(tmp_path, DAY0))
    assert len(names) == 2 and "other-writer.parquet" in names  # the replay left the other writer's file alone
    assert len(compaction_snapshots(tmp_path)) == 1

    again = compact(tmp_path, "--partition", "2026/01/01")  # and the next compaction merges it
    assert again.returncode == 0 and f"{TABLE}/{DAY0}  compacted  2 files" in again.stdout, again.stdout + again.stderr
    assert ids(tmp_path) == everything and len(partition_files(tmp_path, DAY0)) == 1


def test_older_than_and_a_partition_prefix_select_table_partitions(tmp_path: Path) -> None:
    make_table_job(tmp_path)
    ingest(tmp_path)
    done = compact(tmp_path, "--older-than", "1d")  # both partitions were just written to
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{TABLE}/{DAY0}  left alone: written to more recently than --older-than" in done.stdout
    assert f"{TABLE}/{DAY1}  left alone: written to more recently than --older-than" in done.stdout
    assert compaction_snapshots(tmp_path) == []

    done = compact(tmp_path, "--partition", "2026-01-02")  # a table partition's value, as Iceberg prints it
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{TABLE}/{DAY1}  compacted  2 files" in done.stdout and DAY0 not in done.stdout
    assert (len(partition_files(tmp_path, DAY0)), len(partition_files(tmp_path, DAY1))) == (4, 1)
    assert ids(tmp_path) == Counter(range(1200))


def test_files_written_before_the_table_gained_a_field_are_merged_into_the_newest_schema(tmp_path: Path) -> None:
    make_table_job(tmp_path)
    ingest(tmp_path)
    evolved = _schema_with(tmp_path, {"device": {"name": "device", "type": ["null", "string"], "default": None}})
    _job_with(tmp_path, converters=[{"class": "json_to_avro", "schema": evolved}])
    late = [{"id": 7000 + i, "ts": JAN1 + i, "user": "u1", "kind": "view", "device": "phone"} for i in range(5)]
    (tmp_path / "data" / "clicks" / "late.jsonl").write_text("".join(json.dumps(r) + "\n" for r in late))
    ingest(tmp_path)  # the table gains `device`; January 1st now holds 4 files without it and 1 with it

    done = compact(tmp_path, "--partition", "2026/01/01")
    assert done.returncode == 0 and f"{TABLE}/{DAY0}  compacted  5 files" in done.stdout, done.stdout + done.stderr
    [merged] = partition_files(tmp_path, DAY0)
    rows = pq.read_table(merged["file_path"].removeprefix("file://")).to_pylist()
    assert Counter(r["device"] for r in rows) == Counter({None: 800, "phone": 5})  # the older files' rows: null
    assert ids(tmp_path) == Counter([*range(1200), *range(7000, 7005)])


@pytest.mark.s3
def test_a_table_in_an_s3_warehouse_is_compacted_the_same_way(tmp_path: Path, s3) -> None:
    bucket = s3.new_bucket()
    make_table_job(tmp_path, job={"filesystems": s3.options}, publisher={"warehouse": f"s3://{bucket}/wh"})
    ingest(tmp_path)
    done = compact(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{TABLE}/{DAY0}  compacted  4 files" in done.stdout and f"{TABLE}/{DAY1}  compacted  2 files" in done.stdout
    clicks = catalog(tmp_path, **{"s3.endpoint": s3.endpoint, "s3.region": "us-east-1"}).load_table(TABLE)  # pyiceberg's S3
    fs = s3.client()

    def download(url: str) -> str:
        local = tmp_path / "down" / url.removeprefix("s3://")
        local.parent.mkdir(parents=True, exist_ok=True)
        fs.get(url, str(local))
        return str(local)

    assert table_ids(clicks, download) == Counter(range(1200))
    files = [task.file.file_path for task in clicks.scan().plan_files()]
    assert len(files) == 2 and all(f.startswith(f"s3://{bucket}/wh/db/clicks/data/ts_day=") and "/compacted-" in f for f in files)
    assert [s.summary.operation.value for s in clicks.snapshots()] == ["append", "replace", "replace"]


def _job_with(root: Path, **changes: Any) -> None:
    job = yaml.safe_load((root / "job.yaml").read_text())
    for section, values in changes.items():
        if isinstance(values, dict) and "class" not in values:
            job[section].update(values)
        else:
            job[section] = values
    (root / "job.yaml").write_text(yaml.safe_dump(job))


@pytest.mark.parametrize("change, message", [
    ({"writer": {"class": "jsonl"}, "publisher": {"class": "fs", "final_dir": "output"}},
     "writer: compaction merges Avro files; this branch's writer is jsonl (Parquet files too: writer class avro or parquet)"),
    ({"job": {"lock": False, "delivery": "at_least_once"}}, "job.lock: compaction needs the job lock"),  # exactly-once refuses it at validation
])
def test_a_table_job_that_cannot_be_compacted_is_refused_naming_the_key(tmp_path: Path, change: dict, message: str) -> None:
    make_table_job(tmp_path, files=1)
    _job_with(tmp_path, **change)
    done = compact(tmp_path)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert not (tmp_path / "work" / "locks").exists()


def test_a_table_whose_column_another_writer_renamed_is_left_alone_naming_it(tmp_path: Path) -> None:
    """Found by the model-based test: the merged files carry the job's column names, and the replace snapshot failed
    after they were published ("PyArrow table contains more columns: v"), leaving a commit pending that blocked the
    dataset's runs, its error naming no column."""
    make_table_job(tmp_path, files=4, per_file=50)
    ingest(tmp_path)
    before = ids(tmp_path)
    with table(tmp_path).update_schema() as update:
        update.rename_column("country", "nation")
    done = compact(tmp_path, "--min-files", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{TABLE}  left alone: table {TABLE}: column 'country'" in done.stdout and "renamed to 'nation'" in done.stdout
    assert ids(tmp_path) == before and not compaction_snapshots(tmp_path)
    assert not CommitStepStore(tmp_path / "work").datasets("c")  # nothing pending: the job's runs go on
