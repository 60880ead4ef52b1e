"""The file-publishing commit steps any publisher may use: move one committable from task output to where it is
published, by atomic rename or by copy-then-verify, never replacing a file it did not write."""

from __future__ import annotations

import errno
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from gobblin_py.api.commit_step import CommitStep, StepStatus
from gobblin_py.crashpoints import crash_point
from gobblin_py.durable import fsync_dir
from gobblin_py.errors import CommitError
from gobblin_py.fs import Location, filesystem_for, transfer
from gobblin_py.fs.local import LocalFileSystem


@dataclass
class FsRenameCommitStep(CommitStep):
    """Move one file from task output to job output by an atomic rename (local disk, HDFS).

    Never replaces a file it did not write: the destination is absent, or byte-identical to the recorded
    committable (size and CRC32C: the idempotent replay, which only removes the source). Any other file there
    is foreign, since our own interrupted publishing never leaves a partial file at that name (a rename is
    atomic, an S3 put too, a local copy goes to a temp name first); the step then fails naming both paths.
    Done only when the source is gone and the destination matches. Across mounts of one disk (EXDEV) it
    copies, verifies and then deletes the source, as `fs_copy` does.

    `preexisting` records that the destination already held this very committable when the sequence was built
    (`publish_step`): another commit's file, as when a range read again after `state reset` writes files of the
    names it published before. Publishing then only removes the source, and abandoning never withdraws that file:
    it is not this step's to undo (an earlier commit owns it, a table may list it).
    """

    type_name: ClassVar[str] = "fs_rename"
    src: str
    dst: str
    size: int
    checksum: str
    preexisting: bool = False  # absent from records written before it: False, the destination taken for this step's own

    def __post_init__(self) -> None:  # stored as plain strings; a Location names its filesystem
        self.src, self.dst = Location(self.src), Location(self.dst)

    def paths(self) -> list[str]:
        return [self.src, self.dst]

    def _dst_matches(self) -> bool:
        fs = filesystem_for(self.dst)
        return fs.size(self.dst) == self.size and fs.checksum(self.dst) == self.checksum

    def _dst_exists(self) -> bool:
        return filesystem_for(self.dst).exists(self.dst)

    def _src_exists(self) -> bool:
        return filesystem_for(self.src).exists(self.src)

    def verify(self) -> bool:
        return not self._src_exists() and self._dst_matches()

    def status(self) -> StepStatus:
        """CONFLICT when the source is there but a file this job did not write is at the destination."""
        if self._src_exists():
            return StepStatus.CONFLICT if self.conflict() is not None else StepStatus.PENDING
        return StepStatus.DONE if self._dst_matches() else StepStatus.LOST

    def conflict(self) -> str | None:
        """Why `execute()` cannot succeed although the source is there (a foreign destination), else None."""
        if self._src_exists() and self._dst_exists() and not self._dst_matches():
            return f"{self.dst} holds a file this job did not write"
        return None

    def _foreign(self) -> CommitError:
        found = filesystem_for(self.dst).size(self.dst)
        return CommitError(
            f"cannot publish {self.src} at {self.dst}: the destination already holds a different file ({found} bytes; "
            f"this job's is {self.size} bytes with crc32c {self.checksum}), which this job did not write (another job or "
            "input wrote it). Nothing was replaced: move that file away or change the publisher's final_dir, then run "
            "`gobblin-py recover JOB.yaml --dataset DATASET`")

    def execute(self) -> None:
        src_there = self._src_exists()
        if self._dst_exists():
            if not self._dst_matches():
                if src_there:
                    raise self._foreign()
                raise CommitError(f"cannot publish {self.dst}: its task output {self.src} is gone and the destination does not hold it")
            if src_there:  # the replay of a publish interrupted after the destination was complete
                filesystem_for(self.src).delete(self.src)
            return
        if not src_there:
            raise CommitError(f"cannot publish {self.dst}: its task output {self.src} is gone and the destination does not hold it")
        self._move(self.src, self.dst)

    def _move(self, src: Location, dst: Location) -> None:
        """Rename (the sequence fsyncs the directory); where the kernel refuses across mounts, copy-then-verify."""
        try:
            filesystem_for(dst).rename(src, dst)
        except FileExistsError:
            raise self._foreign() from None  # appeared since execute() looked
        except OSError as exc:
            if exc.errno != errno.EXDEV:  # bind mounts of one disk share st_dev, yet rename between them fails
                raise
            self._copy_then_verify(src, dst)

    def _copy_then_verify(self, src: Location, dst: Location) -> None:
        """Copy to the absent `dst`, read it back, check size and CRC32C, and only then delete the source."""
        try:
            transfer(src, dst)
        except FileExistsError:
            raise self._foreign() from None
        if not self._dst_matches():
            raise CommitError(f"copy of {self.src} to {self.dst} does not hold the recorded {self.size} bytes "
                              f"with crc32c {self.checksum}; the source is kept and the copy is retried on recovery")
        crash_point("commit.copy_verified")
        filesystem_for(src).delete(src)

    def withdraw(self, dry_run: bool = False) -> str | None:
        """Remove the published file when it is still exactly the committable (size and CRC32C) and this step put it
        there; a file it found there (`preexisting`) is another commit's and stays; a different file there is not ours and
        stops the abandon."""
        if self.preexisting or not self._dst_exists():
            return None
        if not self._dst_matches():
            raise CommitError(f"{self.dst} holds a file this job did not write; nothing was removed: move it away first")
        if not dry_run:
            fs = filesystem_for(self.dst)
            fs.delete(self.dst)
            directory = fs.sync_dir(self.dst.parent)
            if directory is not None:
                fsync_dir(Path(directory))
        return f"published {self.dst} ({self.size} bytes, crc32c {self.checksum})"

    def deferred_sync_dir(self) -> str | None:
        return filesystem_for(self.dst).sync_dir(self.dst.parent)

    def describe(self) -> str:
        return f"publish {self.dst} ({self.size} bytes, crc32c {self.checksum}{self._found_note()})"

    def _found_note(self) -> str:
        return "; found there already, an earlier commit's: never withdrawn" if self.preexisting else ""


