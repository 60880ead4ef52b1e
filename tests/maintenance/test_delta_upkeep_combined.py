"""`maintain` on a Delta table with its options combined, as the docs show them (`--expire-snapshots-older-than 31d
--retention 30d --yes`), and a maintenance record in any state beside a run.

The log expiry's sequence and the retention commit's were committed side by side on the commit threads
(`job.commit_parallelism`): when the retention step opened the table before the expiry's checkpoint was written, delta-rs
listed the log from version 0, the expiry deleted `00000000000000000000.json`, and the retention's delete failed on the
file it was about to read (`Kernel error: File not found`). Random by thread timing, about half the runs; the first
test forces that interleaving. Then the failed retention record stayed pending and the next `run` exited 1 "blocked",
though a maintenance record blocks no dataset."""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from builtin.test_delta_publisher import delta_ids, duckdb_ids, table
from maintenance.test_delta_upkeep import add_clicks, age, copy_job, make_two_runs, ok

from gobblin_py.commit.store import CommitStepStore
from gobblin_py.errors import CommitError
from gobblin_py.testing.crash import cli

deltalake = pytest.importorskip("deltalake")
RUN = ["run", "job.yaml", "--in-process", "-q"]
COMBINED = ["--expire-snapshots-older-than", "31d", "--retention", "30d"]  # the docs' combined form
WAIT_S = 2.0


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> Path:
    return make_two_runs(tmp_path_factory.mktemp("delta-combined"))


@pytest.fixture
def job(two_runs: Path, tmp_path: Path) -> Path:
    """A copy of the two-run job whose commits run side by side (the default `commit_parallelism`), every log entry
    of its tables written 40 days ago (so the log expiry has entries to delete)."""
    job = copy_job(two_runs, tmp_path / "job")
    spec = yaml.safe_load((job / "job.yaml").read_text())
    spec["job"]["commit_parallelism"] = 4
    (job / "job.yaml").write_text(yaml.safe_dump(spec))
    for log in (job / "lake").glob("*/_delta_log"):
        for p in log.iterdir():
            age(p, 40)
    return job


def maintain_in_process(job: Path, **asked: Any) -> Any:
    """`maintain job.yaml … --yes` in this process (so a test can interleave its steps); the report."""
    from gobblin_py.config import load_job
    from gobblin_py.maintenance.maintainer import Maintainer
    from gobblin_py.maintenance.options import maintenance_options
    from gobblin_py.runtime.executors.in_process import InProcessExecutor
    from gobblin_py.runtime.runner import JobRunner

    spec = load_job(job / "job.yaml")
    return Maintainer(JobRunner(spec, InProcessExecutor())).run(maintenance_options(spec, **asked), apply=True)


def assert_every_row_once(job: Path, expected: dict[str, Counter]) -> None:
    """Each table holds `expected` ids once, as delta-rs reads it and as DuckDB reads the files its log lists."""
    for dataset, ids in expected.items():
        t = table(job, dataset)
        assert delta_ids(t) == ids, dataset
        assert (duckdb_ids(t) if t.file_uris() else Counter()) == ids, dataset  # DuckDB reads no empty file list
        assert all(Path(p).exists() for p in t.file_uris()), dataset


def test_log_expiry_never_deletes_what_the_retention_commit_reads(job: Path, monkeypatch) -> None:
    """The bad interleaving forced: the log expiry's checkpoint and its deletion wait for the retention step to have
    opened its table (so delta-rs lists the log from version 0, no checkpoint yet), and the retention step, once it has
    opened it, waits for that deletion before its delete reads the log (each at most WAIT_S, so an order that keeps
    them apart only waits)."""
    from gobblin_py.builtin.publishers.delta import upkeep
    from gobblin_py.fs.delete_steps import FsDeleteCommitStep

    opened, deleted = threading.Event(), threading.Event()
    open_table, delete, retain = upkeep._table, FsDeleteCommitStep.execute, upkeep.DeltaRetentionCommitStep.execute
    checkpoint = upkeep.DeltaCheckpointCommitStep.execute
    retaining = threading.local()

    def retention(step: Any) -> None:
        retaining.on = step.table.endswith("clicks")
        try:
            retain(step)
        finally:
            retaining.on = False

    def retention_opens(uri: str, options: dict[str, str]) -> Any:
        found = open_table(uri, options)
        if getattr(retaining, "on", False):  # the table as the retention's delete will read it
            opened.set()
            deleted.wait(WAIT_S)
        return found

    def log_deleted(step: FsDeleteCommitStep) -> None:
        is_log = "log entries" in step.what and step.root.endswith("clicks")
        if is_log:
            opened.wait(WAIT_S)
        delete(step)
        if is_log:
            deleted.set()

    def checkpoints(step: Any) -> None:
        if step.table.endswith("clicks"):
            opened.wait(WAIT_S)
        checkpoint(step)

    monkeypatch.setattr(upkeep.DeltaCheckpointCommitStep, "execute", checkpoints)
    monkeypatch.setattr(upkeep, "_table", retention_opens)
    monkeypatch.setattr(upkeep.DeltaRetentionCommitStep, "execute", retention)
    monkeypatch.setattr(FsDeleteCommitStep, "execute", log_deleted)
    before = {d: delta_ids(table(job, d)) for d in ("clicks", "orders")}
    report = maintain_in_process(job, expire_snapshots_older_than="31d", retention="30d")
    assert [a.message for a in report.actions if a.status == "failed"] == [] and report.succeeded
    log = job / "lake" / "clicks" / "_delta_log"
    assert not (log / "00000000000000000000.json").exists()  # the expiry did delete it
    assert not CommitStepStore(job / "work").datasets("t")
    assert_every_row_once(job, {d: Counter() for d in before})  # every partition ended more than 30 days ago

    add_clicks(job, "after", range(800_000, 800_010), day=6)
    ok(cli(RUN, job))
    assert_every_row_once(job, {"clicks": Counter(range(800_000, 800_010)), "orders": Counter()})


