"""Faults during a replay (a full disk) are reported for the dataset and step, counted where the record can
still be written, never an internal error; the `recover` command prints one line per dataset."""

from __future__ import annotations

import errno
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from gobblin_py.api import CommitStep
from gobblin_py.commit.recovery import Outcome, recover
from gobblin_py.commit.sequence import CommitSequence
from gobblin_py.commit.store import CommitStepStore, StepRegistry
from gobblin_py.state.store import StateStore
from gobblin_py.testing.commits import publish_sequences, task_output
from gobblin_py.testing.crash import SIGKILLED, cli

from support.jobs import example_job, write_job


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
