"""`maintain --yes` beside a commit that stays pending (quarantined: one of its steps' inputs is gone, so its replay
fails and runs do not retry it): every action that would touch what that commit needs is refused, naming its record
(its published file is no orphan, its table's snapshots are not expired nor its rows retained, its partition not
deleted), the rest is done; once the input is back, `recover` completes the commit and every record is there once."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml
from compaction.compaction_jobs import add_input, ingest, make_job, partition, read_partition
from maintenance.upkeep_jobs import (
    DAY_MS,
    FIRST_ID,
    JAN1,
    RUN,
    add_records,
    assert_intact,
    ok,
    read_ids,
    referenced,
    small_lake,
    table,
)

from gobblin_py.commit.store import CommitStepStore
from gobblin_py.testing.crash import SIGKILLED, cli

pytest.importorskip("pyiceberg")
DAY_S = 86400


def _quarantine(tmp: Path, job: str, held: Path) -> str:
    """Kill a run after its first step, then move the input of its second step to `held`: the record stays pending
    (quarantined once a replay fails, with `commit_max_attempts: 1`). Its name."""
    killed = cli(["run", "job.yaml", "--in-process"], tmp, crash_at="commit.after_step:1")
    assert killed.returncode == SIGKILLED, killed.stdout + killed.stderr
    [record] = CommitStepStore(tmp / "work").datasets(job)
    body = json.loads((tmp / "work" / "commits" / job / f"{record}.json").read_text())["body"]
    src = Path(body["steps"][1]["args"]["src"])
    held.mkdir()
    shutil.move(src, held / src.name)
    (held / "src").write_text(str(src))
    return record


def _release(held: Path) -> None:
    src = Path((held / "src").read_text())
    shutil.move(held / src.name, src)


def _age(root: Path, but: tuple[Path, ...] = ()) -> None:
    """Every file under `root` (but those of `but`) last written three days ago."""
    long_ago = time.time() - 3 * DAY_S
    for p in root.rglob("*"):
        if p.is_file() and p not in but:
            os.utime(p, (long_ago, long_ago))


def test_iceberg_actions_refuse_the_table_a_quarantined_commit_needs_and_maintain_the_other(tmp_path: Path) -> None:
    tmp = small_lake(tmp_path / "lake", commit_max_attempts=1, commit_retry_backoff=0)
    for d in ("clicks", "orders"):  # a second snapshot in each table
        add_records(tmp, d, "second", range(FIRST_ID[d] + 100, FIRST_ID[d] + 130))
    ok(cli(RUN, tmp))
    add_records(tmp, "clicks", "late", range(500, 520), days=range(2))  # two day files: one published, one held back
    record = _quarantine(tmp, "t", tmp_path / "held")
    assert record == "clicks"
    published = [p for p in (tmp / "warehouse" / "db" / "clicks" / "data").rglob("*.parquet")
                 if p not in referenced(table(tmp, "clicks"))]
    assert len(published) == 1, "the first step published a file the table does not list yet"
    orphans = {d: tmp / "warehouse" / "db" / d / "data" / "orphan.parquet" for d in ("clicks", "orders")}
    for p in orphans.values():
        p.write_bytes(b"not listed")
    _age(tmp / "warehouse")
    before = {d: [s.snapshot_id for s in table(tmp, d).snapshots()] for d in ("clicks", "orders")}
    clicks_before = read_ids(table(tmp, "clicks"))

    retention = f"{time.time() - (JAN1 + DAY_MS + DAY_MS // 2) / 1000:.0f}"  # January 1st goes
    args = ["maintain", "job.yaml", "--expire-snapshots-older-than", "0s", "--remove-orphans-older-than", "1d",
            "--retention", retention]
    done = cli([*args, "--yes"], tmp)
    for action in ("expire-snapshots", "remove-orphans", "retention"):
        assert f"{action} db.orders: done" in done.stdout, done.stdout
        assert f"{action} db.clicks: nothing to do" in done.stdout, done.stdout
    refusals = [line for line in done.stdout.splitlines() if "refused:" in line]
    assert len(refusals) == 3 and all(f"the pending commit {record!r}" in r and "db.clicks" in r for r in refusals), done.stdout
    assert "pending commit clicks is quarantined" in done.stderr, done.stderr  # the recovery tried it first, and says so
    assert done.returncode == 0, done.stdout + done.stderr

    clicks = table(tmp, "clicks")
    assert [s.snapshot_id for s in clicks.snapshots()] == before["clicks"], "no snapshot of clicks expired, no row deleted"
    assert published[0].exists() and orphans["clicks"].exists(), "nothing under clicks' location removed"
    assert read_ids(clicks) == clicks_before
    orders = table(tmp, "orders")
    assert before["orders"][0] not in [s.snapshot_id for s in orders.snapshots()], "orders' first snapshot expired"
    assert not orphans["orders"].exists()
    on_day = lambda ids: Counter(i for n, i in enumerate(ids) if n % 3 != 0)  # noqa: E731 - record n is on day n % 3
    assert read_ids(orders) == on_day(range(10_000, 10_030)) + on_day(range(10_100, 10_130)), "January 1st deleted, once"
    assert CommitStepStore(tmp / "work").datasets("t") == [record], "only the quarantined commit is pending"

    _release(tmp_path / "held")
    ok(cli(["recover", "job.yaml", "--dataset", record], tmp))
    ok(cli(RUN, tmp))
    expected = Counter(range(0, 30)) + Counter(range(100, 130)) + Counter(range(500, 520))
    assert read_ids(table(tmp, "clicks")) == expected, "every record of clicks once, the quarantined commit's included"
    assert_intact(tmp, "after recover")


def test_file_retention_refuses_the_partition_a_quarantined_commit_needs_and_deletes_the_other(tmp_path: Path) -> None:
    root = tmp_path / "job"
    root.mkdir()
    make_job(root)  # January 1st and 2nd
    job = yaml.safe_load((root / "job.yaml").read_text())
    job["job"].update({"commit_max_attempts": 1, "commit_retry_backoff": 0})
    (root / "job.yaml").write_text(yaml.safe_dump(job))
    add_input(root, "third", range(3000, 3050), day=2)  # and the 3rd
    ingest(root)
    day1, day3 = read_partition(partition(root, 1)), read_partition(partition(root, 3))
    add_input(root, "late-a", range(5000, 5010), day=0)  # late data for January 1st, in two files
    add_input(root, "late-b", range(5010, 5020), day=0)
    record = _quarantine(root, "c", tmp_path / "held")
    assert record == "clicks"
    late = set(read_partition(partition(root, 1))) - set(day1)
    assert len(late) == 10, "one late file is published, the other held back"

    retention = f"{time.time() - (JAN1 + 2 * DAY_MS + DAY_MS // 2) / 1000:.0f}"  # January 1st and 2nd ended
    done = cli(["maintain", "job.yaml", "--retention", retention, "--yes"], root)
    assert f"refused: partition 2026/01/01 of clicks: the pending commit {record!r} touches it" in done.stdout, done.stdout
    assert f"deleted: {partition(root, 2)}" in done.stdout and "2026/01/03" not in done.stdout, done.stdout
    assert not partition(root, 2).exists(), "January 2nd deleted"
    assert read_partition(partition(root, 1)) == day1 + Counter(late), "January 1st kept, with the published late file"
    assert read_partition(partition(root, 3)) == day3
    assert CommitStepStore(root / "work").datasets("c") == [record]

    _release(tmp_path / "held")
    ok(cli(["recover", "job.yaml", "--dataset", record], root))
    ok(cli(["run", "job.yaml", "--in-process", "-q"], root))
    assert read_partition(partition(root, 1)) == day1 + Counter(range(5000, 5020)), "every late record once"
    assert not partition(root, 2).exists() and read_partition(partition(root, 3)) == day3
    assert CommitStepStore(root / "work").datasets("c") == []
