"""Shared by the file writers: one open output file per partition path under staging."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Generic, TypeVar

from gobblin_py.api import WriterTarget
from gobblin_py.builtin.time_partitioner import PartitionSettings, TimePartitioner

H = TypeVar("H")


class PartitionedFiles(Generic[H]):
    """Opens `<staging>/<rel_dir>/<partition>/<stem><suffix>` lazily; counts records per file."""

    def __init__(self, target: WriterTarget, suffix: str, partition: PartitionSettings | None,
                 open_file: Callable[[Path], H], close_file: Callable[[H], None]) -> None:
        self.base = target.staging_dir / target.rel_dir
        self.name = f"{target.file_stem}{suffix}"
        self.partitioner = TimePartitioner(partition) if partition else None
        self._open = open_file
        self._close = close_file
        self.handles: dict[str, H] = {}
        self.counts: dict[str, int] = {}

    def handle_for(self, record: dict[str, Any]) -> H:
        key = self.partitioner.partition(record) if self.partitioner else ""
        handle = self.handles.get(key)
        if handle is None:
            path = self.base / key / self.name if key else self.base / self.name
            path.parent.mkdir(parents=True, exist_ok=True)
            handle = self.handles[key] = self._open(path)
            self.counts[key] = 0
        self.counts[key] += 1
        return handle

    def unpartitioned(self) -> H:
        """The one file of an unpartitioned writer (opened now); the caller counts its records."""
        return self.handle_for({})

    def close(self, unpartitioned_count: int | None = None) -> list[tuple[Path, int]]:
        if unpartitioned_count is not None and "" in self.counts:
            self.counts[""] = unpartitioned_count
        out = []
        for key, handle in self.handles.items():
            self._close(handle)
            out.append((self.base / key / self.name if key else self.base / self.name, self.counts[key]))
        self.handles.clear()
        return out
