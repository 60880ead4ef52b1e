"""`maintain` on a Delta table kept by key (the delta publisher's upsert mode): what it does to one (a checkpoint and
the log entries below what the job still reads, a vacuum; no compaction, no retention of an unpartitioned table) keeps
the app transaction version, every key's latest row once and a killed run's pending commit, which the maintenance
recovers; and a RESTORE after the job's last commit is still seen by its next commit once the log is checkpointed,
or, where delta-rs's own log cleanup deleted its entry below another writer's checkpoint, that commit fails closed;
it used to be taken for an unchanged table (the restored-away changes were lost). Every
table is read back by delta-rs and by DuckDB over the files its log lists (`read_back`)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from builtin.test_delta_upsert import COLUMNS, delta_upsert_job, read_back
from builtin.test_iceberg_upsert import FIRST, SCHEMA, SECOND, _run, expected, write_changes
from support.jobs import write_job

from gobblin_py.builtin.publishers.delta.publisher import COLUMNS_POINT
from gobblin_py.commit.store import CommitStepStore
from gobblin_py.testing.crash import SIGKILLED, cli, commit_points, each_point, recovery_points

deltalake = pytest.importorskip("deltalake")
APP = "gobblin-py/u/customers"
MAINTAIN = ["maintain", "job.yaml", "--expire-snapshots-older-than", "1s", "--remove-orphans-older-than", "1h",
            "--below-table-retention", "--yes"]
RUN = ["run", "job.yaml", "--in-process", "-q"]


def batch(n: int) -> list[dict[str, Any]]:
    """The n-th run's changes after FIRST: updates of a third of the keys (some twice), deletes, new keys."""
    return ([{"id": i, "name": f"n{i}-r{n}", "city": f"c{n}", "op": "u", "updated_at": 10 * n} for i in range(n % 3 + 1, 46, 3)]
            + [{"id": i, "name": f"n{i}-r{n}b", "city": None, "op": "u", "updated_at": 10 * n + 1} for i in range(1, 46, 7)]
            + [{"id": i, "name": None, "city": None, "op": "d", "updated_at": 10 * n + 2} for i in (n, 20 + n)]
            + [{"id": 100 + n, "name": f"new{n}", "city": "cn", "op": "c", "updated_at": 10 * n}])


def table_at(tmp: Path) -> Any:
    return deltalake.DeltaTable(str(tmp / "lake" / "customers"))


def age_log(tmp: Path, seconds: float = 3600) -> None:
    """Every log entry of the table made `seconds` old (its mtime), as a log expiry and delta-rs's cleanup judge it."""
    then = time.time() - seconds
    for entry in (tmp / "lake" / "customers" / "_delta_log").iterdir():
        os.utime(entry, (then, then))


def ok(done: Any, where: str) -> None:
    assert done.returncode == 0, f"{where}: {done.stdout}{done.stderr}"


def runs(tmp: Path, batches: list[list[dict[str, Any]]], first: int = 0) -> None:
    for n, changes in enumerate(batches, start=first):
        write_changes(tmp, f"c-{n:03d}.jsonl", changes)
        done = _run(tmp, delta_upsert_job(tmp))
        assert done.succeeded, done.error


def test_maintain_between_upsert_runs_keeps_the_transaction_and_every_key_once(tmp_path: Path) -> None:
    """Runs of updates and deletes; the log aged; `maintain` checkpoints and expires it (and vacuums: nothing is old
    enough), under a table whose delta.setTransactionRetentionDuration would drop a dated transaction from the
    checkpoint; the transaction version is kept, the rows unchanged, and the next runs apply each key's last change
    once, the version going on from there."""
    batches = [FIRST, batch(1), batch(2), batch(3)]
    runs(tmp_path, batches)
    assert read_back(tmp_path) == expected(*batches)
    table_at(tmp_path).alter.set_table_properties({"delta.setTransactionRetentionDuration": "interval 1 seconds"})
    age_log(tmp_path)
    write_job(tmp_path, delta_upsert_job(tmp_path))
    done = cli(MAINTAIN, tmp_path)
    ok(done, "maintain")
    log = tmp_path / "lake" / "customers" / "_delta_log"
    # at the version the next commit reads the history from (the last one's read), not the current one (5)
    assert "a checkpoint at version 3 " in done.stdout and not (log / f"{0:020d}.json").exists(), done.stdout
    assert "SUCCEEDED" in done.stdout, done.stdout
    assert table_at(tmp_path).transaction_version(APP) == 4, "the checkpoint kept the app transaction"
    assert read_back(tmp_path) == expected(*batches)
    time.sleep(1.1)  # past the transaction retention the table asks for
    more = [batch(4), batch(5)]
    runs(tmp_path, more, first=len(batches))
    assert read_back(tmp_path) == expected(*batches, *more)
    assert table_at(tmp_path).transaction_version(APP) == 6
    merged = [h for h in table_at(tmp_path).history() if "gobblin-py.upsert" in h]
    assert len({h["gobblin-py.commit-id"] for h in merged[:2]}) == 2 and merged[0]["operation"] == "MERGE"
    compacted = cli(["compact", "job.yaml"], tmp_path)  # a table kept by key is left alone, saying why
    ok(compacted, "compact")
    assert read_back(tmp_path) == expected(*batches, *more)


