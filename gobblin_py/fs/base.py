"""FileSystem: the few operations the writers, the commit steps and the cleanup need, on any store."""

from __future__ import annotations

import abc
from pathlib import Path
from typing import IO

from gobblin_py.fs.location import Location

NOT_A_FILE = -1
"""`find`'s size of an entry that is not a regular file."""


class FileSystem(abc.ABC):
    """One filesystem (local disk, an S3 bucket, HDFS …); every path given is a `Location` on it."""

    atomic_rename: bool
    """True when `rename` publishes atomically (POSIX, HDFS); False for object stores, whose
    publish step is copy-then-verify."""

    @abc.abstractmethod
    def size(self, path: Location) -> int | None:
        """The file's size in bytes, None when there is no file."""

    def exists(self, path: Location) -> bool:
        return self.size(path) is not None

    @abc.abstractmethod
    def checksum(self, path: Location) -> str:
        """CRC32C of the file's content (8 hex digits), read back from the store."""

    @abc.abstractmethod
    def rename(self, src: Location, dst: Location) -> None:
        """Atomically move `src` to `dst`; only where `atomic_rename`. A publish step calls it only when `dst` is absent
        (it never replaces a file it did not write); the local filesystem also refuses an existing `dst` atomically."""

    @abc.abstractmethod
    def copy(self, src: Location, dst: Location) -> None:
        """Copy within this filesystem (server-side where the store can); a partial copy never sits at `dst`."""

    @abc.abstractmethod
    def put(self, local: Path, dst: Location) -> None:
        """Upload a local file to `dst`; content durable when this returns, and a partial upload never sits at `dst`
        (object stores: a put is atomic; local disk: a temp name, then a move that refuses an existing `dst`)."""

    @abc.abstractmethod
    def open_read(self, path: Location) -> IO[bytes]:
        """A binary stream of the file."""

    @abc.abstractmethod
    def delete(self, path: Location) -> None:
        """Remove a file; nothing when it is already gone."""

    @abc.abstractmethod
    def rmtree(self, path: Location) -> None:
        """Remove a directory (a prefix) and everything under it; nothing when it is gone."""

    @abc.abstractmethod
    def listdir(self, path: Location) -> list[Location]:
        """The entries directly under `path`; empty when there is no such directory."""

    @abc.abstractmethod
    def find(self, root: Location) -> dict[Location, int]:
        """Every file under `root` (recursively) with its size, NOT_A_FILE for an entry no one can read as a file (a
        dangling symlink, a FIFO, a socket, a device); empty when `root` does not exist; FileSystemError naming a
        directory under it that cannot be listed (never a part of the tree left out quietly)."""

    @abc.abstractmethod
    def is_dir(self, path: Location) -> bool:
        """Whether `path` is a directory (on an object store: a prefix with objects under it)."""

    def sync_dir(self, path: Location) -> str | None:
        """The directory whose fsync makes a rename into it durable, None where the store needs none."""
        return None
