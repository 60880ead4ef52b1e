"""A work directory on an object store (moto's S3 server, which enforces If-None-Match and If-Match), issue 43: the
records (commit log, state, run records, events, identity, lease) and the task output live on the store, shared by
drivers on any host. The same record protocol holds for a local directory and the store; a driver killed at each
commit boundary on one "host" (a temp directory of its own) is recovered by a driver on another, and every record is
published once, read back with the Apache `avro` package."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.jobs import example_job, run_cli, write_job
from support.world import avro_ids

from gobblin_py.crashpoints import ENV as CRASH_ENV
from gobblin_py.fs.conditional import Conflict
from gobblin_py.fs.records import LocalRecordFiles, StoreRecordFiles
from gobblin_py.fs.registry import configure

pytestmark = [pytest.mark.s3]
pytest.importorskip("obstore")


@pytest.fixture(params=["local", "s3"])
def files(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A local directory's records, or an object store's (this process's filesystems pointed at moto, as a job's
    `job.filesystems` does)."""
    if request.param == "local":
        yield LocalRecordFiles(tmp_path / "records")
        return
    s3 = request.getfixturevalue("s3")
    configure(s3.options)
    try:
        yield StoreRecordFiles(f"s3://{s3.new_bucket()}/records", s3.options["s3"])
    finally:
        configure({})


def test_both_kinds_of_work_directory_keep_one_record_protocol(files: Any) -> None:
    assert files.get("commits/j/a.json") is None and files.names("commits/j") == [] and files.folders("") == []
    first = files.create("commits/j/a.json", b"one")
    with pytest.raises(Conflict):
        files.create("commits/j/a.json", b"again")  # create-if-absent: a second one loses
    assert files.get("commits/j/a.json").data == b"one"
    second = files.swap("commits/j/a.json", b"two", first)
    with pytest.raises(Conflict):
        files.swap("commits/j/a.json", b"stale", first)  # the version read is gone: the write is refused
    assert files.get("commits/j/a.json").data == b"two" and files.get("commits/j/a.json").version == second
    files.put("commits/j/b.json", b"three")
    files.put("state/j/runs/r1.json", b"four")
    assert files.names("commits/j") == ["a.json", "b.json"] and files.folders("") == ["commits", "state"]
    assert files.child("state/j").names("runs") == ["r1.json"]
    files.delete("commits/j/a.json")
    files.delete("commits/j/never.json")  # absent: nothing
    assert files.names("commits/j") == ["b.json"]


def store_job(tmp: Path, s3: Any, bucket: str) -> Path:
    job = example_job(tmp, job__work_dir=f"s3://{bucket}/work", job__filesystems=s3.options,
                      publisher={"final_dir": f"s3://{bucket}/output"})
    return write_job(tmp, job)


def on_host(host: Path, job: Path, *args: str, crash: str | None = None) -> Any:
    """`gobblin-py ARGS JOB` as a driver on another host: its own temp directory (its local staging), cwd and env."""
    host.mkdir(parents=True, exist_ok=True)
    env = {"TMPDIR": str(host)}
    if crash is not None:
        env[CRASH_ENV] = crash
    return run_cli(*args, str(job), cwd=host, env=env)


