"""A corrupt state file harms only its own dataset: the state step rewrites a dataset-state file, the watermark
step refuses (naming the file) rather than drop other keys, and reads report the one bad file beside the others."""

from __future__ import annotations

from pathlib import Path

import pytest

from gobblin_py.commit.protocol import commit_sequence
from gobblin_py.commit.recovery import Outcome, recover
from gobblin_py.commit.sequence import CommitSequence
from gobblin_py.commit.steps import DatasetStateCommitStep, HighWatermarkCommitStep
from gobblin_py.commit.store import CommitStepStore
from gobblin_py.errors import StateStoreError
from gobblin_py.state.store import DatasetStateFile, StateStore, WatermarkFile


def _commit(work: Path, dataset: str, run_id: str, watermarks: dict) -> None:
    state_dir = str(work / "state" / "job")
    store = CommitStepStore(work)
    seq = CommitSequence(job="job", dataset=dataset, run_id=run_id, steps=[
        HighWatermarkCommitStep(state_dir=state_dir, dataset=dataset, watermarks=watermarks),
        DatasetStateCommitStep(state_dir=state_dir, dataset=dataset, run_id=run_id, state={"records_written": 5}),
    ])
    commit_sequence(store, seq)


def _corrupt(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:20])


def test_a_corrupt_dataset_state_file_is_rewritten_by_the_replay(tmp_path: Path) -> None:
    _commit(tmp_path, "ds", "r1", {"k": 1})
    state = StateStore(tmp_path, "job")
    _corrupt(DatasetStateFile(state.dir, "ds").path)
    store = CommitStepStore(tmp_path)
    store.put(CommitSequence(job="job", dataset="ds", run_id="r2", steps=[
        DatasetStateCommitStep(state_dir=str(state.dir), dataset="ds", run_id="r2", state={"records_written": 7})]))
    (rec,) = recover(store, "job", max_attempts=3).datasets
    assert rec.outcome is Outcome.RECOVERED, rec.message
    assert state.dataset_state("ds") == {"records_written": 7, "run_id": "r2", "dataset": "ds"}


def test_reads_report_the_one_corrupt_file_and_return_the_others(tmp_path: Path) -> None:
    for ds in ("a", "b", "c"):
        _commit(tmp_path, ds, "r1", {"k": ord(ds)})
    state = StateStore(tmp_path, "job")
    _corrupt(WatermarkFile(state.dir, "b").path)
    _corrupt(DatasetStateFile(state.dir, "c").path)

    marks = state.read_watermarks()
    assert marks.values == {"a": {"k": 97}, "c": {"k": 99}} and list(marks.errors) == ["b"]
    message = str(marks.errors["b"])
    assert str(WatermarkFile(state.dir, "b").path) in message and "state reset JOB.yaml --dataset b" in message
    states = state.read_dataset_states()
    assert set(states.values) == {"a", "b"} and list(states.errors) == ["c"]
    assert str(DatasetStateFile(state.dir, "c").path) in str(states.errors["c"])
    with pytest.raises(StateStoreError, match=r"watermark file .*b.json is corrupt"):
        state.watermarks()  # the all-or-nothing read still refuses


def test_the_watermark_step_refuses_a_corrupt_file_and_keeps_it(tmp_path: Path) -> None:
    _commit(tmp_path, "ds", "r1", {"p0": 10, "p1": 20})
    state = StateStore(tmp_path, "job")
    wm = WatermarkFile(state.dir, "ds")
    _corrupt(wm.path)
    damaged = wm.path.read_bytes()
    store = CommitStepStore(tmp_path)
    store.put(CommitSequence(job="job", dataset="ds", run_id="r2", steps=[
        HighWatermarkCommitStep(state_dir=str(state.dir), dataset="ds", watermarks={"p1": 25})]))
    (rec,) = recover(store, "job", max_attempts=3).datasets
    assert rec.outcome is Outcome.FAILED
    assert f"watermark file {wm.path} is corrupt" in rec.message and "--dataset ds --abandon" in rec.message
    assert wm.path.read_bytes() == damaged  # p0 is not silently dropped
