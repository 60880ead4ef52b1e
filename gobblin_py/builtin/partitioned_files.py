"""Shared by the file writers: one open output file per partition path under staging."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Generic, TypeVar

from gobblin_py.api import WriterTarget
from gobblin_py.builtin.time_partitioner import PartitionSettings, TimePartitioner

H = TypeVar("H")
D = TypeVar("D")


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

    def _handle(self, key: str) -> H:
        handle = self.handles.get(key)
        if handle is None:
            path = self._path(key)
            path.parent.mkdir(parents=True, exist_ok=True)
            handle = self.handles[key] = self._open(path)
            self.counts[key] = 0
        return handle

    def write(self, record: dict[str, Any], data: D, put: Callable[[H, D], Any]) -> None:
        """`put(handle, data)` into the file of `record`'s partition (a RecordError if it has none), then count it."""
        key = self.partitioner.partition(record) if self.partitioner else ""
        put(self._handle(key), data)
        self.counts[key] += 1

    def unpartitioned(self) -> H:
        """The one file of an unpartitioned writer (opened now); the caller counts its records."""
        return self._handle("")

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
