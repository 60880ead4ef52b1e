"""Shared by the file writers: one open output file per partition path under staging, rolled to a new file by
record count or size (`roll:`), each file's name a pure function of the task, the partition and the roll index."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import Field, model_validator

from gobblin_py.api import Settings, WriterTarget
from gobblin_py.api.batches import ROW_VALUES
from gobblin_py.builtin.writers.time_partitioner import PartitionSettings, TimePartitioner
from gobblin_py.units import ByteSize

H = TypeVar("H")



ROLL_HELP = "start a new file once the open one holds {max_records, max_bytes}: either or both"
"""The `roll:` setting's description, shared by the file writers."""


class RollSettings(Settings):
    """A writer's `roll:`: start a new file of the partition once the open one holds this many records or bytes."""

    max_records: int | None = Field(default=None, ge=1, description="records per file at most")
    max_bytes: ByteSize | None = Field(default=None, description="a file ends once it reaches this size (256MB): it may pass it by one record or block")

    @model_validator(mode="after")
    def _one_limit(self) -> RollSettings:
        if self.max_records is None and self.max_bytes is None:
            raise ValueError("give max_records, max_bytes or both")
        return self


def rolled_name(stem: str, suffix: str, index: int) -> str:
    """The name of a partition's `index`-th file of a task: `<stem><suffix>` for the first (so rolling renames
    nothing that fits one file), `<stem>.r<index><suffix>` after. A stem ends in a 128-bit hex hash, so no
    rolled name is ever another task's stem."""
    return f"{stem}{suffix}" if index == 0 else f"{stem}.r{index}{suffix}"


class PartitionedFiles(Generic[H]):
    """Opens `<staging>/<rel_dir>/<partition>/<stem><suffix>` lazily; counts the records written to each file.

    A record is counted only once its write succeeded, and a file no record was written to is not
    handed over at close, so a refused record never shows in a count or leaves an empty file.

    With `roll`, `handle(key)` closes the partition's open file before the next record once it holds
    `max_records` records or `size_of(handle)` reaches `max_bytes`, and opens the next roll index.
    """

    def __init__(self, target: WriterTarget, suffix: str, partition: PartitionSettings | None,
                 open_file: Callable[[Path], H], close_file: Callable[[H], None],
                 roll: RollSettings | None = None, size_of: Callable[[H], int] | None = None) -> None:
        self.base = target.staging_dir / target.rel_dir
        self.stem, self.suffix = target.file_stem, suffix
        self.partitioner = TimePartitioner(partition) if partition else None
        self._open = open_file
        self._close = close_file
        self.handles: dict[str, H] = {}
        self.counts: dict[str, int] = {}
        self._rolls: dict[str, int] = {}
        self._done: list[tuple[Path, int]] = []  # rolled-over files, closed, in the order they were filled
        self._max_records = roll.max_records if roll else None
        self._max_bytes = roll.max_bytes if roll else None
        if self._max_bytes is not None and size_of is None:
            raise TypeError("a writer that rolls by bytes passes size_of")
        self._size_of = size_of

    def _path(self, key: str) -> Path:
        name = rolled_name(self.stem, self.suffix, self._rolls.get(key, 0))
        return self.base / key / name if key else self.base / name

    def key_for(self, record: dict[str, Any]) -> str:
        """The partition path of `record` (a RecordError when it has none)."""
        return self.partitioner.partition(record) if self.partitioner else ""

    def split(self, batch: Any) -> list[tuple[str, Any]] | None:
        """An Arrow batch's rows by partition, each where `key_for` puts it: `[(key, rows)]`; None when a row has
        no partition the row path would give it the same way (the batch then takes the row path)."""
        if self.partitioner is None:
            return [("", batch)]
        index = batch.schema.get_field_index(self.partitioner.column)
        if index < 0:
            return None
        values = (batch.schema.field(index).metadata or {}).get(ROW_VALUES)
        if values == b"naive-datetime":  # the row path places each by this machine's wall clock
            return None
        parts = self.partitioner.split(batch.column(index), values == b"datetime")
        if parts is None:
            return None
        return [(key, batch if mask is None else batch.filter(mask)) for key, mask in parts]

    def handle(self, key: str, coming: int = 0) -> H:
        """The open file of partition `key` for the next record (opened on first use, rolled when full); the
        caller adds 1 to `counts[key]` per record once the record is written. `coming`: the bytes about to be
        written, where known (an encoded block): the file rolls first if they would take it to `max_bytes`."""
        handle = self.handles.get(key)
        if handle is None:
            return self._open_next(key)
        if self._max_records is None and self._max_bytes is None:
            return handle
        count = self.counts[key]
        if count and ((self._max_records is not None and count >= self._max_records)
                      or (self._max_bytes is not None and self._size_of(handle) + coming >= self._max_bytes)):  # type: ignore[misc]
            self._close(handle)
            self._done.append((self._path(key), count))
            self._rolls[key] = self._rolls.get(key, 0) + 1
            return self._open_next(key)
        return handle

    def room(self, key: str) -> int | None:
        """How many more records partition `key`'s open file takes before it rolls (None: no record limit); a
        writer handed many records at once (an Arrow batch) splits them there."""
        return None if self._max_records is None else max(0, self._max_records - self.counts.get(key, 0))

    def _open_next(self, key: str) -> H:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.handles[key] = self._open(path)
        self.counts[key] = 0
        return handle

    def close(self) -> list[tuple[Path, int]]:
        """Close every open file; each file with records and its count (rolled-over files first)."""
        out, self._done = self._done, []
        for key, handle in self.handles.items():
            self._close(handle)
            path = self._path(key)
            if self.counts[key]:
                out.append((path, self.counts[key]))
            else:  # every record meant for it was refused
                path.unlink()
        self.handles.clear()
        return out
