"""The commit layer alone: steps' full post-conditions, the durable store, sequences and attempts."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import orjson
import pytest

from gobblin_py.api import CommitStep, StepStatus
from gobblin_py.checked_json import encode
from gobblin_py.commit.protocol import replay
from gobblin_py.commit.sequence import CommitSequence
from gobblin_py.commit.steps import DatasetStateCommitStep, FsRenameCommitStep, HighWatermarkCommitStep
from gobblin_py.commit.store import CommitStepStore, StepRegistry
from gobblin_py.durable import file_checksum
from gobblin_py.errors import CommitError, CorruptCommitRecordError
from gobblin_py.state.store import StateStore


def _rename(tmp: Path, content: bytes = b"payload") -> FsRenameCommitStep:
    src = tmp / "task-output" / "f.avro"
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_bytes(content)
    return FsRenameCommitStep(src=str(src), dst=str(tmp / "out" / "ds" / "f.avro"), size=len(content), checksum=file_checksum(src))


def test_rename_is_done_only_with_the_recorded_content_and_never_replaces_another_file(tmp_path: Path) -> None:
    step = _rename(tmp_path)
    dst = Path(step.dst)
    dst.parent.mkdir(parents=True)
    dst.write_bytes(b"PAYLOAD")  # a file of the same size it did not write: not the published one, and not replaced
    assert not step.verify() and step.status() is StepStatus.CONFLICT
    with pytest.raises(CommitError, match="already holds a different file"):
        step.execute()
    assert dst.read_bytes() == b"PAYLOAD" and Path(step.src).exists()
    dst.unlink()
    step.execute()
    assert step.verify() and dst.read_bytes() == b"payload" and not Path(step.src).exists()
    step.execute()  # idempotent
    assert step.status() is StepStatus.DONE


def test_rename_with_its_source_gone_and_a_partial_destination_is_lost(tmp_path: Path) -> None:
    step = _rename(tmp_path)
    Path(step.src).unlink()
    Path(step.dst).parent.mkdir(parents=True)
    Path(step.dst).write_bytes(b"pay")
    assert step.status() is StepStatus.LOST
    with pytest.raises(CommitError, match="is gone and the destination does not hold it"):
        step.execute()


def test_watermark_and_state_steps_verify_what_they_wrote(tmp_path: Path) -> None:
    state = StateStore(tmp_path, "job")
    wm = HighWatermarkCommitStep(state_dir=str(state.dir), dataset="a/b", watermarks={"p0": 10, "p1": 20})
    assert not wm.verify()
    wm.execute()
    assert wm.verify() and state.watermarks() == {"a/b": {"p0": 10, "p1": 20}}
    HighWatermarkCommitStep(state_dir=str(state.dir), dataset="a/b", watermarks={"p1": 25}).execute()
    assert state.watermarks()["a/b"] == {"p0": 10, "p1": 25} and not wm.verify()
    ds = DatasetStateCommitStep(state_dir=str(state.dir), dataset="a/b", run_id="r1", state={"records_written": 3})
    assert not ds.verify()
    ds.execute()
    assert ds.verify() and state.dataset_state("a/b")["records_written"] == 3


def _sequence(tmp: Path) -> CommitSequence:
    state_dir = str(tmp / "state" / "job")
    return CommitSequence(job="job", dataset="ds", run_id="r1", steps=[
        _rename(tmp),
        HighWatermarkCommitStep(state_dir=state_dir, dataset="ds", watermarks={"f": 7}),
        DatasetStateCommitStep(state_dir=state_dir, dataset="ds", run_id="r1", state={}),
    ])


def test_store_round_trip_and_commit_removes_the_record(tmp_path: Path) -> None:
    store = CommitStepStore(tmp_path)
    seq = _sequence(tmp_path)
    store.put(seq)
    loaded = store.get("job", "ds")
    assert loaded.steps == seq.steps and loaded.run_id == "r1"
    assert store.datasets("job") == ["ds"]
    replay(store, loaded)
    assert store.datasets("job") == [] and all(s.verify() for s in seq.steps)
    replay(store, loaded)  # a second commit of a done sequence changes nothing


def test_a_failing_step_counts_the_attempt_and_names_the_step(tmp_path: Path) -> None:
    store = CommitStepStore(tmp_path)
    seq = _sequence(tmp_path)
    store.put(seq)
    Path(seq.steps[0].src).unlink()
    with pytest.raises(CommitError, match=r"step 1/3 \(publish "):
        replay(store, store.get("job", "ds"))
    again = store.get("job", "ds")
    assert again.attempts == 1 and again.failed_step == 0 and "is gone" in again.last_error


@pytest.mark.parametrize("damage", ["checksum", "torn", "version", "not json"])
def test_a_corrupt_record_is_refused_with_its_path(tmp_path: Path, damage: str) -> None:
    store = CommitStepStore(tmp_path)
    store.put(_sequence(tmp_path))
    path = store.path("job", "ds")
    raw = path.read_bytes()
    if damage == "checksum":
        path.write_bytes(raw.replace(b'"r1"', b'"r2"', 1))
    elif damage == "torn":
        path.write_bytes(raw[: len(raw) // 2])
    elif damage == "version":
        doc = orjson.loads(raw)
        doc["format"] = 99
        path.write_bytes(orjson.dumps(doc))
    else:
        path.write_bytes(b"\x00\x01garbage")
    with pytest.raises(CorruptCommitRecordError, match=str(path)):
        store.get("job", "ds")


def test_step_types_come_only_from_the_registry(tmp_path: Path) -> None:
    store = CommitStepStore(tmp_path)
    body = {"job": "job", "dataset": "ds", "run_id": "r", "created": "now", "attempts": 0,
            "steps": [{"type": "os.system", "args": {"command": "rm -rf /"}}]}
    path = store.path("job", "ds")
    path.parent.mkdir(parents=True)
    path.write_bytes(encode(body))  # a well-formed record naming an unregistered type
    with pytest.raises(CorruptCommitRecordError, match=r"'os.system', which is not registered"):
        store.get("job", "ds")


@dataclass
class TouchStep(CommitStep):
    type_name: ClassVar[str] = "touch"
    path: str

    def verify(self) -> bool:
        return Path(self.path).exists()

    def execute(self) -> None:
        Path(self.path).touch()

    def describe(self) -> str:
        return f"touch {self.path}"


def test_a_declared_step_type_round_trips(tmp_path: Path) -> None:
    store = CommitStepStore(tmp_path, StepRegistry([TouchStep]))
    store.put(CommitSequence(job="job", dataset="ds", run_id="r", steps=[TouchStep(str(tmp_path / "x"))]))
    seq = store.get("job", "ds")
    replay(store, seq)
    assert (tmp_path / "x").exists()
    with pytest.raises(CorruptCommitRecordError, match="not registered"):
        CommitStepStore(tmp_path).put(CommitSequence(job="job", dataset="ds", run_id="r", steps=[TouchStep("y")]))


def test_record_files_are_readable_json(tmp_path: Path) -> None:
    store = CommitStepStore(tmp_path)
    store.put(_sequence(tmp_path))
    doc = json.loads(store.path("job", "ds").read_text())
    assert doc["format"] == 1 and [s["type"] for s in doc["body"]["steps"]] == ["fs_rename", "high_watermark", "dataset_state"]
