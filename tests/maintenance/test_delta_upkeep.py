"""`maintain` on Delta tables: vacuum deletes exactly the files delta-rs lists (old orphans), keeps young ones and
refuses a pending commit's published file, naming the record (the next run then adds it: every record once); an age
below the table's retention property is refused naming it; a checkpoint then the log entries below it; retention
removes old day partitions in one Delta commit, exactly once by its transaction; an unpartitioned table gets a note."""

from __future__ import annotations

import calendar
import json
import os
import shutil
import time
from collections import Counter
from pathlib import Path

import pytest
from builtin.test_delta_publisher import delta_ids, delta_job, table
from support.jobs import write_job

from gobblin_py.commit.store import CommitStepStore
from gobblin_py.testing.crash import SIGKILLED, cli

deltalake = pytest.importorskip("deltalake")
RUN = ["run", "job.yaml", "--in-process", "-q"]
DAY = 86400
RETENTION_APP = "gobblin-py.maintain/t/retention"


def add_clicks(tmp: Path, name: str, ids: range, day: int = 1) -> None:
    """One more input file of clicks, every record on January `day`, 2026."""
    with open(tmp / "data" / "clicks" / f"{name}.jsonl", "w") as out:
        for i in ids:
            out.write(json.dumps({"id": i, "ts": 1767225600000 + (day - 1) * DAY * 1000 + i, "user": "u1", "kind": "click",
                                  "amount": None, "country": "US"}) + "\n")


def ok(done) -> None:
    assert done.returncode == 0, done.stdout + done.stderr


def age(path: Path, days: float) -> None:
    then = time.time() - days * DAY
    os.utime(path, (then, then))


def retention_keeping(first_kept: str) -> str:
    """A `--retention` under which the day partitions before `first_kept` (YYYY-MM-DD) ended and that one did not."""
    return f"{time.time() - calendar.timegm(time.strptime(first_kept + ' 12', '%Y-%m-%d %H')):.0f}"


def make_two_runs(tmp: Path) -> Path:
    """The example job into Delta tables, run twice (clicks gets a second commit): versions 0 (create), 1, 2."""
    write_job(tmp, delta_job(tmp))
    ok(cli(RUN, tmp))
    add_clicks(tmp, "more", range(100_000, 100_050))
    ok(cli(RUN, tmp))
    assert table(tmp, "clicks").version() == 2
    return tmp


def copy_job(source: Path, tmp: Path) -> Path:
    """A copy of a job directory at another path, its job file pointing there (Delta tables name files relatively)."""
    shutil.copytree(source, tmp, symlinks=True, dirs_exist_ok=True)
    write_job(tmp, delta_job(tmp))
    return tmp


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> Path:
    return make_two_runs(tmp_path_factory.mktemp("delta"))


@pytest.fixture
def job(two_runs: Path, tmp_path: Path) -> Path:
    return copy_job(two_runs, tmp_path / "job")


def test_vacuum_deletes_old_orphans_keeps_young_and_refuses_a_pending_commits_files(job: Path) -> None:
    before = delta_ids(table(job, "clicks"))
    data = job / "lake" / "clicks" / "data"
    old, young = data / "orphan-old.parquet", data / "orphan-young.parquet"
    old.write_bytes(b"x" * 10)
    young.write_bytes(b"y" * 10)
    age(old, 10)
    add_clicks(job, "pending", range(300_000, 300_020), day=3)
    add_clicks(job, "pending2", range(400_000, 400_020), day=4)
    killed = cli(["run", "job.yaml", "--in-process"], job, crash_at="commit.after_step:1")  # one file published, no commit
    assert killed.returncode == SIGKILLED
    [record] = CommitStepStore(job / "work").datasets("t")
    assert record == "clicks"
    published = [p for p in data.rglob("*.parquet") if str(p) not in table(job, "clicks").file_uris() and "orphan" not in p.name]
    assert len(published) == 1
    for p in published:  # old, as the vacuum sees it: only the record keeps it
        age(p, 10)
    unpublished = {p: job / "hidden" / p.name for p in (job / "work" / "task-output").rglob("*.parquet")}
    assert unpublished
    (job / "hidden").mkdir()
    for src, away in unpublished.items():  # `maintain --yes` cannot recover the record while they are away
        shutil.move(src, away)

    short = cli(["maintain", "job.yaml", "--remove-orphans-older-than", "1d", "--dataset", "clicks", "--yes"], job)
    assert "shorter than the table's delta.deletedFileRetentionDuration (interval 1 weeks)" in short.stdout, short.stdout
    assert old.exists()

    done = cli(["maintain", "job.yaml", "--remove-orphans-older-than", "8d", "--dataset", "clicks", "--yes"], job)
    assert f"refused: {published[0]}: the pending commit 'clicks' names it" in done.stdout, done.stdout
    assert f"deleted: {old} (10 bytes)" in done.stdout, done.stdout
    assert not old.exists() and young.exists() and published[0].exists()
    assert delta_ids(table(job, "clicks")) == before

    for src, away in unpublished.items():  # put back: the pending commit can be completed
        shutil.move(away, src)
    ok(cli(["recover", "job.yaml", "--dataset", "clicks"], job))  # now, not after the attempt's backoff
    ok(cli(RUN, job))
    ids = delta_ids(table(job, "clicks"))
    assert set(ids.values()) == {1} and ids == before + Counter([*range(300_000, 300_020), *range(400_000, 400_020)])
    assert all(Path(p).exists() for p in table(job, "clicks").file_uris())


