"""DataWriter: writes a branch's records to staging and hands over committables."""

from __future__ import annotations

import abc
import enum
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

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

    needs_avro_schema: typing.ClassVar[bool] = False
    """True when `open` needs an Avro record schema: validation refuses a job where nothing before it gives one."""

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


@dataclass(frozen=True)
class DedupSpec:
    """`--dedup-key`: one record per value of `key` in each merged partition; `keep` the latest or the first by
    `order_by` (without it, by the order the files were written in)."""

    key: str
    keep: Literal["latest", "first"] = "latest"
    order_by: str | None = None
    key_from: str = field(default="--dedup-key", compare=False)
    """Where `key` was given, for messages: the option or the job file's key (`compaction.dedup.key`)."""
    order_by_from: str = field(default="--order-by", compare=False)


@dataclass(frozen=True, kw_only=True)
class MergeSpec:
    """One partition's files to merge, as `gobblin-py compact` hands them to the writer class that wrote them."""

    partition: str
    """Where the partition is (`clicks/2026/01/01`, `events.clicks/ts_day=2026-01-01`), for messages."""
    inputs: tuple[str, ...]
    """Each file's path or URL, oldest first: the newest file's schema is the merged files' schema."""
    input_bytes: int
    target_bytes: int
    dedup: DedupSpec | None = None
    records: int | None = None
    """The inputs' records when the caller already knows them (a table's manifests count them), else None."""


@dataclass(frozen=True)
class MergedFiles:
    """What a merge wrote: each closed staged file with its records (as `DataWriter.close` returns them), and how
    many records it read, so the framework can check that a merge without dedup lost none."""

    files: list[tuple[Path, int]]
    records_in: int


class FileMerger(abc.ABC):
    """Mixed into a DataWriter whose files `gobblin-py compact` can merge: the format's own way of rewriting one
    partition's files as fewer files near a target size (as Flink keeps its per-format compactors with the format)."""

    merged_format: typing.ClassVar[str]
    """How messages name the files it merges (`Avro`)."""
    merged_suffix: typing.ClassVar[str]
    """The name ending of the files it merges (`.avro`); any other entry in a partition keeps it from being merged."""
    leaves_own_merge_alone: typing.ClassVar[bool] = False
    """True for a format whose merge re-encodes (Parquet), so the merged files' sizes do not show that they are at the
    target: a partition holding only the files of its last compaction is then left alone rather than merged again."""

    @classmethod
    @abc.abstractmethod
    def merged_fields(cls, inputs: tuple[str, ...]) -> list[str]:
        """Hook: the top-level fields of the records a merge of `inputs` (oldest first) reads, so `compact` refuses a
        dedup key or order-by that names none of them before anything is written."""

    @classmethod
    @abc.abstractmethod
    def merge_files(cls, settings: typing.Any, spec: MergeSpec, target: WriterTarget) -> MergedFiles:
        """Hook: write the records of `spec.inputs` (one per key under `spec.dedup`) as this writer writes them with
        `settings` (its partitioning and rolling aside) into files near `spec.target_bytes` under `target.staging_dir`,
        named from `target.file_stem`, and close them; on failure, drop what was written and raise."""
