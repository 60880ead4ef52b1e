"""`maintain` on Iceberg tables: snapshot expiry keeps the newest --keep-last and refuses a table a pending commit
touches (the next run then recovers that commit: every record once, read by pyiceberg and by DuckDB over the live
files); orphan files old enough are removed, young ones and a pending commit's kept; retention by the table's day
partition deletes old days in one snapshot; the orphan sweep keeps the job's error files and a nested table's files,
reads `file:/` URIs as the table's own, and sweeps nothing while a listed file is not where its URI points."""

from __future__ import annotations

import calendar
import json
import os
import shutil
import time
from collections import Counter
from pathlib import Path

import pytest
from builtin.test_iceberg_publisher import catalog, iceberg_job, table_ids
from support.jobs import write_job

from gobblin_py.commit.store import CommitStepStore
from gobblin_py.testing.crash import SIGKILLED, cli

pytest.importorskip("pyiceberg")
RUN = ["run", "job.yaml", "--in-process", "-q"]
DAY = 86400


def _add(tmp: Path, name: str, ids: range) -> None:
    with open(tmp / "data" / "clicks" / f"{name}.jsonl", "w") as out:
        for i in ids:
            out.write(json.dumps({"id": i, "ts": 1767225600000 + i, "user": "u1", "kind": "click", "amount": None,
                                  "country": "US"}) + "\n")


def _ok(done) -> None:
    assert done.returncode == 0, done.stdout + done.stderr


def _scan_ids(table) -> Counter:
    return Counter(table.scan().to_arrow().column("id").to_pylist())


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> Path:
    """Two committed runs: clicks has two snapshots."""
    tmp = tmp_path_factory.mktemp("iceberg")
    write_job(tmp, iceberg_job(tmp))
    _ok(cli(RUN, tmp))
    _add(tmp, "more", range(100_000, 100_050))
    _ok(cli(RUN, tmp))
    assert len(catalog(tmp).load_table("db.clicks").snapshots()) == 2
    return tmp


@pytest.fixture
def job(two_runs: Path, tmp_path: Path) -> Path:
    """A private copy of `two_runs` at the same absolute path (the catalog holds absolute paths)."""
    backup = tmp_path / "backup"
    shutil.copytree(two_runs, backup, symlinks=True)
    yield two_runs
    shutil.rmtree(two_runs)
    shutil.copytree(backup, two_runs, symlinks=True)


def test_expiry_keeps_the_newest_and_refuses_a_table_a_pending_commit_needs(job: Path) -> None:
    before = catalog(job).load_table("db.clicks")
    [old, new] = sorted(before.snapshots(), key=lambda s: s.timestamp_ms)
    old_list = old.manifest_list.removeprefix("file://")
    _add(job, "pending", range(200_000, 200_030))
    killed = cli(["run", "job.yaml", "--in-process"], job, crash_at="commit.after_store_write:1")
    assert killed.returncode == SIGKILLED
    [record] = CommitStepStore(job / "work").datasets("t")
    dry = cli(["maintain", "job.yaml", "--expire-snapshots-older-than", "0s", "--keep-last", "1"], job)
    _ok(dry)
    assert f"refused: table db.{record}: the pending commit {record!r}" in dry.stdout, dry.stdout
    assert len(catalog(job).load_table(f"db.{record}").snapshots()) == 2 if record == "clicks" else True

    done = cli(["maintain", "job.yaml", "--expire-snapshots-older-than", "0s", "--keep-last", "1", "--yes"], job)
    _ok(done)  # recovers the pending commit first, then expires all but the newest snapshot of each table
    assert f"deleted: snapshot {old.snapshot_id}" in done.stdout and f"deleted: {old_list}" in done.stdout, done.stdout
    table = catalog(job).load_table("db.clicks")
    assert len(table.snapshots()) == 1 and table.current_snapshot().snapshot_id not in (old.snapshot_id, new.snapshot_id)
    assert not os.path.exists(old_list)
    _ok(cli(RUN, job))
    for d in ("clicks", "orders"):
        t = catalog(job).load_table(f"db.{d}")
        ids = table_ids(t)
        assert ids and set(ids.values()) == {1} and ids == _scan_ids(t), d
    assert Counter(i for i in table_ids(table) if i >= 200_000) == Counter(range(200_000, 200_030))


