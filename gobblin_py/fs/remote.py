"""Any filesystem fsspec serves (`s3://`, `hdfs://`, `gs://`, `abfs://` …), behind our FileSystem API.

Object stores have no atomic rename: their publish step copies, verifies the copy's CRC32C read back
from the store, then deletes the source (see `commit/steps.py`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import crc32c

from gobblin_py.errors import FileSystemError, describe
from gobblin_py.fs.base import FileSystem
from gobblin_py.fs.location import Location

ATOMIC_RENAME_SCHEMES = frozenset({"hdfs", "viewfs", "webhdfs", "abfs", "abfss"})
"""Stores whose rename is atomic (HDFS; ADLS Gen2 with hierarchical namespace); all others copy-then-verify."""

_CHUNK = 1 << 22


@contextmanager
def _failing(what: str) -> Iterator[None]:
    """Re-raise a store's error as FileSystemError naming the operation and URL (botocore's do not)."""
    try:
        yield
    except FileSystemError:
        raise
    except Exception as exc:  # noqa: BLE001 - every client library raises its own types
        raise FileSystemError(f"{what} failed: {describe(exc)}") from exc


class FsspecFileSystem(FileSystem):
    """Wraps one fsspec filesystem instance; paths keep their scheme so messages show the full URL."""

    def __init__(self, scheme: str, fs: Any) -> None:
        self.scheme = scheme
        self.fs = fs
        self.atomic_rename = scheme in ATOMIC_RENAME_SCHEMES

    def _p(self, path: Location) -> str:
        return self.fs._strip_protocol(str(path))

    def size(self, path: Location) -> int | None:
        with _failing(f"stat {path}"):
            try:
                info = self.fs.info(self._p(path))
            except FileNotFoundError:
                return None
        return int(info["size"]) if info.get("type") == "file" else None

    def checksum(self, path: Location) -> str:
        value = 0
        with _failing(f"read {path}"), self.fs.open(self._p(path), "rb", block_size=_CHUNK) as f:
            while chunk := f.read(_CHUNK):
                value = crc32c.crc32c(chunk, value)
        return f"{value:08x}"

    def rename(self, src: Location, dst: Location) -> None:
        if not self.atomic_rename:
            raise NotImplementedError(f"{self.scheme}:// has no atomic rename; publish with copy-then-verify")
        with _failing(f"rename of {src} to {dst}"):
            self.fs.makedirs(self._p(dst.parent), exist_ok=True)  # HDFS has real directories
            self.fs.mv(self._p(src), self._p(dst))

    def copy(self, src: Location, dst: Location) -> None:
        with _failing(f"copy of {src} to {dst}"):
            self.fs.copy(self._p(src), self._p(dst))

    def put(self, local: Path, dst: Location) -> None:
        with _failing(f"upload of {local} to {dst}"):
            self.fs.put_file(str(local), self._p(dst))

    def open_read(self, path: Location) -> IO[bytes]:
        with _failing(f"open {path}"):
            return self.fs.open(self._p(path), "rb")

    def delete(self, path: Location) -> None:
        with _failing(f"delete {path}"):
            try:
                self.fs.rm_file(self._p(path))
            except FileNotFoundError:
                pass

    def rmtree(self, path: Location) -> None:
        with _failing(f"delete {path}"):
            try:
                self.fs.rm(self._p(path), recursive=True)
            except FileNotFoundError:
                pass

    def listdir(self, path: Location) -> list[Location]:
        with _failing(f"list {path}"):
            try:
                names = self.fs.ls(self._p(path), detail=False)
            except FileNotFoundError:
                return []
        return [path / str(n).rstrip("/").rsplit("/", 1)[-1] for n in sorted(names)]

    def find(self, root: Location) -> dict[Location, int]:
        with _failing(f"list {root}"):
            found = self.fs.find(self._p(root), detail=True)
        base = root.rstrip("/")
        prefix = self._p(root).rstrip("/")
        return {Location(base + p[len(prefix):]): int(info["size"]) for p, info in sorted(found.items())
                if info.get("type") == "file" and p.startswith(prefix + "/")}

    def is_dir(self, path: Location) -> bool:
        with _failing(f"stat {path}"):
            return bool(self.fs.isdir(self._p(path)))
