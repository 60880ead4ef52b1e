"""The built-in commit steps: publish a file, set watermarks, persist the dataset's state."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from gobblin_py.api.commit_step import CommitStep, StepStatus
from gobblin_py.api.types import WatermarkValue
from gobblin_py.durable import file_checksum
from gobblin_py.errors import CommitError
from gobblin_py.state.store import DatasetStateFile, WatermarkFile


@dataclass
class FsRenameCommitStep(CommitStep):
    """Move one file from task output to job output.

    Done only when the source is gone and the destination has the recorded size and checksum:
    a stale or partial destination is never mistaken for a published file.
    """

    type_name: ClassVar[str] = "fs_rename"
    src: str
    dst: str
    size: int
    checksum: str

    def _dst_matches(self) -> bool:
        try:
            if os.stat(self.dst).st_size != self.size:
                return False
        except FileNotFoundError:
            return False
        return file_checksum(Path(self.dst)) == self.checksum

    def verify(self) -> bool:
        return not os.path.exists(self.src) and self._dst_matches()

    def status(self) -> StepStatus:
        if os.path.exists(self.src):
            return StepStatus.PENDING
        return StepStatus.DONE if self._dst_matches() else StepStatus.LOST

    def execute(self) -> None:
        dst = Path(self.dst)
        if not os.path.exists(self.src):
            if self._dst_matches():
                return
            raise CommitError(f"cannot publish {self.dst}: its task output {self.src} is gone and the destination does not hold it")
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.replace(self.src, dst)  # atomic; replaces a stale or partial destination; the sequence fsyncs the directory

    def deferred_sync_dir(self) -> str | None:
        return str(Path(self.dst).parent)

    def describe(self) -> str:
        return f"publish {self.dst} ({self.size} bytes, crc32c {self.checksum})"


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


BUILTIN_STEPS: tuple[type[CommitStep], ...] = (FsRenameCommitStep, HighWatermarkCommitStep, DatasetStateCommitStep)
