"""Commit records are confined to the job's own directories, checked where a record is written and loaded."""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
from support.jobs import example_job, write_job

from gobblin_py.api import CommitStep
from gobblin_py.checked_json import encode
from gobblin_py.commit.confinement import Confinement, job_confinement
from gobblin_py.commit.protocol import replay
from gobblin_py.commit.recovery import Outcome, recover
from gobblin_py.commit.sequence import CommitSequence
from gobblin_py.commit.steps import DatasetStateCommitStep, FsRenameCommitStep, HighWatermarkCommitStep
from gobblin_py.commit.store import CommitStepStore, StepRegistry
from gobblin_py.config import load_job
from gobblin_py.durable import file_checksum
from gobblin_py.errors import CorruptCommitRecordError


@pytest.fixture
def job_store(tmp_path: Path) -> CommitStepStore:
    """A store confined as the example job is: task output, final_dir, state and staging of job `t`."""
    job = load_job(write_job(tmp_path, example_job(tmp_path)))
    return CommitStepStore(job.job.work_dir, confinement=job_confinement(job))


def _hand_edited(store: CommitStepStore, steps: list[dict]) -> Path:
    """A record with a valid checksum, written by hand (not through `put`)."""
    body = {"job": "t", "dataset": "ds", "run_id": "r", "created": "now", "attempts": 0, "steps": steps}
    path = store.path("t", "ds")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(encode(body))
    return path


def test_a_hand_edited_record_moving_files_outside_the_job_is_refused_and_nothing_moves(tmp_path: Path, job_store: CommitStepStore) -> None:
    victim = tmp_path / "elsewhere" / "precious.db"
    victim.parent.mkdir()
    victim.write_bytes(b"not the job's")
    record = _hand_edited(job_store, [{"type": "fs_rename", "args": {
        "src": str(victim), "dst": str(tmp_path / "stolen" / "precious.db"), "size": 13, "checksum": file_checksum(victim)}}])
    with pytest.raises(CorruptCommitRecordError, match=f"names {victim}, outside the job's directories"):
        job_store.get("t", "ds")
    (rec,) = recover(job_store, "t", max_attempts=3).datasets
    assert rec.outcome is Outcome.CORRUPT and str(record) in rec.message and "refused as tampered" in rec.message
    assert victim.read_bytes() == b"not the job's" and not (tmp_path / "stolen").exists()


def test_a_record_writing_state_into_another_jobs_directory_is_refused(tmp_path: Path, job_store: CommitStepStore) -> None:
    foreign = tmp_path / "work" / "state" / "other-job"
    _hand_edited(job_store, [{"type": "high_watermark", "args": {"state_dir": str(foreign), "dataset": "ds", "watermarks": {"k": 9}}}])
    (rec,) = recover(job_store, "t", max_attempts=3).datasets
    assert rec.outcome is Outcome.CORRUPT and f"names {foreign}" in rec.message
    assert not foreign.exists()


@pytest.mark.parametrize("escape", ["../../x/f.avro", "ds/../../../x/f.avro"])
def test_a_dot_dot_escape_from_final_dir_is_refused_before_anything_is_logged(tmp_path: Path, job_store: CommitStepStore, escape: str) -> None:
    src = tmp_path / "work" / "task-output" / "t" / "run" / "f.avro"
    src.parent.mkdir(parents=True)
    src.write_bytes(b"data")
    step = FsRenameCommitStep(src=str(src), dst=f"{tmp_path / 'output'}/{escape}", size=4, checksum=file_checksum(src))
    seq = CommitSequence(job="t", dataset="../../x", run_id="r", steps=[step])
    with pytest.raises(CorruptCommitRecordError, match="outside the job's directories"):
        job_store.put(seq)
    assert not job_store.exists("t", "../../x") and src.exists()


def test_a_symlink_inside_final_dir_pointing_out_is_refused(tmp_path: Path, job_store: CommitStepStore) -> None:
    (tmp_path / "output").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "output" / "ds").symlink_to(tmp_path / "outside")
    src = tmp_path / "work" / "task-output" / "t" / "run" / "f.avro"
    src.parent.mkdir(parents=True)
    src.write_bytes(b"data")
    _hand_edited(job_store, [{"type": "fs_rename", "args": {
        "src": str(src), "dst": str(tmp_path / "output" / "ds" / "f.avro"), "size": 4, "checksum": file_checksum(src)}}])
    (rec,) = recover(job_store, "t", max_attempts=3).datasets
    assert rec.outcome is Outcome.CORRUPT and "outside the job's directories" in rec.message
    assert list((tmp_path / "outside").iterdir()) == []


@dataclass
class TouchStep(CommitStep):
    type_name: ClassVar[str] = "touch"
    target: str

    def verify(self) -> bool:
        return Path(self.target).exists()

    def execute(self) -> None:
        Path(self.target).touch()

    def describe(self) -> str:
        return f"touch {self.target}"


def test_the_paths_of_a_declared_step_type_are_checked_too(tmp_path: Path, job_store: CommitStepStore) -> None:
    store = CommitStepStore(job_store.work_dir, StepRegistry([TouchStep]), job_store.confinement)
    inside = tmp_path / "output" / "_SUCCESS"
    inside.parent.mkdir()
    store.put(CommitSequence(job="t", dataset="ds", run_id="r", steps=[TouchStep(str(inside))]))
    replay(store, store.get("t", "ds"))
    assert inside.exists()
    _hand_edited(store, [{"type": "touch", "args": {"target": str(tmp_path / "etc" / "passwd")}}])
    with pytest.raises(CorruptCommitRecordError, match="step 1/1 \\(touch\\) names"):
        store.get("t", "ds")


def test_the_job_confinement_names_its_own_directories_and_pickles(tmp_path: Path) -> None:
    job = load_job(write_job(tmp_path, example_job(tmp_path)))
    confinement = job_confinement(job)
    assert set(confinement.roots) == {str(tmp_path / "work" / "task-output" / "t"), str(tmp_path / "output"),
                                      str(tmp_path / "work" / "state" / "t"), str(tmp_path / "work" / "staging" / "t")}
    assert pickle.loads(pickle.dumps(confinement)) == confinement
    assert not confinement.contains(str(tmp_path / "work" / "state" / "t2"))  # a sibling with a common prefix
    assert not confinement.contains(str(tmp_path / "work" / "commits"))


def test_urls_are_confined_with_dot_dot_folded() -> None:
    confinement = Confinement.of(["s3://bucket/out", "/data/t"])
    assert confinement.contains("s3://bucket/out/ds/f.avro")
    assert not confinement.contains("s3://bucket/out/../private/f.avro")
    assert not confinement.contains("s3://other/out/f.avro") and not confinement.contains("gs://bucket/out/f.avro")


def test_the_built_in_steps_name_their_paths(tmp_path: Path) -> None:
    seq_steps = [HighWatermarkCommitStep(state_dir=str(tmp_path / "state"), dataset="ds", watermarks={}),
                 DatasetStateCommitStep(state_dir=str(tmp_path / "state"), dataset="ds", run_id="r", state={})]
    with pytest.raises(CorruptCommitRecordError, match="step 1/2 \\(high_watermark\\)"):
        Confinement.of([tmp_path / "work"]).check(seq_steps, "test")
