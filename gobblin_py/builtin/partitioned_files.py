"""Shared by the file writers: one open output file per partition path under staging."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Generic, TypeVar

from gobblin_py.api import WriterTarget
from gobblin_py.builtin.time_partitioner import PartitionSettings, TimePartitioner

H = TypeVar("H")


class PartitionedFiles(Generic[H]):
    """Opens `<staging>/<rel_dir>/<partition>/<stem><suffix>` lazily; counts the records written to each file.

    A record is counted only once its write succeeded, and a file no record was written to is not
    handed over at close, so a refused record never shows in a count or leaves an empty file.
    """

    def __init__(self, target: WriterTarget, suffix: str, partition: PartitionSettings | None,
                 open_file: Callable[[Path], H], close_file: Callable[[H], None]) -> None:
        self.base = target.staging_dir / target.rel_dir
        self.name = f"{target.file_stem}{suffix}"
        self.partitioner = TimePartitioner(partition) if partition else None
        self._open = open_file
        self._close = close_file
        self.handles: dict[str, H] = {}
        self.counts: dict[str, int] = {}

    def _path(self, key: str) -> Path:
        return self.base / key / self.name if key else self.base / self.name

    def key_for(self, record: dict[str, Any]) -> str:
        """The partition path of `record` (a RecordError when it has none)."""
        return self.partitioner.partition(record) if self.partitioner else ""

    def handle(self, key: str) -> H:
        """The open file of partition `key` (opened on first use); the caller adds 1 to `counts[key]` per
        record once the record is written."""
        handle = self.handles.get(key)
        if handle is None:
            path = self._path(key)
            path.parent.mkdir(parents=True, exist_ok=True)
            handle = self.handles[key] = self._open(path)
            self.counts[key] = 0
        return handle

    def unpartitioned(self) -> H:
        """The one file of an unpartitioned writer (opened now); the caller counts its records."""
        return self.handle("")

    def close(self, unpartitioned_count: int | None = None) -> list[tuple[Path, int]]:
        if unpartitioned_count is not None and "" in self.counts:
            self.counts[""] = unpartitioned_count
        out = []
        for key, handle in self.handles.items():
            self._close(handle)
            path = self._path(key)
            if self.counts[key]:
                out.append((path, self.counts[key]))
            else:  # every record meant for it was refused
                path.unlink()
        self.handles.clear()
        return out
