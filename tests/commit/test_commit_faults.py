"""Faults during a replay (a full disk) are reported for the dataset and step, counted where the record can
still be written, never an internal error; the `recover` command prints one line per dataset."""

from __future__ import annotations

import datetime as dt
import errno
import json
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from support.jobs import example_job, write_job

from gobblin_py import checked_json
from gobblin_py.api import CommitStep
from gobblin_py.commit.recovery import DatasetRecovery, Outcome, recover, retry_wait
from gobblin_py.commit.sequence import CommitSequence, Fault
from gobblin_py.commit.store import CommitStepStore, StepRegistry
from gobblin_py.errors import CorruptCommitRecordError
from gobblin_py.state.store import StateStore
from gobblin_py.testing.commits import publish_sequences, task_output
from gobblin_py.testing.crash import SIGKILLED, cli


def test_a_full_disk_during_recovery_fails_only_that_dataset_naming_it_and_the_step(tmp_path: Path, mount, fill_disk) -> None:
    disk = mount(["-t", "tmpfs", "-o", "size=2m", "tmpfs"], tmp_path / "disk")
    store = CommitStepStore(disk)
    for seq in publish_sequences(disk, "job", task_output(disk, datasets=2, files=2, size=1024)):
        store.put(seq)
    fill_disk(disk)  # the watermark write, and the record of the failed attempt, both hit ENOSPC

    report = recover(store, "job", max_attempts=3)
    assert [r.outcome for r in report.datasets] == [Outcome.FAILED, Outcome.FAILED]
    for rec in report.datasets:
        assert f"commit of dataset {rec.dataset!r} failed at step 3/4 (set watermarks of {rec.dataset}" in rec.message
        assert "No space left on device" in rec.message and "this attempt could not be counted" in rec.message

    (disk / "filler").unlink()
    assert [r.outcome for r in recover(store, "job", max_attempts=3).datasets] == [Outcome.RECOVERED] * 2
    assert set(StateStore(disk, "job").watermarks()) == {"ds0000", "ds0001"}


@dataclass
class DiskFullStep(CommitStep):
    """A step whose disk is full: raises ENOSPC as a write would."""

    type_name: ClassVar[str] = "disk_full"
    target: str

    def verify(self) -> bool:
        return False

    def execute(self) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", self.target)

    def describe(self) -> str:
        return f"write {self.target}"


def test_a_step_failing_with_enospc_counts_attempts_until_quarantine(tmp_path: Path) -> None:
    store = CommitStepStore(tmp_path, StepRegistry([DiskFullStep]))
    store.put(CommitSequence(job="job", dataset="ds", run_id="r", steps=[DiskFullStep(str(tmp_path / "out" / "f"))]))
    outcomes = [recover(store, "job", max_attempts=2).datasets[0] for _ in range(3)]
    assert [o.outcome for o in outcomes] == [Outcome.FAILED, Outcome.QUARANTINED, Outcome.QUARANTINED]
    assert "attempt 1/2: commit of dataset 'ds' failed at step 1/1 (write " in outcomes[0].message
    assert "No space left on device" in outcomes[0].message and store.get("job", "ds").attempts == 2


def test_recover_on_a_full_disk_prints_one_line_per_dataset(tmp_path: Path, mount, fill_disk) -> None:
    disk = mount(["-t", "tmpfs", "-o", "size=8m", "tmpfs"], tmp_path / "disk")
    job = example_job(tmp_path, job={"name": "t", "work_dir": str(disk / "work"), "commit_parallelism": 1},
                      publisher={"final_dir": str(disk / "work" / "output")})
    write_job(tmp_path, job)
    assert cli(["run", "job.yaml", "--in-process"], tmp_path, crash_at="commit.after_store_write:1").returncode == SIGKILLED
    fill_disk(disk)
    done = cli(["recover", "job.yaml", "--all"], tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("clicks: failed")]
    assert "No space left on device" in line and "step " in line


def _one_dataset_onto_a_full_disk(root: Path, mount, fill_disk) -> tuple[CommitStepStore, list[Path]]:
    """A pending sequence whose files are published onto `root/output`, a tmpfs filled to the last byte (ENOSPC)."""
    output = mount(["-t", "tmpfs", "-o", "size=1m", "tmpfs"], root / "output")
    fill_disk(output)
    [files] = task_output(root, datasets=1, files=2, size=4096)
    store = CommitStepStore(root)
    [seq] = publish_sequences(root, "job", [files])
    store.put(seq)
    return store, files


