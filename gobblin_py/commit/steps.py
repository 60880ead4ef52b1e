"""The job's own commit steps: set a dataset's watermarks, persist its state, record a partition's compaction (the
file steps are in `fs.publish_steps` and `fs.exchange_steps`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from gobblin_py.api.commit_step import CommitStep
from gobblin_py.api.types import WatermarkValue
from gobblin_py.errors import CommitError, StateStoreError
from gobblin_py.fs.conditional import Conflict
from gobblin_py.fs.delete_steps import FsDeleteCommitStep
from gobblin_py.fs.exchange_steps import FsExchangeDirsCommitStep, FsRemoveReplacedCommitStep, FsStageCommitStep
from gobblin_py.fs.publish_steps import FsCopyCommitStep, FsRenameCommitStep, publish_step
from gobblin_py.state.store import CompactionFile, DatasetStateFile, WatermarkFile


def _write_over(file: WatermarkFile | DatasetStateFile, body: dict[str, Any], version: str | None, what: str) -> None:
    """`file.replace`, a lost race named for the operator: another driver wrote the file since this step read it."""
    try:
        file.replace(body, version)
    except Conflict:
        raise CommitError(f"{what} changed while this step wrote it: another driver of the job committed meanwhile (it "
                          "holds the lease now); nothing was written, and the next run recovers this commit") from None


@dataclass
class HighWatermarkCommitStep(CommitStep):
    """Set the committed watermark of some keys (a partition, a file set) of one dataset.

    The file also holds the dataset's other keys, which this step does not know: on an unreadable file it
    refuses (naming the file) rather than rewrite it with only its own keys, which would silently move the
    other keys back to their start and re-extract, i.e. duplicate, what they had committed.
    """

    type_name: ClassVar[str] = "high_watermark"
    state_dir: str
    dataset: str
    watermarks: dict[str, WatermarkValue]

    def paths(self) -> list[str]:
        return [self.state_dir]

    def _file(self) -> WatermarkFile:
        return WatermarkFile(self.state_dir, self.dataset)

    def _current(self) -> tuple[dict[str, WatermarkValue], str | None]:
        """The file's watermarks and the version they were read at."""
        try:
            return self._file().read_versioned()
        except StateStoreError as exc:
            raise CommitError(f"{exc} (this commit does not rewrite it: the file also holds keys the commit does not set; "
                              f"a state reset needs the commit abandoned first: `gobblin-py recover JOB.yaml --dataset "
                              f"{self.dataset} --abandon`)") from None

    def verify(self) -> bool:
        current, _ = self._current()
        return all(k in current and current[k] == v for k, v in self.watermarks.items())

    def execute(self) -> None:
        """Read, merge, and write back only if the file is still the one read: a driver that paused in between, and
        whose lease was taken over, would otherwise move back keys the new holder committed since (its next run
        reading those records again)."""
        current, version = self._current()
        current.update(self.watermarks)
        file = self._file()
        _write_over(file, file.body(current), version, f"watermark file {file.path} of {self.dataset}")

    def describe(self) -> str:
        keys = list(self.watermarks)
        shown = ", ".join(f"{k}={self.watermarks[k]}" for k in keys[:3]) + (f", … ({len(keys)} keys)" if len(keys) > 3 else "")
        return f"set watermarks of {self.dataset}: {shown}"


@dataclass
class DatasetStateCommitStep(CommitStep):
    """Persist the dataset's state for this run; always the last step of a sequence.

    The step holds the whole state it writes, so an unreadable state file is simply not done yet and is rewritten.
    """

    type_name: ClassVar[str] = "dataset_state"
    state_dir: str
    dataset: str
    run_id: str
    state: dict[str, Any]

    def paths(self) -> list[str]:
        return [self.state_dir]

    def _file(self) -> DatasetStateFile:
        return DatasetStateFile(self.state_dir, self.dataset)

    def verify(self) -> bool:
        try:
            current = self._file().read()
        except StateStoreError:
            return False
        return current is not None and current.get("run_id") == self.run_id

    def execute(self) -> None:
        """Written only over the version just read: a driver paused in between, whose lease was taken over, must not
        put its older state (the positions' identities, a table's pinned commit) over the new holder's."""
        file = self._file()
        _write_over(file, file.body({**self.state, "run_id": self.run_id, "dataset": self.dataset}), file.version(),
                    f"state file {file.path} of {self.dataset}")

    def describe(self) -> str:
        return f"persist state of {self.dataset} for run {self.run_id}"


@dataclass
class CompactionStateCommitStep(DatasetStateCommitStep):
    """Record one partition's compaction (which run, files and records in and out, duplicates removed) beside the
    dataset's state, one file per partition; the last step of a compaction's sequence, as the state step is of a run's."""

    type_name: ClassVar[str] = "compaction_state"
    partition: str = ""

    def _file(self) -> CompactionFile:  # type: ignore[override]
        return CompactionFile(self.state_dir, self.dataset, self.partition)

    def describe(self) -> str:
        return f"record the compaction of {self.dataset} partition {self.partition} by run {self.run_id}"


__all__ = ["BUILTIN_STEPS", "CompactionStateCommitStep", "DatasetStateCommitStep", "FsCopyCommitStep", "FsRenameCommitStep", "HighWatermarkCommitStep", "publish_step"]

BUILTIN_STEPS: tuple[type[CommitStep], ...] = (FsRenameCommitStep, FsCopyCommitStep, HighWatermarkCommitStep, DatasetStateCommitStep,
                                               FsStageCommitStep, FsExchangeDirsCommitStep, FsRemoveReplacedCommitStep,
                                               CompactionStateCommitStep, FsDeleteCommitStep)