OPTIONS = {
    "expire": ["--expire-snapshots-older-than", "31d"],
    "orphans": ["--remove-orphans-older-than", "8d"],
    "retention": ["--retention", "30d"],
    "expire+retention": COMBINED,
    "all": [*COMBINED, "--remove-orphans-older-than", "8d"],
}


@pytest.mark.parametrize("name", list(OPTIONS))
def test_each_option_alone_and_combined_leaves_a_table_the_next_run_commits_to(job: Path, name: str) -> None:
    args = OPTIONS[name]
    before = {d: delta_ids(table(job, d)) for d in ("clicks", "orders")}
    orphan = job / "lake" / "clicks" / "data" / "orphan-old.parquet"
    orphan.write_bytes(b"x" * 10)
    age(orphan, 10)
    done = cli(["maintain", "job.yaml", *args, "--yes"], job)
    ok(done)
    assert "FAILED" not in done.stdout and not CommitStepStore(job / "work").datasets("t"), done.stdout
    assert orphan.exists() == ("--remove-orphans-older-than" not in args), done.stdout
    expected = {d: Counter() if "--retention" in args else ids for d, ids in before.items()}
    assert_every_row_once(job, expected)

    add_clicks(job, "after", range(900_000, 900_010), day=6)
    ran = cli(RUN, job)
    ok(ran)
    expected["clicks"] = expected["clicks"] + Counter(range(900_000, 900_010))
    assert_every_row_once(job, expected)
    if "--expire-snapshots-older-than" in args:
        assert json.loads((job / "lake" / "clicks" / "_delta_log" / "_last_checkpoint").read_text())["version"] >= 1


def _fail_retention(monkeypatch) -> None:
    from gobblin_py.builtin.publishers.delta.upkeep import DeltaRetentionCommitStep

    def refuse(step: Any) -> None:
        raise CommitError(f"{step.describe()}: refused by the test")

    monkeypatch.setattr(DeltaRetentionCommitStep, "execute", refuse)


@pytest.mark.parametrize("state", ["waiting", "quarantined", "corrupt"])
def test_a_pending_maintenance_record_in_any_state_never_blocks_a_run(job: Path, monkeypatch, state: str) -> None:
    """A retention commit that failed leaves its record pending (waiting out its backoff; quarantined after its last
    attempt; or torn): the next run commits the job's datasets all the same, exits 0, and names the record."""
    if state == "quarantined":
        spec = yaml.safe_load((job / "job.yaml").read_text())
        spec["job"]["commit_max_attempts"] = 1
        (job / "job.yaml").write_text(yaml.safe_dump(spec))
    _fail_retention(monkeypatch)
    report = maintain_in_process(job, retention="30d")
    assert not report.succeeded
    store = CommitStepStore(job / "work")
    [record] = [r for r in store.datasets("t") if "clicks" in r]
    assert record.startswith("maintain/retention/")
    if state == "corrupt":
        path = store.path("t", record)
        path.write_bytes(path.read_bytes()[:40])
    monkeypatch.undo()

    before = delta_ids(table(job, "clicks"))
    add_clicks(job, "after", range(910_000, 910_010), day=6)
    ran = cli(["run", "job.yaml", "--in-process"], job)
    said = ran.stdout + ran.stderr
    assert ran.returncode == 0, said
    assert "blocked" not in said and record in said, said  # named, as a warning, never as a blocked dataset
    assert delta_ids(table(job, "clicks")) == before + Counter(range(910_000, 910_010))
    assert duckdb_ids(table(job, "clicks")) == delta_ids(table(job, "clicks"))
    assert record in store.datasets("t")  # still pending: `recover` or `maintain` completes it