def test_orphans_old_removed_young_and_pending_kept(job: Path) -> None:
    data = job / "warehouse" / "db" / "clicks" / "data"
    old, young = data / "orphan-old.parquet", data / "orphan-young.parquet"
    old.write_bytes(b"x" * 10)
    young.write_bytes(b"y" * 10)
    os.utime(old, (time.time() - 3 * DAY, time.time() - 3 * DAY))
    _add(job, "pending", range(300_000, 300_020))
    killed = cli(["run", "job.yaml", "--in-process"], job, crash_at="commit.after_step:1")  # one file published, no snapshot
    assert killed.returncode == SIGKILLED
    [record] = CommitStepStore(job / "work").datasets("t")
    published = [p for p in data.rglob("*.parquet") if p.name.startswith("part") or "orphan" not in p.name]
    for p in published:  # old, as the sweep sees it: only the record keeps them
        os.utime(p, (time.time() - 3 * DAY, time.time() - 3 * DAY))
    dry = cli(["maintain", "job.yaml", "--remove-orphans-older-than", "1d"], job)
    _ok(dry)
    assert f"the pending commit {record!r}" in dry.stdout and "would delete" not in dry.stdout, dry.stdout
    assert cli(["maintain", "job.yaml", "--remove-orphans-older-than", "10m"], job).returncode == 2

    done = cli(["maintain", "job.yaml", "--remove-orphans-older-than", "1d", "--yes"], job)
    _ok(done)
    assert f"deleted: {old} (10 bytes)" in done.stdout, done.stdout
    assert not old.exists() and young.exists()
    table = catalog(job).load_table("db.clicks")
    assert all(Path(p.removeprefix("file://")).exists() for p in (t.file.file_path for t in table.scan().plan_files()))
    ids = table_ids(table)
    assert set(ids.values()) == {1} and ids == _scan_ids(table)
    assert Counter(i for i in ids if i >= 300_000) == Counter(range(300_000, 300_020))


def test_retention_deletes_old_days_in_one_snapshot(job: Path) -> None:
    table = catalog(job).load_table("db.clicks")
    days = Counter(str(r) for r in table.scan().to_arrow().column("ts").cast("date32").to_pylist())
    assert len(days) > 2
    keep_from = sorted(days)[2]  # the first two days go
    retention = time.time() - calendar.timegm(time.strptime(keep_from + " 12", "%Y-%m-%d %H"))
    done = cli(["maintain", "job.yaml", "--retention", f"{retention:.0f}", "--dataset", "clicks", "--yes"], job)
    _ok(done)
    assert "retention db.clicks: done" in done.stdout, done.stdout
    after = catalog(job).load_table("db.clicks")
    left = Counter(str(r) for r in after.scan().to_arrow().column("ts").cast("date32").to_pylist())
    assert min(left) == keep_from and sum(left.values()) == sum(n for d, n in days.items() if d >= keep_from)
    again = cli(["maintain", "job.yaml", "--retention", f"{retention:.0f}", "--dataset", "clicks", "--yes"], job)
    _ok(again)
    assert "no partition before" in again.stdout and len(after.snapshots()) == len(catalog(job).load_table("db.clicks").snapshots())


