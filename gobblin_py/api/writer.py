"""DataWriter: writes a branch's records to staging and hands over committables."""

from __future__ import annotations

import abc
import enum
import typing
from dataclasses import dataclass
from pathlib import Path

from gobblin_py.api.plugin import Plugin
from gobblin_py.api.types import Record, Schema


class Delivery(str, enum.Enum):
    """The delivery guarantee a writer or publisher supports, and a job asks for."""

    EXACTLY_ONCE = "exactly_once"
    AT_LEAST_ONCE = "at_least_once"


@dataclass(frozen=True)
class OutputFile:
    """A committable: one file in task output and where it is published, with what it holds.

    `rel_path` is relative to the publisher's final directory; `size` and `checksum` let a
    commit step tell a complete published file from a stale or partial one. `branch` names the
    fork branch whose publisher publishes it (error files: the first branch's).
    """

    path: str
    rel_path: str
    records: int
    size: int
    checksum: str
    kind: str = "data"  # "data" | "errors"
    dataset: str = ""
    branch: str = ""


@dataclass(frozen=True)
class WriterTarget:
    """Where a writer puts its files: a private staging dir, and the names to give them.

    Files are written under `staging_dir/<rel_dir>/...`; `file_stem` is deterministic
    (it comes from the WorkUnit) so the same range always yields the same names.
    """

    staging_dir: Path
    task_output_dir: str  # a local path or a URL: where the framework moves the closed files
    rel_dir: str
    file_stem: str
    dataset: str = ""
    branch: str = ""  # the fork branch this writer writes

    def __post_init__(self) -> None:  # a Path is accepted too
        object.__setattr__(self, "task_output_dir", str(self.task_output_dir))


class DataWriter(Plugin, abc.ABC):
    """Writes records of one branch of one task; the framework then moves the files `close` returns into task
    output and describes them as committables (`runtime.committables.commit_writer`)."""

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