@pytest.mark.parametrize("checkpointer", ["maintain", "another writer"])
def test_a_restore_after_the_last_commit_is_seen_or_the_next_commit_fails_closed(tmp_path: Path, checkpointer: str) -> None:
    """After three runs another writer RESTOREs the table to the first one's version and commits again; the log is
    checkpointed (by `maintain`, or by another writer at the current version), and delta-rs's own log cleanup (after
    another writer's commit: entries older than delta.logRetentionDuration below the latest checkpoint) deletes what
    it may. `maintain` checkpoints at the version the job's next commit reads from, so the cleanup leaves the RESTORE
    and the next run fails naming it; a checkpoint above it lets the cleanup delete the RESTORE's entry, and the next
    run fails closed naming the missing versions. Either way nothing is merged over the restored rows. (Before both
    fixes the RESTORE went unseen: the run merged, and the second and third runs' changes were gone for good.)"""
    batches = [FIRST, SECOND, batch(3)]
    runs(tmp_path, batches)
    table_at(tmp_path).restore(1)
    table_at(tmp_path).alter.set_table_properties({"delta.logRetentionDuration": "interval 1 seconds"})
    age_log(tmp_path)
    write_job(tmp_path, delta_upsert_job(tmp_path))
    if checkpointer == "maintain":
        ok(cli(MAINTAIN, tmp_path), "maintain")
    else:
        table_at(tmp_path).create_checkpoint()
    age_log(tmp_path)
    table_at(tmp_path).alter.set_table_properties({"delta.checkpointInterval": "50"})  # another writer's commit
    kept = {h["operation"] for h in table_at(tmp_path).history()}
    assert ("RESTORE" in kept) == (checkpointer == "maintain"), kept
    restored = read_back(tmp_path)
    assert restored == expected(FIRST)
    write_changes(tmp_path, "c-100.jsonl", batch(4))
    done = _run(tmp_path, delta_upsert_job(tmp_path))
    assert not done.succeeded, "a commit over a table restored since the job's last commit"
    if checkpointer == "maintain":  # its checkpoint at the version the last commit read, the RESTORE's entry kept
        assert "restored to version 1" in done.error, done.error
        assert json.loads((tmp_path / "lake" / "customers" / "_delta_log" / "_last_checkpoint").read_text())["version"] == 2
    else:
        for part in ("customers", "log entries of version(s) 3 to 4 are gone", "last commit of gobblin-py/u/customers "
                     "read version 2", "state reset JOB.yaml --dataset customers --to"):
            assert part in done.error, done.error
    assert read_back(tmp_path) == restored, "nothing merged over the restored table"


def _prepared(tmp: Path, point: str) -> list[list[dict[str, Any]]]:
    """A first load and one run of changes (in this process), and the next run's changes written; at COLUMNS_POINT
    they bring a new column, so a kill there falls between the columns' commit and the merge. The batches."""
    batches = [FIRST, batch(1)]
    runs(tmp, batches)
    killed = batch(2)
    job = delta_upsert_job(tmp)
    if point == COLUMNS_POINT:
        (tmp / "customer.avsc").write_text(json.dumps({**SCHEMA, "fields": [
            *SCHEMA["fields"], {"name": "tier", "type": ["null", "string"], "default": None}]}))
    write_changes(tmp, "c-002.jsonl", [{**r, "tier": "gold"} for r in killed] if point == COLUMNS_POINT else killed)
    write_job(tmp, job)
    return [*batches, killed]


def _killed_then_maintained(tmp: Path, point: str, batches: list[list[dict[str, Any]]]) -> None:
    """The run killed at `point` (`RUN_POINT+MAINTAIN_POINT`: then a `maintain` killed at MAINTAIN_POINT too, in its
    recovery); the log aged; `maintain` (its recovery completes the commit, then the checkpoint, the log expiry and the
    vacuum); one more run; the table is every batch's last change per key, each key once, the commit log empty, no
    task output left."""
    run_point, _, maintain_point = point.partition("+")
    died = cli(RUN, tmp, crash_at=run_point)
    assert died.returncode == SIGKILLED, f"{point}: {died.stdout}{died.stderr}"
    age_log(tmp)
    if maintain_point:
        died = cli(MAINTAIN, tmp, crash_at=maintain_point)
        assert died.returncode == SIGKILLED, f"{point}: {died.stdout}{died.stderr}"
    done = cli(MAINTAIN, tmp)
    ok(done, f"{point}: maintain")
    assert "a checkpoint at version" in done.stdout, f"{point}: {done.stdout}"
    assert not CommitStepStore(tmp / "work").datasets("u"), f"{point}: the maintenance left a commit pending"
    batches = [*batches, batch(3)]
    write_changes(tmp, "c-003.jsonl", batches[-1])
    ok(cli(RUN, tmp), f"{point}: the run after")
    assert read_back(tmp) == {k: {c: v for c, v in r.items() if c in COLUMNS} for k, r in expected(*batches).items()}, point
    # one transaction version per commit: the killed run's changes were committed alone, or (killed before its record
    # was durable) with the next run's
    assert len(batches) - 1 <= table_at(tmp).transaction_version(APP) <= len(batches), point
    assert not [p for p in (tmp / "work" / "task-output").rglob("*") if p.is_file()], f"{point}: task output left"


@pytest.mark.crash
def test_maintain_after_a_run_killed_at_each_commit_point_converges_to_every_key_once(tmp_path: Path) -> None:
    points = [*commit_points(3), COLUMNS_POINT, *(f"commit.after_step:1+{p}" for p in recovery_points())]
    prepared = [_prepared(tmp_path / str(n), point) for n, point in enumerate(points)]  # one at a time, in-process
    each_point(points, lambda n, point: _killed_then_maintained(tmp_path / str(n), point, prepared[n]))
