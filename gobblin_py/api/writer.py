"""DataWriter: writes a branch's records to staging and hands over committables."""

from __future__ import annotations

import abc
import enum
import os
import typing
from dataclasses import dataclass
from pathlib import Path

from gobblin_py.api.plugin import Plugin
from gobblin_py.api.types import Record, Schema
from gobblin_py.durable import file_checksum, fsync_dir, fsync_file, makedirs_durably
from gobblin_py.fs import Location, filesystem_for


class Delivery(str, enum.Enum):
    """The delivery guarantee a writer or publisher supports, and a job asks for."""

    EXACTLY_ONCE = "exactly_once"
    AT_LEAST_ONCE = "at_least_once"


@dataclass(frozen=True)
class OutputFile:
    """A committable: one file in task output and where it is published, with what it holds.

    `rel_path` is relative to the publisher's final directory; `size` and `checksum` let a
    commit step tell a complete published file from a stale or partial one.
    """

    path: str
    rel_path: str
    records: int
    size: int
    checksum: str
    kind: str = "data"  # "data" | "errors"


@dataclass(frozen=True)
class WriterTarget:
    """Where a writer puts its files: a private staging dir, and the names to give them.

    Files are written under `staging_dir/<rel_dir>/...`; `file_stem` is deterministic
    (it comes from the WorkUnit) so the same range always yields the same names.
    """

    staging_dir: Path
    task_output_dir: Location
    rel_dir: str
    file_stem: str

    def __post_init__(self) -> None:  # a Path is accepted too
        object.__setattr__(self, "task_output_dir", Location(self.task_output_dir))


def commit_staged(staged: Path, dest: Location | Path, rel_path: str, records: int, kind: str = "data") -> OutputFile:
    """Move a closed staged file into task output (fsynced there, or uploaded to a remote store and checked),
    and describe it as a committable."""
    dest = Location(dest)
    size, checksum = staged.stat().st_size, file_checksum(staged)
    if dest.is_local:
        fsync_file(staged)
        makedirs_durably(dest.path.parent)
        os.replace(staged, dest)
        fsync_dir(dest.path.parent)  # the entry is durable before a commit record names it
    else:
        fs = filesystem_for(dest)
        fs.put(staged, dest)
        uploaded = fs.size(dest)
        if uploaded != size:
            raise OSError(f"upload of {staged} to {dest} left {uploaded} bytes, not {size}")
        staged.unlink()
    return OutputFile(path=str(dest), rel_path=rel_path, records=records, size=size, checksum=checksum, kind=kind)


class DataWriter(Plugin, abc.ABC):
    """Writes records of one branch of one task; the framework owns `commit`."""

    guarantee: typing.ClassVar[Delivery] = Delivery.EXACTLY_ONCE
    """What this writer supports; a job asking for more is refused at validation."""

    @abc.abstractmethod
    def open(self, schema: Schema, target: WriterTarget) -> None:
        """Prepare to write records of `schema` under `target.staging_dir`."""

    @abc.abstractmethod
    def write(self, record: Record) -> None:
        """Write one record."""

    @abc.abstractmethod
    def close(self) -> list[tuple[Path, int]]:
        """Flush and close every file; return each staged file with its record count."""

    def abort(self) -> None:
        """Hook: drop what was written (the framework deletes the staging directory after)."""

    @typing.final
    def commit(self, target: WriterTarget) -> list[OutputFile]:
        """Close, fsync, then move every staged file into task output and describe it as a committable."""
        out: list[OutputFile] = []
        for staged, records in self.close():
            rel = staged.relative_to(target.staging_dir)
            out.append(commit_staged(staged, target.task_output_dir / rel, rel.as_posix(), records))
        return out
