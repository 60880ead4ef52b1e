"""The built-in commit steps: publish a file, set watermarks, persist the dataset's state."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from gobblin_py.api.commit_step import CommitStep, StepStatus
from gobblin_py.api.types import WatermarkValue
from gobblin_py.commit.crashpoints import crash_point
from gobblin_py.errors import CommitError
from gobblin_py.fs import Location, filesystem_for, transfer
from gobblin_py.fs.local import LocalFileSystem
from gobblin_py.state.store import DatasetStateFile, WatermarkFile


@dataclass
class FsRenameCommitStep(CommitStep):
    """Move one file from task output to job output by an atomic rename (local disk, HDFS).

    Done only when the source is gone and the destination has the recorded size and checksum:
    a stale or partial destination is never mistaken for a published file.
    """

    type_name: ClassVar[str] = "fs_rename"
    src: str
    dst: str
    size: int
    checksum: str

    def __post_init__(self) -> None:  # stored as plain strings; a Location names its filesystem
        self.src, self.dst = Location(self.src), Location(self.dst)

    def _dst_matches(self) -> bool:
        fs = filesystem_for(self.dst)
        return fs.size(self.dst) == self.size and fs.checksum(self.dst) == self.checksum

    def _src_exists(self) -> bool:
        return filesystem_for(self.src).exists(self.src)

    def verify(self) -> bool:
        return not self._src_exists() and self._dst_matches()

    def status(self) -> StepStatus:
        if self._src_exists():
            return StepStatus.PENDING
        return StepStatus.DONE if self._dst_matches() else StepStatus.LOST

    def execute(self) -> None:
        if not self._src_exists():
            if self._dst_matches():
                return
            raise CommitError(f"cannot publish {self.dst}: its task output {self.src} is gone and the destination does not hold it")
        self._move(self.src, self.dst)

    def _move(self, src: Location, dst: Location) -> None:
        filesystem_for(dst).rename(src, dst)  # atomic; replaces a stale or partial destination; the sequence fsyncs the directory

    def deferred_sync_dir(self) -> str | None:
        return filesystem_for(self.dst).sync_dir(self.dst.parent)

    def describe(self) -> str:
        return f"publish {self.dst} ({self.size} bytes, crc32c {self.checksum})"


@dataclass
class FsCopyCommitStep(FsRenameCommitStep):
    """Publish one file where rename is not atomic (object stores, or across filesystems):
    copy, read the copy back and check its size and CRC32C, and only then delete the source.

    A crash anywhere leaves the source in place, so a replay copies again or, finding a matching
    destination, just deletes the source.
    """

    type_name: ClassVar[str] = "fs_copy"

    def _move(self, src: Location, dst: Location) -> None:
        if not self._dst_matches():
            transfer(src, dst)
            if not self._dst_matches():
                raise CommitError(f"copy of {self.src} to {self.dst} does not hold the recorded {self.size} bytes "
                                  f"with crc32c {self.checksum}; the source is kept and the copy is retried on recovery")
        crash_point("commit.copy_verified")
        filesystem_for(src).delete(src)

    def describe(self) -> str:
        return f"copy, verify and publish {self.dst} ({self.size} bytes, crc32c {self.checksum})"


def publish_step(src: str, dst: str, size: int, checksum: str) -> FsRenameCommitStep:
    """The step that publishes `src` at `dst`: a rename where one filesystem renames atomically, else copy-then-verify."""
    s, d = Location(src), Location(dst)
    fs = filesystem_for(d)
    same = s.scheme == d.scheme and (not d.is_local or LocalFileSystem.same_device(s, d))
    cls = FsRenameCommitStep if same and fs.atomic_rename else FsCopyCommitStep
    return cls(src=str(s), dst=str(d), size=size, checksum=checksum)


@dataclass
class HighWatermarkCommitStep(CommitStep):
    """Set the committed watermark of some keys (a partition, a file set) of one dataset."""

    type_name: ClassVar[str] = "high_watermark"
    state_dir: str
    dataset: str
    watermarks: dict[str, WatermarkValue]

    def _file(self) -> WatermarkFile:
        return WatermarkFile(Path(self.state_dir), self.dataset)

    def verify(self) -> bool:
        current = self._file().read()
        return all(k in current and current[k] == v for k, v in self.watermarks.items())

    def execute(self) -> None:
        f = self._file()
        current = f.read()
        current.update(self.watermarks)
        f.write(current)

    def describe(self) -> str:
        keys = list(self.watermarks)
        shown = ", ".join(f"{k}={self.watermarks[k]}" for k in keys[:3]) + (f", … ({len(keys)} keys)" if len(keys) > 3 else "")
        return f"set watermarks of {self.dataset}: {shown}"


@dataclass
class DatasetStateCommitStep(CommitStep):
    """Persist the dataset's state for this run; always the last step of a sequence."""

    type_name: ClassVar[str] = "dataset_state"
    state_dir: str
    dataset: str
    run_id: str
    state: dict[str, Any]

    def _file(self) -> DatasetStateFile:
        return DatasetStateFile(Path(self.state_dir), self.dataset)

    def verify(self) -> bool:
        current = self._file().read()
        return current is not None and current.get("run_id") == self.run_id

    def execute(self) -> None:
        self._file().write({**self.state, "run_id": self.run_id, "dataset": self.dataset})

    def describe(self) -> str:
        return f"persist state of {self.dataset} for run {self.run_id}"


BUILTIN_STEPS: tuple[type[CommitStep], ...] = (FsRenameCommitStep, FsCopyCommitStep, HighWatermarkCommitStep, DatasetStateCommitStep)