def test_orphan_removal_keeps_the_jobs_error_files_and_a_table_nested_in_the_location(tmp_path: Path) -> None:
    """`errors_dir` set inside a table's location, and another table whose location lies inside it: their files are
    listed by no snapshot of the table, yet they are no orphans of it; only the real orphan goes."""
    import pyarrow as pa
    from maintenance.upkeep_jobs import read_ids, small_lake, table

    clicks_dir = tmp_path / "warehouse" / "db" / "clicks"
    (tmp_path / "data" / "clicks").mkdir(parents=True)
    (tmp_path / "data" / "clicks" / "bad.jsonl").write_text(json.dumps({"id": 999, "user": "u1", "kind": "click"}) + "\n")
    small_lake(tmp_path, publisher={"errors_dir": str(clicks_dir / "errors")})
    [error_file] = (clicks_dir / "errors").rglob("*.jsonl")
    cat = catalog(tmp_path)
    cat.create_namespace("other")
    nested = cat.create_table("other.nested", schema=pa.schema([pa.field("id", pa.int64())]),
                                            location=f"file://{clicks_dir / 'nested'}")
    nested.append(pa.table({"id": [1, 2]}))
    orphan = clicks_dir / "data" / "orphan.parquet"
    orphan.write_bytes(b"not listed")
    long_ago = time.time() - 3 * DAY
    for p in (tmp_path / "warehouse").rglob("*"):
        if p.is_file():
            os.utime(p, (long_ago, long_ago))
    nested_files = sorted(p for p in (clicks_dir / "nested").rglob("*") if p.is_file())

    done = cli(["maintain", "job.yaml", "--remove-orphans-older-than", "1d", "--dataset", "clicks", "--yes"], tmp_path)
    _ok(done)
    assert f"deleted: {orphan} (10 bytes)" in done.stdout and not orphan.exists(), done.stdout
    assert error_file.exists() and all(p.exists() for p in nested_files), done.stdout
    assert str(error_file) not in done.stdout and "nested/" not in done.stdout.replace("refused", ""), done.stdout
    assert "the job's error files" in done.stdout and "another table's location" in done.stdout, done.stdout
    assert sorted(catalog(tmp_path).load_table("other.nested").scan().to_arrow().column("id").to_pylist()) == [1, 2]
    assert read_ids(table(tmp_path, "clicks")) == Counter(range(30))


def test_orphan_removal_reads_every_uri_form_a_table_lists_and_refuses_one_it_cannot_find(tmp_path: Path) -> None:
    """A file another writer added as `file:/…` (the form Spark and Hadoop write) is the table's, not an orphan; a
    table listing a file that is not where its URI points (as any URI form read wrongly would look) is not swept."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from maintenance.upkeep_jobs import read_ids, small_lake, table

    small_lake(tmp_path)
    data = tmp_path / "warehouse" / "db" / "clicks" / "data"
    t = table(tmp_path, "clicks")
    schema = pa.schema([f.remove_metadata() for f in t.schema().as_arrow()])
    spark = data / "spark-written.parquet"
    pq.write_table(pa.Table.from_pylist([{"id": 777, "ts": 1767225600000000, "user": "x", "kind": "other", "amount": None,
                                          "country": None}], schema=schema), spark)
    t.add_files([f"file:{spark}"])
    orphan = data / "orphan.parquet"
    orphan.write_bytes(b"not listed")
    long_ago = time.time() - 3 * DAY
    for p in (tmp_path / "warehouse").rglob("*"):
        if p.is_file():
            os.utime(p, (long_ago, long_ago))
    args = ["maintain", "job.yaml", "--remove-orphans-older-than", "1d", "--dataset", "clicks", "--yes"]
    done = cli(args, tmp_path)
    _ok(done)
    assert not orphan.exists() and spark.exists(), done.stdout
    assert read_ids(table(tmp_path, "clicks")) == Counter(range(30)) + Counter([777])

    orphan.write_bytes(b"not listed")
    os.utime(orphan, (long_ago, long_ago))
    t = table(tmp_path, "clicks")
    elsewhere = tmp_path / "elsewhere.parquet"
    shutil.copy(spark, elsewhere)
    t.add_files([f"file:{elsewhere}"])
    elsewhere.unlink()  # listed, and not where its URI points (as a URI form read wrongly would look)
    refused = cli(args, tmp_path)
    _ok(refused)
    assert "remove-orphans db.clicks: nothing to do" in refused.stdout and orphan.exists(), refused.stdout
    assert f"file:{elsewhere} → {elsewhere}" in refused.stdout, refused.stdout
    snapshots = len(table(tmp_path, "clicks").snapshots())
    expire = cli(["maintain", "job.yaml", "--expire-snapshots-older-than", "0s", "--dataset", "clicks", "--yes"], tmp_path)
    _ok(expire)
    assert "no snapshot is expired while a listed file cannot be found" in expire.stdout, expire.stdout
    assert len(table(tmp_path, "clicks").snapshots()) == snapshots > 1