def test_checkpoint_then_the_log_entries_below_it(job: Path) -> None:
    log = job / "lake" / "clicks" / "_delta_log"
    for p in log.iterdir():
        age(p, 40)
    young = cli(["maintain", "job.yaml", "--expire-snapshots-older-than", "7d", "--dataset", "clicks", "--yes"], job)
    ok(young)
    assert "shorter than the table's delta.logRetentionDuration (interval 30 days)" in young.stdout, young.stdout
    assert not (log / "_last_checkpoint").exists()

    done = cli(["maintain", "job.yaml", "--expire-snapshots-older-than", "31d", "--dataset", "clicks", "--yes"], job)
    ok(done)
    # at the version the job's next commit reads the history from (its last commit read 1), not the current one (2):
    # delta-rs's own log cleanup deletes old entries below the latest checkpoint (test_delta_upsert_upkeep.py)
    assert "a checkpoint at version 1 (the version the job's next commit reads the history from)" in done.stdout, done.stdout
    assert f"deleted: {log / '00000000000000000000.json'}" in done.stdout, done.stdout
    assert json.loads((log / "_last_checkpoint").read_text())["version"] == 1
    assert not (log / "00000000000000000000.json").exists()
    assert (log / "00000000000000000001.json").exists()  # the job's next commit reads the history from version 1
    t = table(job, "clicks")
    assert t.version() == 2 and set(delta_ids(t).values()) == {1}

    again = cli(["maintain", "job.yaml", "--expire-snapshots-older-than", "31d", "--dataset", "clicks", "--yes"], job)
    ok(again)
    assert "expire-snapshots " + str(job / "lake" / "clicks") + ": nothing to do" in again.stdout, again.stdout
    add_clicks(job, "after", range(500_000, 500_010))
    ok(cli(RUN, job))
    ids = delta_ids(table(job, "clicks"))
    assert set(ids.values()) == {1} and Counter(i for i in ids if i >= 500_000) == Counter(range(500_000, 500_010))


def test_retention_removes_old_day_partitions_in_one_commit_exactly_once(job: Path) -> None:
    t = table(job, "clicks")
    days = Counter(t.to_pyarrow_table(columns=["ts_day"]).column("ts_day").to_pylist())
    assert sorted(days)[:3] == ["2026-01-01", "2026-01-02", "2026-01-03"]
    retention = retention_keeping("2026-01-03")
    dry = cli(["maintain", "job.yaml", "--retention", retention, "--dataset", "clicks"], job)
    ok(dry)
    assert "would delete: partition ts_day=2026-01-01" in dry.stdout and "ts_day=2026-01-03" not in dry.stdout, dry.stdout
    assert table(job, "clicks").version() == 2

    done = cli(["maintain", "job.yaml", "--retention", retention, "--dataset", "clicks", "--yes"], job)
    ok(done)
    after = table(job, "clicks")
    assert after.version() == 3 and after.transaction_version(RETENTION_APP) == 1
    left = Counter(after.to_pyarrow_table(columns=["ts_day"]).column("ts_day").to_pylist())
    assert left == Counter({d: n for d, n in days.items() if d >= "2026-01-03"})
    [entry] = after.history(1)
    assert entry["operation"] == "DELETE" and entry["operationMetrics"]["num_added_files"] == 0  # whole files, none rewritten

    again = cli(["maintain", "job.yaml", "--retention", retention, "--dataset", "clicks", "--yes"], job)
    ok(again)
    assert "no partition ended before" in again.stdout and table(job, "clicks").version() == 3
    add_clicks(job, "late", range(600_000, 600_010), day=5)
    ok(cli(RUN, job))  # the job's own commits go on: its transaction version is untouched
    ids = delta_ids(table(job, "clicks"))
    assert set(ids.values()) == {1} and Counter(i for i in ids if i >= 600_000) == Counter(range(600_000, 600_010))


def test_retention_on_an_unpartitioned_table_says_why_nothing_is_done(tmp_path: Path) -> None:
    spec = delta_job(tmp_path)
    spec["writer"] = {"class": "parquet"}
    write_job(tmp_path, spec)
    ok(cli(RUN, tmp_path))
    done = cli(["maintain", "job.yaml", "--retention", "1d", "--yes"], tmp_path)
    ok(done)
    assert "retention " + str(tmp_path / "lake" / "clicks") + ": nothing to do: not supported: the table is not " \
           "partitioned" in done.stdout, done.stdout
    assert table(tmp_path, "clicks").version() == 1


def test_retention_refuses_a_partition_a_pending_commit_touches(job: Path) -> None:
    add_clicks(job, "late", range(700_000, 700_010), day=1)
    killed = cli(["run", "job.yaml", "--in-process"], job, crash_at="commit.after_store_write")
    assert killed.returncode == SIGKILLED
    dry = cli(["maintain", "job.yaml", "--retention", retention_keeping("2026-01-03"), "--dataset", "clicks"], job)
    ok(dry)
    assert "refused: partition ts_day=2026-01-01 of table" in dry.stdout and "the pending commit 'clicks'" in dry.stdout
    assert "would delete: partition ts_day=2026-01-02" in dry.stdout and "would delete: partition ts_day=2026-01-01" \
        not in dry.stdout, dry.stdout
