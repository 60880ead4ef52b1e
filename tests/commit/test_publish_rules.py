"""Publishing never replaces a file it did not write, copes with bind mounts, keeps file modes, and makes
every new directory durable before the watermark moves."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from gobblin_py import durable
from gobblin_py.api import StepStatus
from gobblin_py.commit import inspect as inspection
from gobblin_py.commit import protocol
from gobblin_py.commit.recovery import Outcome, recover
from gobblin_py.commit.sequence import CommitSequence
from gobblin_py.commit.steps import (
    DatasetStateCommitStep,
    FsCopyCommitStep,
    FsRenameCommitStep,
    HighWatermarkCommitStep,
    publish_step,
)
from gobblin_py.commit.store import CommitStepStore
from gobblin_py.durable import file_checksum
from gobblin_py.errors import CommitError
from gobblin_py.state.store import StateStore, WatermarkFile


def _task_file(root: Path, content: bytes = b"our committable", name: str = "f.avro") -> Path:
    src = root / "task-output" / "run" / name
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_bytes(content)
    return src


def _sequence(root: Path, step: FsRenameCommitStep) -> CommitSequence:
    state_dir = str(root / "state" / "job")
    return CommitSequence(job="job", dataset="ds", run_id="r1", steps=[
        step,
        HighWatermarkCommitStep(state_dir=state_dir, dataset="ds", watermarks={"k": 1}),
        DatasetStateCommitStep(state_dir=state_dir, dataset="ds", run_id="r1", state={}),
    ])


@pytest.mark.parametrize("cls", [FsRenameCommitStep, FsCopyCommitStep])
def test_a_foreign_destination_is_never_replaced_and_the_dataset_stays_pending(tmp_path: Path, cls: type) -> None:
    src = _task_file(tmp_path)
    dst = tmp_path / "output" / "ds" / "f.avro"
    dst.parent.mkdir(parents=True)
    dst.write_bytes(b"another job's data")
    store = CommitStepStore(tmp_path)
    seq = _sequence(tmp_path, cls(src=str(src), dst=str(dst), size=src.stat().st_size, checksum=file_checksum(src)))
    store.put(seq)

    report = recover(store, "job", max_attempts=3)
    (rec,) = report.datasets
    assert rec.outcome is Outcome.FAILED
    assert f"cannot publish {src} at {dst}: the destination already holds a different file" in rec.message
    assert "move that file away or change the publisher's final_dir" in rec.message and "gobblin-py recover" in rec.message
    assert dst.read_bytes() == b"another job's data" and src.read_bytes() == b"our committable"
    assert StateStore(tmp_path, "job").watermarks() == {}  # not committed
    (view,) = inspection.pending(store, ["job"])
    assert view.attempts == 1 and view.steps[0].status == "conflict" and str(dst) in view.steps[0].description

    dst.rename(tmp_path / "moved-away.avro")  # what the operator does
    assert recover(store, "job", max_attempts=3).datasets[0].outcome is Outcome.RECOVERED
    assert dst.read_bytes() == b"our committable" and not src.exists()


@pytest.mark.parametrize("cls", [FsRenameCommitStep, FsCopyCommitStep])
def test_a_destination_holding_the_same_committable_is_the_replay(tmp_path: Path, cls: type) -> None:
    src = _task_file(tmp_path)
    dst = tmp_path / "output" / "f.avro"
    dst.parent.mkdir(parents=True)
    dst.write_bytes(src.read_bytes())  # left by our own run killed after the copy, before the source was deleted
    step = cls(src=str(src), dst=str(dst), size=src.stat().st_size, checksum=file_checksum(src))
    assert step.status() is StepStatus.PENDING
    step.execute()
    assert step.verify() and not src.exists() and dst.read_bytes() == b"our committable"


def test_a_foreign_file_with_the_source_gone_is_lost(tmp_path: Path) -> None:
    src = _task_file(tmp_path)
    step = FsRenameCommitStep(src=str(src), dst=str(tmp_path / "output" / "f.avro"), size=15, checksum=file_checksum(src))
    src.unlink()
    Path(step.dst).parent.mkdir(parents=True)
    Path(step.dst).write_bytes(b"something else")
    assert step.status() is StepStatus.LOST
    with pytest.raises(CommitError, match="is gone and the destination does not hold it"):
        step.execute()
    assert Path(step.dst).read_bytes() == b"something else"


def test_published_files_have_the_task_output_mode_by_rename_and_by_copy(tmp_path: Path) -> None:
    modes = {}
    for cls in (FsRenameCommitStep, FsCopyCommitStep):
        src = _task_file(tmp_path, name=f"{cls.type_name}.avro")
        os.chmod(src, 0o640)
        dst = tmp_path / "output" / src.name
        cls(src=str(src), dst=str(dst), size=src.stat().st_size, checksum=file_checksum(src)).execute()
        modes[cls.type_name] = stat.S_IMODE(dst.stat().st_mode)
    assert modes == {"fs_rename": 0o640, "fs_copy": 0o640}


def test_rename_between_bind_mounts_of_one_disk_copies_then_verifies(tmp_path: Path, mount) -> None:
    real = tmp_path / "disk" / "task-output"
    real.mkdir(parents=True)
    bound = mount(["--bind", str(real)], tmp_path / "task-output")  # same st_dev, another mount: rename gives EXDEV
    src = bound / "run" / "f.avro"
    src.parent.mkdir(parents=True)
    src.write_bytes(b"across mounts")
    dst = tmp_path / "output" / "f.avro"
    step = publish_step(str(src), str(dst), src.stat().st_size, file_checksum(src))
    assert isinstance(step, FsRenameCommitStep) and not isinstance(step, FsCopyCommitStep)  # one device: a rename is chosen
    step.execute()
    assert step.verify() and dst.read_bytes() == b"across mounts" and not src.exists()
    assert [p.name for p in dst.parent.iterdir()] == ["f.avro"]  # no temp file left beside it


def test_every_new_directory_is_durable_before_the_watermark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    real_fsync_dir, real_replace = durable.fsync_dir, WatermarkFile.replace

    def fsync_dir(path: Path) -> None:
        events.append(f"fsync {Path(path).relative_to(tmp_path)}")
        real_fsync_dir(path)

    def replace(self: WatermarkFile, body: dict, version: str | None) -> None:  # the step's write
        events.append("watermark")
        real_replace(self, body, version)

    monkeypatch.setattr(durable, "fsync_dir", fsync_dir)
    monkeypatch.setattr(protocol, "fsync_dir", fsync_dir)
    monkeypatch.setattr(WatermarkFile, "replace", replace)
    (tmp_path / "output").mkdir()
    src = _task_file(tmp_path)
    dst = tmp_path / "output" / "ds" / "2026" / "01" / "02" / "f.avro"
    seq = _sequence(tmp_path, FsRenameCommitStep(src=str(src), dst=str(dst), size=src.stat().st_size, checksum=file_checksum(src)))
    store = CommitStepStore(tmp_path)
    protocol.commit_sequence(store, seq)
    before = events[events.index("fsync commits/job") + 1:events.index("watermark")]
    assert set(before) >= {"fsync output", "fsync output/ds", "fsync output/ds/2026", "fsync output/ds/2026/01",
                           "fsync output/ds/2026/01/02"}
    assert "fsync state" in events and "fsync state/job" in events  # new state directories too


def test_an_abandon_withdraws_only_the_files_its_own_steps_published(tmp_path: Path) -> None:
    """A range read again after `state reset` names a file an earlier commit published: its step finds it there, the
    same bytes, when the sequence is built. Abandoning that sequence before its watermarks leaves the earlier commit's
    file (a table may list it) and withdraws only what the sequence itself put in place."""
    from gobblin_py.commit.abandon import abandon, plan_abandon

    output = tmp_path / "output"
    earlier, ours = output / "earlier.avro", output / "ours.avro"
    output.mkdir()
    earlier.write_bytes(b"the same records")  # the earlier commit's file
    reread, new = _task_file(tmp_path, b"the same records", "earlier.avro"), _task_file(tmp_path, b"new records", "ours.avro")
    steps = [publish_step(str(src), str(dst), src.stat().st_size, file_checksum(src)) for src, dst in ((reread, earlier), (new, ours))]
    assert [s.preexisting for s in steps] == [True, False]
    seq = _sequence(tmp_path, steps[0])
    seq.steps.insert(1, steps[1])
    store = CommitStepStore(tmp_path)
    store.put(seq, new=True)
    protocol.apply_steps(seq.steps[:2], verify_first=True)  # both published; killed before the watermarks
    assert earlier.read_bytes() == b"the same records" and ours.read_bytes() == b"new records"

    loaded = store.get("job", "ds")  # what `recover --abandon` reads: the record remembers which file was found there
    assert plan_abandon(loaded).withdraws == [f"published {ours} ({len(b'new records')} bytes, crc32c {file_checksum(ours)})"]
    abandon(store, loaded)
    assert earlier.read_bytes() == b"the same records" and not ours.exists()
    assert StateStore(tmp_path, "job").watermarks() == {}
