"""One decode of a change log shared by a run's tables (issue 45): each table's part spooled to a file of its own.

The CDC sources (postgres_cdc's slot, mysql_cdc's binlog) read one range for all of a run's streamed tables: the first
table to read decodes it and appends each table's messages to its spool, under the run's local staging directory, in a
folder named by a hash of the range's full identity. A spool is whole only once the folder's `complete` marker is
written; a decode that stopped part way is thrown away and done again by the next reader (a retry in the same run also
decodes again for a table whose spool it read already: each spool is deleted once read whole, the folder with the last,
since an executor's host is not cleaned by the driver). The tables' tasks may run at once, in threads or in Spark's
Python workers on one host: a decode, the check that a spool is whole and its opening hold an flock of the staging
directory, so no reader opens a spool another decode is writing. The bytes routed are held up to `FLUSH_BYTES` in all, then
appended to the files. Nothing here moves a source's position: a crash replays the range in the next run, whose run
id, hence staging directory, is its own.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from gobblin_py import crashpoints
from gobblin_py.errors import SourceError

FLUSH_BYTES = 32 << 20
"""The routed bytes held in memory before they are appended to the spool files."""
_LENGTH = struct.Struct("!I")
_lock = threading.Lock()  # with an flock of the staging directory (`_locked`): one decode at a time on a host


class TableSpools:
    """The spools of one decode of a range for `tables`, under `root/<source>-decode-<hash of identity and tables>`."""

    def __init__(self, root: Path, source: str, identity: list[str], tables: list[str]) -> None:
        self.tables = sorted(tables)
        key = hashlib.sha256("\0".join([*identity, *self.tables]).encode()).hexdigest()[:32]
        self.dir = root / f"{source}-decode-{key}"
        self._names = {t: f"{i:05d}.spool" for i, t in enumerate(self.tables)}
        self.buffers: dict[str, bytearray] = {t: bytearray() for t in self.tables}
        self._held = 0

    def read(self, table: str, decode: Callable[[], None], crash_point: str) -> Iterator[bytes]:
        """`table`'s messages, in the order the decode appended them; `decode()` runs first when its spool is not
        whole. Crash point `crash_point` fires once the N-th spool is read whole (a test's kill)."""
        if table not in self._names:
            raise SourceError(f"table {table} is not one of the run's routed tables ({', '.join(self.tables)})")
        spool = self.dir / self._names[table]
        with self._locked():
            if not (self.dir / "complete").exists() or not spool.exists():  # not whole, or read already (a retry)
                decode()
            f = open(spool, "rb", buffering=1 << 20)  # opened whole: a later decode replaces the file, never this one
        with f:
            yield from _read(f, spool)
        with self._locked():
            spool.unlink(missing_ok=True)
            if not any(self.dir.glob("*.spool")):
                shutil.rmtree(self.dir, ignore_errors=True)
        crashpoints.crash_point(crash_point)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """One decode at a time on this host: the threads of a process (a lock) and its processes (an flock of the
        staging directory, which Spark's Python workers on one host share)."""
        self.dir.parent.mkdir(parents=True, exist_ok=True)
        with _lock:
            fd = os.open(self.dir.parent, os.O_RDONLY)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # releases the flock

    def start(self) -> None:
        """A decode begins: whatever an earlier one left is thrown away."""
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        for buffer in self.buffers.values():
            buffer.clear()
        self._held = 0

    def append(self, buffer: bytearray, data: bytes) -> None:
        """One message to a table's spool (`buffer` is `buffers[table]`), written out once enough is held."""
        buffer += _LENGTH.pack(len(data))
        buffer += data
        self._held += len(data) + 4
        if self._held > FLUSH_BYTES:
            self._flush()

    def finish(self) -> None:
        """The decode read its whole range: every spool written out, then the `complete` marker."""
        self._flush()
        (self.dir / "complete").write_bytes(b"")

    def _flush(self) -> None:
        for table, buffer in self.buffers.items():
            with open(self.dir / self._names[table], "ab") as f:
                f.write(buffer)
            buffer.clear()
        self._held = 0


def _read(f: BinaryIO, path: Path) -> Iterator[bytes]:
    """The messages of one spool file, in the order they were appended."""
    while head := f.read(4):
        (n,) = _LENGTH.unpack(head)
        data = f.read(n)
        if len(data) != n:
            raise SourceError(f"{path}: the spool is cut short (a message of {n} bytes has {len(data)})")
        yield data
