"""The commit steps that replace a partition directory's files with compacted ones in one atomic step: the
compacted files are published into a hidden sibling directory (by `fs_rename`), the two directories are
exchanged (`fs_exchange_dirs`), and the sibling, now holding the replaced files, is removed (`fs_remove_replaced`).

A reader opening the partition sees the files before or the files after, never both and never neither.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from gobblin_py.api.commit_step import CommitStep, StepStatus
from gobblin_py.durable import exchange_dirs, fsync_dir
from gobblin_py.errors import CommitError
from gobblin_py.fs.location import Location
from gobblin_py.fs.publish_steps import FsRenameCommitStep
from gobblin_py.fs.registry import filesystem_for


def _names(directory: Path) -> set[str]:
    try:
        return set(os.listdir(directory))
    except FileNotFoundError:
        return set()


@dataclass
class FsStageCommitStep(FsRenameCommitStep):
    """`fs_rename` of a compacted file into the hidden sibling `dst`; also done once the exchange has carried it
    on to `final` (its name in the partition), so a replay after the exchange does not look for it in `dst`."""

    type_name: ClassVar[str] = "fs_stage"
    final: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.final = Location(self.final)

    def paths(self) -> list[str]:
        return [self.src, self.dst, self.final]

    def _carried_on(self) -> bool:
        fs = filesystem_for(self.final)
        return fs.size(self.final) == self.size and fs.checksum(self.final) == self.checksum

    def status(self) -> StepStatus:
        if not self._src_exists() and self._carried_on():
            return StepStatus.DONE
        return super().status()

    def verify(self) -> bool:
        return super().verify() or (not self._src_exists() and self._carried_on())

    def deferred_sync_dir(self) -> str | None:
        """The sibling's fsync, as `fs_rename`'s; none once the replaced files were removed with it (a replay)."""
        return super().deferred_sync_dir() if os.path.isdir(self.dst.parent) else None

    def execute(self) -> None:
        if not self._src_exists() and self._carried_on():
            return
        super().execute()

    def describe(self) -> str:
        return f"stage {self.dst} ({self.size} bytes, crc32c {self.checksum}) to replace the files of its partition"


@dataclass
class FsExchangeDirsCommitStep(CommitStep):
    """Exchange `partition` (holding `replaced`) with `staged` (holding `published`), atomically.

    A file in the partition that is not one of `replaced` (a late file an ingestion published after the
    compaction listed the partition) is hard-linked into `staged` first, so it is in the partition before
    and after the exchange, and the next compaction merges it. Done when the partition holds every
    `published` file (their names, unique to this compaction, were never in the partition before).
    """

    type_name: ClassVar[str] = "fs_exchange_dirs"
    partition: str
    staged: str
    published: list[str]
    replaced: list[str] = field(default_factory=list)

    def paths(self) -> list[str]:
        return [self.partition, self.staged]

    def verify(self) -> bool:
        there = _names(Path(self.partition))
        return all(name in there for name in self.published)

    def execute(self) -> None:
        partition, staged = Path(self.partition), Path(self.staged)
        in_staged = _names(staged)
        missing = [n for n in self.published if n not in in_staged]
        if missing:
            raise CommitError(f"cannot replace the files of {partition}: the compacted files {', '.join(missing[:3])} are "
                              f"not in {staged} (nor in the partition); run the compaction again")
        replaced = set(self.replaced)
        for name in sorted(_names(partition) - replaced):  # late files stay in the partition through the exchange
            src, dst = partition / name, staged / name
            if name in in_staged:
                if dst.exists() and src.exists() and os.path.samefile(src, dst):
                    continue
                raise CommitError(f"cannot replace the files of {partition}: {name} is both a late file there and "
                                  f"a different file in {staged}; nothing was replaced")
            if src.is_dir():
                raise CommitError(f"cannot replace the files of {partition}: it holds a directory {name}, which a "
                                  "compaction does not carry over; nothing was replaced")
            os.link(src, dst)
        fsync_dir(staged)
        try:
            exchange_dirs(partition, staged)
        except OSError as exc:
            raise CommitError(f"cannot replace the files of {partition} atomically: {exc}; compaction of file "
                              "datasets needs a local Linux filesystem with renameat2(RENAME_EXCHANGE) (ext4, xfs, "
                              "btrfs, tmpfs)") from exc

    def describe(self) -> str:
        return f"exchange {self.partition} ({len(self.replaced)} files) with {self.staged} ({len(self.published)} compacted files)"


@dataclass
class FsRemoveReplacedCommitStep(CommitStep):
    """Remove the hidden directory that holds a partition's replaced files after the exchange.

    Refuses while it still holds a compacted file (the exchange has not happened: removing it would lose them).
    """

    type_name: ClassVar[str] = "fs_remove_replaced"
    staged: str
    published: list[str]

    def paths(self) -> list[str]:
        return [self.staged]

    def verify(self) -> bool:
        return not os.path.lexists(self.staged)

    def execute(self) -> None:
        staged = Path(self.staged)
        still = [n for n in self.published if n in _names(staged)]
        if still:
            raise CommitError(f"will not remove {staged}: it still holds the compacted files {', '.join(still[:3])} "
                              "(the partition was not exchanged)")
        shutil.rmtree(staged, ignore_errors=True)
        if os.path.lexists(staged):
            raise CommitError(f"could not remove {staged}")
        fsync_dir(staged.parent)

    def describe(self) -> str:
        return f"remove the replaced files in {self.staged}"