def frozen_on_host(host: Path, job: Path, point: str) -> Any:
    """`gobblin-py run JOB --in-process` as a driver on `host`, returned once frozen (SIGSTOP) at `point`."""
    import subprocess
    import sys
    import time

    from commit.test_two_hosts import stopped

    from gobblin_py.crashpoints import PAUSE_ENV

    host.mkdir(parents=True, exist_ok=True)
    driver = subprocess.Popen([sys.executable, "-m", "gobblin_py.cli.main", "run", str(job), "--in-process"], cwd=host,
                              env={**os.environ, "TMPDIR": str(host), PAUSE_ENV: point}, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not stopped(driver.pid):
        if driver.poll() is not None or time.monotonic() > deadline:
            driver.kill()
            raise AssertionError(f"the driver never reached {point}: {driver.communicate()}")
        time.sleep(0.1)
    return driver


def taken_over_then_woken(tmp: Path, job: Path, frozen: Any, meanwhile: Any) -> Any:
    """`meanwhile()`, then, once the frozen driver's lease has expired, a run on host-b that takes the job over (exit
    0, returned); the frozen driver, woken, must exit 1 naming the lost lease."""
    import signal
    import time

    from commit.test_two_hosts import TTL

    try:
        meanwhile()
        time.sleep(TTL + 0.5)
        took = on_host(tmp / "host-b", job, "run", "--in-process")
        assert took.returncode == 0, took.stdout + took.stderr
    finally:
        frozen.send_signal(signal.SIGCONT)
        out, err = frozen.communicate(timeout=120)
    assert frozen.returncode == 1 and "lost the lease" in out + err, out + err
    return took


def published(s3: Any, bucket: str, local: Path) -> Any:
    return avro_ids(s3.download(f"{bucket}/output", local))


def test_a_work_directory_on_the_store_keeps_every_record_there(tmp_path: Path, s3: Any) -> None:
    bucket = s3.new_bucket()
    job = store_job(tmp_path, s3, bucket)
    done = on_host(tmp_path / "host-a", job, "run", "--in-process")
    assert done.returncode == 0, done.stdout + done.stderr
    keys = [k.removeprefix(f"{bucket}/work/") for k in s3.keys(f"{bucket}/work")]
    assert "identity.json" in keys and any(k.startswith("leases/t/") for k in keys)
    assert {"state/t/watermarks/clicks.json", "state/t/watermarks/orders.json", "state/t/datasets/clicks.json"} <= set(keys)
    assert any(k.startswith("state/t/runs/") for k in keys) and any(k.startswith("events/t/") for k in keys)
    assert not any(k.startswith("commits/") for k in keys)  # every commit finished: no record pending
    assert not (tmp_path / "work").exists() and not (tmp_path / "s3:").exists()
    ids = published(s3, bucket, tmp_path / "read")
    assert ids and set(ids.values()) == {1}

    again = on_host(tmp_path / "host-b", job, "run", "--in-process")  # another host: nothing new, nothing twice
    assert again.returncode == 0, again.stdout + again.stderr
    assert published(s3, bucket, tmp_path / "read") == ids
    shown = on_host(tmp_path / "host-b", job, "history", "list")
    assert shown.returncode == 0 and shown.stdout.count("succeeded") >= 2, shown.stdout + shown.stderr
    state = on_host(tmp_path / "host-b", job, "state", "show")
    assert state.returncode == 0 and "clicks" in state.stdout and "lease: epoch 2" in state.stdout, state.stdout


@pytest.mark.crash
@pytest.mark.parametrize("point", ["commit.before_store_write", "commit.store_write_midway", "commit.after_store_write",
                                   "commit.after_step", "commit.copy_verified", "commit.before_record_removal",
                                   "commit.after_record_removal"])
def test_a_driver_killed_at_a_commit_boundary_is_recovered_by_a_driver_on_another_host(tmp_path: Path, s3: Any,
                                                                                      point: str) -> None:
    bucket = s3.new_bucket()
    job = store_job(tmp_path, s3, bucket)
    killed = on_host(tmp_path / "host-a", job, "run", "--in-process", crash=point)
    assert killed.returncode != 0, killed.stdout + killed.stderr
    took = on_host(tmp_path / "host-b", job, "run", "--in-process")
    assert took.returncode == 0, took.stdout + took.stderr
    assert "Traceback" not in took.stderr
    ids = published(s3, bucket, tmp_path / "read")
    alone = tmp_path / "alone"  # the same job run once, on one host, in a local work directory
    assert run_cli("run", str(write_job(alone, example_job(alone))), "--in-process").returncode == 0
    assert ids == avro_ids(alone / "output"), f"twice: {sorted(i for i, n in ids.items() if n > 1)[:10]}, " \
                                              f"missing: {sorted(set(avro_ids(alone / 'output')) - set(ids))[:10]}"
    assert not any(k.startswith(f"{bucket}/work/commits/t/") for k in s3.keys(f"{bucket}/work/commits"))


@pytest.mark.crash
@pytest.mark.parametrize("point", ["commit.store_write_midway", "commit.after_store_write", "commit.after_step"])
def test_a_driver_paused_past_its_lease_on_the_store_commits_nothing_when_it_wakes(tmp_path: Path, s3: Any,
                                                                                 point: str) -> None:


    from commit.test_two_hosts import TTL

    bucket = s3.new_bucket()
    job = write_job(tmp_path, example_job(tmp_path, job__work_dir=f"s3://{bucket}/work", job__filesystems=s3.options,
                                          job__lease={"ttl": TTL}, publisher={"final_dir": f"s3://{bucket}/output"}))
    def refused_while_live() -> None:
        refused = on_host(tmp_path / "host-b", job, "run", "--in-process")
        said = refused.stdout + refused.stderr
        if refused.returncode == 0 and "took over the lease of epoch 1" in said and "expired" in said:
            return  # a slow start (a loaded machine): the lease had expired by the time host-b looked, as it says
        assert refused.returncode == 1 and "is running elsewhere" in refused.stderr, said

    taken_over_then_woken(tmp_path, job, frozen_on_host(tmp_path / "host-a", job, point), refused_while_live)
    again = on_host(tmp_path / "host-a", job, "run", "--in-process")
    assert again.returncode == 0, again.stdout + again.stderr
    ids = published(s3, bucket, tmp_path / "read")
    alone = tmp_path / "alone"
    assert run_cli("run", str(write_job(alone, example_job(alone))), "--in-process").returncode == 0
    assert ids == avro_ids(alone / "output"), f"twice: {sorted(i for i, n in ids.items() if n > 1)[:10]}"


def test_a_watermark_moved_on_while_a_step_wrote_it_is_not_moved_back(files: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A driver that read the watermarks, paused, and lost its lease meanwhile must not write back what it read: the
    new holder's keys would move back, and its records be read again. The write is refused (on an object store, by the
    store's If-Match)."""
    from gobblin_py.commit.steps import HighWatermarkCommitStep
    from gobblin_py.errors import CommitError
    from gobblin_py.state.store import WatermarkFile

    state = files.where + "/state/t"
    WatermarkFile(state, "ds").write({"p0": 10, "p1": 10})
    step = HighWatermarkCommitStep(state_dir=state, dataset="ds", watermarks={"p0": 20})
    read = HighWatermarkCommitStep._current

    def read_then_the_new_holder_commits(self: HighWatermarkCommitStep) -> dict:
        found = read(self)
        WatermarkFile(state, "ds").write({"p0": 30, "p1": 30})  # the driver that took over commits meanwhile
        return found

    monkeypatch.setattr(HighWatermarkCommitStep, "_current", read_then_the_new_holder_commits)
    with pytest.raises(CommitError, match="changed while this step wrote it"):
        step.execute()
    assert WatermarkFile(state, "ds").read() == {"p0": 30, "p1": 30}


def test_a_dataset_state_moved_on_while_a_step_wrote_it_is_not_overwritten(files: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same for the dataset's state (the identities its source checks, a table's pinned commit)."""
    from gobblin_py.commit.steps import DatasetStateCommitStep
    from gobblin_py.errors import CommitError
    from gobblin_py.state.store import DatasetStateFile

    state = files.where + "/state/t"
    DatasetStateFile(state, "ds").write({"run_id": "r1", "pinned": 1})
    step = DatasetStateCommitStep(state_dir=state, dataset="ds", run_id="r2", state={"pinned": 2})
    version = DatasetStateFile.version

    def read_then_the_new_holder_commits(self: DatasetStateFile) -> str | None:
        found = version(self)
        DatasetStateFile(state, "ds").write({"run_id": "r3", "pinned": 3})
        return found

    monkeypatch.setattr(DatasetStateFile, "version", read_then_the_new_holder_commits)
    with pytest.raises(CommitError, match="changed while this step wrote it"):
        step.execute()
    assert DatasetStateFile(state, "ds").read() == {"run_id": "r3", "pinned": 3}


def test_a_driver_that_wakes_after_the_new_holder_committed_does_not_move_its_state_back(files: Any) -> None:
    """A driver checked its lease before a step, paused, and woke after the new holder had taken over and committed
    further: it reads the files as they are now, so no conditional write stops it, and it used to write its older
    watermarks and state over the new holder's (the next run read those records again). A state record carries the
    lease epoch that wrote it, and a step of an older epoch is refused reading it: nothing written, the lease named."""
    from gobblin_py.commit.steps import DatasetStateCommitStep, HighWatermarkCommitStep
    from gobblin_py.errors import LeaseLostError
    from gobblin_py.state.store import DatasetStateFile, WatermarkFile, writing_at

    state = files.where + "/state/t"
    with writing_at(6):  # the new holder (epoch 6) recovered the paused driver's commit and committed one more
        HighWatermarkCommitStep(state_dir=state, dataset="ds", watermarks={"p0": 30}).execute()
        DatasetStateCommitStep(state_dir=state, dataset="ds", run_id="r6", state={"pinned": 6}).execute()
    stale = [HighWatermarkCommitStep(state_dir=state, dataset="ds", watermarks={"p0": 20}),
             DatasetStateCommitStep(state_dir=state, dataset="ds", run_id="r5", state={"pinned": 5})]
    with writing_at(5):  # the paused driver (epoch 5) wakes inside its step
        for step in stale:
            with pytest.raises(LeaseLostError, match="lost the lease") as refused:
                step.execute()
            assert "epoch 6" in str(refused.value) and "epoch 5" in str(refused.value)
    assert WatermarkFile(state, "ds").read() == {"p0": 30}
    assert DatasetStateFile(state, "ds").read()["run_id"] == "r6"
    with writing_at(7):  # a later holder writes on; a run without a lease (job.lock off) too
        HighWatermarkCommitStep(state_dir=state, dataset="ds", watermarks={"p0": 40}).execute()
    HighWatermarkCommitStep(state_dir=state, dataset="ds", watermarks={"p1": 1}).execute()
    assert WatermarkFile(state, "ds").read() == {"p0": 40, "p1": 1}


def test_both_kinds_of_work_directory_pass_the_same_commit_protocol(files: Any, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A new commit and a recovery pass the same commit points in the same order, with the commit log, watermarks
    and state in a local directory or on the store, and leave the same committed state."""
    from commit.test_protocol import NEW_COMMIT, REPLAY

    from gobblin_py.commit import protocol, recovery
    from gobblin_py.commit import store as store_module
    from gobblin_py.commit.confinement import Confinement
    from gobblin_py.commit.recovery import Outcome, recover
    from gobblin_py.commit.steps import DatasetStateCommitStep, HighWatermarkCommitStep
    from gobblin_py.commit.store import CommitStepStore
    from gobblin_py.state.store import StateStore
    from gobblin_py.testing.commits import publish_sequences, task_output

    passed: list[str] = []
    for module in (protocol, store_module, recovery):
        monkeypatch.setattr(module, "crash_point", passed.append)
    root, local = files.where, tmp_path / "files"
    store = CommitStepStore(root, confinement=Confinement.of([root, str(local)]))
    seqs = publish_sequences(local, "j", task_output(local, 2, 2))
    for seq in seqs:
        for step in seq.steps:
            if isinstance(step, (HighWatermarkCommitStep, DatasetStateCommitStep)):
                step.state_dir = f"{root}/state/j"
    protocol.commit_sequence(store, seqs[0])
    assert passed == NEW_COMMIT and store.datasets("j") == []
    store.put(seqs[1])
    assert store.datasets("j") == [seqs[1].dataset]
    passed.clear()
    report = recover(store, "j", max_attempts=3)
    assert [r.outcome for r in report.datasets] == [Outcome.RECOVERED] and passed == REPLAY
    assert store.datasets("j") == []
    state = StateStore(root, "j")
    assert sorted(state.watermarks()) == sorted(s.dataset for s in seqs)
    assert all(v == {"f0.avro": 100, "f1.avro": 100} for v in state.watermarks().values())


@pytest.mark.crash
def test_a_driver_woken_inside_a_step_after_the_new_holder_committed_more_reads_nothing_twice(tmp_path: Path,
                                                                                              s3: Any) -> None:
    """The zombie's window the lease check alone leaves: a driver checked its lease before its watermark step
    (`commit.step_fenced`), froze, and woke after another host took the job over, recovered its commit and committed
    rows appended since. It used to write its older watermark over the new holder's (the files read as they were when
    it woke, so no conditional write stopped it) and exit 1; the next run read the appended rows again (here the fs
    publisher's names, one per range, kept them from being published twice; a table sink appends them again). Now its
    step is refused by the epoch in the watermark file: the next run has no new data, every row is published once."""


    from commit.test_two_hosts import TTL

    bucket = s3.new_bucket()
    job = write_job(tmp_path, example_job(tmp_path, job__work_dir=f"s3://{bucket}/work", job__filesystems=s3.options,
                                          job__lease={"ttl": TTL}, publisher={"final_dir": f"s3://{bucket}/output"},
                                          source__ingest_appended=True, job__commit_parallelism=1))
    # clicks' sequence: 6 publish steps (5 files and an error file), then its watermark step: the 7th step fenced
    def rows_appended_upstream() -> None:
        with (tmp_path / "data" / "clicks" / "clicks-2026-01-05.jsonl").open("a") as f:
            for i in range(900_001, 900_011):
                f.write(f'{{"id": {i}, "ts": 1767639481335, "user": "u1", "kind": "click", "amount": 1.0, "country": "DE"}}\n')

    took = taken_over_then_woken(tmp_path, job, frozen_on_host(tmp_path / "host-a", job, "commit.step_fenced:7"),
                                 rows_appended_upstream)
    assert "took over the lease" in took.stderr, took.stdout + took.stderr
    again = on_host(tmp_path / "host-a", job, "run", "--in-process")
    assert again.returncode == 0, again.stdout + again.stderr
    clicks = next(line.split() for line in again.stdout.splitlines() if line.split()[:1] == ["clicks"])
    assert clicks[1:4] == ["no", "new", "data"], f"the appended rows read again:\n{again.stdout}"
    ids = published(s3, bucket, tmp_path / "read")
    assert all(ids[i] == 1 for i in range(900_001, 900_011)), f"appended rows: {[ids[i] for i in range(900_001, 900_011)]}"
    assert set(ids.values()) == {1}, f"twice: {sorted(i for i, n in ids.items() if n > 1)[:10]}"