def test_environment_faults_are_attempted_over_minutes_and_a_quarantined_dataset_is_retried_once_they_clear(
        tmp_path: Path, mount, fill_disk) -> None:
    store, files = _one_dataset_onto_a_full_disk(tmp_path, mount, fill_disk)

    def after(seconds: float) -> DatasetRecovery:
        """What a run does `seconds` after the last failed attempt (the first: at once)."""
        last = store.get("job", "ds0000").last_attempt
        now = dt.datetime.fromisoformat(last) if last else dt.datetime.now(dt.UTC)
        [rec] = recover(store, "job", max_attempts=3, backoff=60, now=now + dt.timedelta(seconds=seconds)).datasets
        return rec

    first = after(0)
    assert first.outcome is Outcome.FAILED and "No space left on device" in first.message
    seq = store.get("job", "ds0000")
    assert (seq.attempts, seq.fault) == (1, Fault.ENVIRONMENT) and seq.last_attempt is not None
    waiting = after(5)  # a run five seconds later does not spend an attempt on a disk that is still full
    assert waiting.outcome is Outcome.WAITING and waiting.retry_at is not None, waiting
    assert "commit attempt 1/3 failed; the next attempt is at " in waiting.message and "(in 55s" in waiting.message
    assert "gobblin-py recover JOB.yaml --dataset ds0000" in waiting.message and store.get("job", "ds0000").attempts == 1
    assert after(61).outcome is Outcome.FAILED and store.get("job", "ds0000").attempts == 2  # a minute after the first
    assert after(100).outcome is Outcome.WAITING  # then two minutes
    assert after(121).outcome is Outcome.QUARANTINED and store.get("job", "ds0000").attempts == 3
    held = after(200)  # quarantined, but by a fault of the environment: retried by itself four minutes later
    assert held.outcome is Outcome.QUARANTINED and "retried automatically at " in held.message and held.retry_at
    assert "(in 40s" in held.message and store.get("job", "ds0000").attempts == 3
    assert after(241).outcome is Outcome.QUARANTINED and store.get("job", "ds0000").attempts == 4  # still full

    (tmp_path / "output" / "filler").unlink()  # the fault clears
    assert after(300).outcome is Outcome.QUARANTINED and store.get("job", "ds0000").attempts == 4  # eight minutes now
    assert after(481).outcome is Outcome.RECOVERED and store.datasets("job") == []
    assert all((tmp_path / "output" / "ds0000").rglob(p.name) for p in files)
    assert StateStore(tmp_path, "job").watermarks()["ds0000"] == {"f0.avro": 100, "f1.avro": 100}


def test_a_refused_step_stays_quarantined_until_recover_and_old_records_replay(tmp_path: Path) -> None:
    [files] = task_output(tmp_path, datasets=1, files=2)
    store = CommitStepStore(tmp_path)
    [seq] = publish_sequences(tmp_path, "job", [files])
    store.put(seq)
    content = files[1].read_bytes()
    files[1].unlink()  # its input is gone: a step refuses, which no wait mends
    late = dt.datetime.now(dt.UTC) + dt.timedelta(days=1)
    outcomes = [recover(store, "job", max_attempts=2, backoff=1, now=late + dt.timedelta(hours=h)).datasets[0] for h in range(3)]
    assert [o.outcome for o in outcomes] == [Outcome.FAILED, Outcome.QUARANTINED, Outcome.QUARANTINED]
    assert store.get("job", "ds0000").fault is Fault.REFUSED and store.get("job", "ds0000").attempts == 2
    assert outcomes[2].message.startswith("quarantined after 2 failed attempts; last error: step 2/4") and outcomes[2].retry_at is None

    # a record written before attempts had a time and a kind: replayed at once, and quarantined until `recover`
    path = store.path("job", "ds0000")
    body = checked_json.read(path, CorruptCommitRecordError, "commit record")
    for key in ("last_attempt", "fault"):
        del body[key]
    checked_json.write(path, body)
    old = store.get("job", "ds0000")
    assert (old.last_attempt, old.fault, old.attempts) == (None, None, 2)
    assert recover(store, "job", max_attempts=2, backoff=60).datasets[0].outcome is Outcome.QUARANTINED
    files[1].write_bytes(content)
    body["attempts"] = 1
    checked_json.write(path, body)
    assert recover(store, "job", max_attempts=2, backoff=60).datasets[0].outcome is Outcome.RECOVERED


def test_the_wait_doubles_from_the_backoff_and_stops_at_an_hour() -> None:
    assert [retry_wait(n, 60) for n in range(7)] == [0, 60, 120, 240, 480, 960, 1920]
    assert retry_wait(7, 60) == retry_wait(10_000, 60) == 3600
    assert retry_wait(3, 0) == 0 and retry_wait(2, 7200) == 7200


def test_a_run_soon_after_a_commit_failed_on_a_full_disk_does_not_spend_another_attempt(tmp_path: Path, mount, fill_disk) -> None:
    """The job's defaults: the attempts of a dataset whose output disk is full are a minute apart and more, not one per
    run (a continuous run's checkpoints spent all three in seconds); `recover` still retries it at once."""
    output = mount(["-t", "tmpfs", "-o", "size=4m", "tmpfs"], tmp_path / "output")
    write_job(tmp_path, example_job(tmp_path, job={"name": "t", "work_dir": str(tmp_path / "work"), "commit_parallelism": 1}))
    fill_disk(output)
    first = cli(["run", "job.yaml", "--in-process"], tmp_path)
    assert first.returncode == 1 and "commit failed" in first.stdout and "No space left on device" in first.stdout, first.stdout
    second = cli(["run", "job.yaml", "--in-process"], tmp_path)
    assert second.returncode == 1, second.stdout + second.stderr
    assert "dataset clicks is waiting and is skipped this run: commit attempt 1/3 failed; the next attempt is at " in second.stderr
    listed = json.loads(cli(["inspect-commits", "job.yaml", "--json"], tmp_path).stdout)
    assert [(v["dataset"], v["attempts"], v["fault"]) for v in listed] == [("clicks", 1, "environment"), ("orders", 1, "environment")]
    assert all(v["last_attempt"] for v in listed)

    (output / "filler").unlink()
    done = cli(["recover", "job.yaml", "--all"], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert cli(["run", "job.yaml", "--in-process"], tmp_path).returncode == 0
    assert set(StateStore(tmp_path / "work", "t").watermarks()) == {"clicks", "orders"}