@dataclass
class FsCopyCommitStep(FsRenameCommitStep):
    """Publish one file where rename is not atomic (object stores, or across filesystems):
    copy, read the copy back and check its size and CRC32C, and only then delete the source.

    A crash anywhere leaves the source in place, so a replay copies again or, finding a matching
    destination, just deletes the source. As for `fs_rename`, a destination holding anything else is
    foreign and is never replaced (a put is atomic on object stores; a local copy is written to a temp
    name and moved into place, so an interrupted copy of ours never sits at the destination name).
    """

    type_name: ClassVar[str] = "fs_copy"

    def _move(self, src: Location, dst: Location) -> None:
        self._copy_then_verify(src, dst)

    def describe(self) -> str:
        return f"copy, verify and publish {self.dst} ({self.size} bytes, crc32c {self.checksum}{self._found_note()})"


def step_kind(src: str, dst: str) -> type[FsRenameCommitStep]:
    """A rename where one filesystem holds both and renames atomically, else copy-then-verify."""
    s, d = Location(src), Location(dst)
    same = s.scheme == d.scheme and (not d.is_local or LocalFileSystem.same_device(s, d))
    return FsRenameCommitStep if same and filesystem_for(d).atomic_rename else FsCopyCommitStep


def publish_step(src: str, dst: str, size: int, checksum: str) -> FsRenameCommitStep:
    """The step that publishes `src` at `dst`: a rename where one filesystem renames atomically, else copy-then-verify;
    built with the sequence, before anything of it runs, so a destination already holding the committable is marked
    `preexisting` (another commit's file, never withdrawn by an abandon)."""
    step = step_kind(src, dst)(src=str(Location(src)), dst=str(Location(dst)), size=size, checksum=checksum)
    step.preexisting = step._dst_exists() and step._dst_matches()
    return step
