"""One decode of a change log shared by a run's tables (issue 45): each table's part spooled to a file of its own.

The CDC sources (postgres_cdc's slot, mysql_cdc's binlog) read one range for all of a run's streamed tables: the first
table to read decodes it and appends each table's messages to its spool, under the run's local staging directory, in a
folder named by a hash of the range's full identity. A spool is whole only once the folder's `complete` marker is
written; a decode that stopped part way is thrown away and done again by the next reader (a retry in the same run also
decodes again for a table whose spool it read already: each spool is deleted once read whole, the folder with the last,
since an executor's host is not cleaned by the driver). The tables' tasks may run at once, in threads or in Spark's
Python workers on one host: a decode, the check that a spool is whole and its opening hold an flock of the staging
directory, so no reader opens a spool another decode is writing. The messages routed are held up to `FLUSH_BYTES` in
all, then appended to the files. Nothing here moves a source's position: a crash replays the range in the next run,
whose run id, hence staging directory, is its own.

Handed over in memory (`in_process=True`: postgres_cdc, whose routed tables are the work units of one MultiWorkUnit, so
of one task in one process): a decode that never held more than `FLUSH_BYTES` writes no file; its tables' messages stay
in this process (`_HELD`, at most `HELD_DECODES` decodes) and each table's reader takes its own list, in the order
routed, with no copy and no disk round trip. The durability argument: a spool is never a durable record. Its files
are not fsynced, nothing is committed from them and nothing moves the slot by them; a decode is only a cache of a range
the source still holds, and whatever a reader does not find whole (no `complete` marker, no list in `_HELD`: a crash,
another process, a retry elsewhere, a decode evicted) it decodes again. So keeping it in memory loses nothing a file
would have kept: a SIGKILL loses both, and the next run, which has its own run id, reads the range again.
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
HELD_DECODES = 4
"""Decodes handed over in memory kept at once in a process (the oldest dropped first: its readers decode again)."""
_OVERHEAD = 48  # what Python adds to a message held as a bytes object in a list, counted against FLUSH_BYTES
_LENGTH = struct.Struct("!I")
_lock = threading.Lock()  # with an flock of the staging directory (`_locked`): one decode at a time on a host
_HELD: dict[Path, dict[str, list[bytes]]] = {}  # decode folder → the tables' messages not yet read (in memory)


class TableSpools:
    """The spools of one decode of a range for `tables`, under `root/<source>-decode-<hash of identity and tables>`;
    `in_process`: every reader runs in this process, so a decode that fits in `FLUSH_BYTES` is handed over in memory."""

    def __init__(self, root: Path, source: str, identity: list[str], tables: list[str], in_process: bool = False) -> None:
        self.tables = sorted(tables)
        key = hashlib.sha256("\0".join([*identity, *self.tables]).encode()).hexdigest()[:32]
        self.dir = root / f"{source}-decode-{key}"
        self.in_process = in_process
        self._names = {t: f"{i:05d}.spool" for i, t in enumerate(self.tables)}
        self.buffers: dict[str, list[bytes]] = {t: [] for t in self.tables}
        self._held = 0
        self._on_disk = False  # this decode wrote to its files (it held more than FLUSH_BYTES)

    def read(self, table: str, decode: Callable[[], None], crash_point: str) -> Iterator[bytes]:
        """`table`'s messages, in the order the decode appended them; `decode()` runs first when neither a list held
        in this process nor a whole spool is there. Crash point `crash_point` fires once the N-th table is read whole
        (a test's kill)."""
        if table not in self._names:
            raise SourceError(f"table {table} is not one of the run's routed tables ({', '.join(self.tables)})")
        spool = self.dir / self._names[table]
        with self._locked():
            held = _HELD.get(self.dir, {}).get(table)
            if held is None and (not (self.dir / "complete").exists() or not spool.exists()):  # not whole, or read
                decode()
                held = _HELD.get(self.dir, {}).get(table)
            f = None if held is not None else open(spool, "rb", buffering=1 << 20)  # opened whole: a later decode
            # replaces the file, never this one
        if held is not None:
            yield from held
            with _lock:
                left = _HELD.get(self.dir)
                if left is not None and left.get(table) is held:
                    del left[table]
                    if not left:
                        del _HELD[self.dir]
        else:
            assert f is not None
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
        """A decode begins: whatever an earlier one left is thrown away (held in memory or in files)."""
        _HELD.pop(self.dir, None)  # under `_locked`, as `read` calls the decode
        shutil.rmtree(self.dir, ignore_errors=True)
        if not self.in_process:
            self.dir.mkdir(parents=True)
        self.buffers = {t: [] for t in self.tables}
        self._held, self._on_disk = 0, False

    def append(self, buffer: list[bytes], data: bytes) -> None:
        """One message to a table's spool (`buffer` is `buffers[table]`), written out once enough is held."""
        buffer.append(data)
        self._held += len(data) + _OVERHEAD
        if self._held > FLUSH_BYTES:
            self._flush()

    def finish(self) -> None:
        """The decode read its whole range: handed over in memory when it never went to disk and every reader is in
        this process; else every spool written out, then the `complete` marker."""
        if self.in_process and not self._on_disk:
            while len(_HELD) >= HELD_DECODES:  # bounded: an evicted decode's readers decode again
                del _HELD[next(iter(_HELD))]
            _HELD[self.dir], self.buffers = self.buffers, {t: [] for t in self.tables}  # handed over, not copied
            self._held = 0
            return
        self._flush()
        (self.dir / "complete").write_bytes(b"")

    def _flush(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        for table, buffer in self.buffers.items():
            with open(self.dir / self._names[table], "ab") as f:
                f.write(b"".join(b for data in buffer for b in (_LENGTH.pack(len(data)), data)))
            buffer.clear()
        self._held, self._on_disk = 0, True


def _read(f: BinaryIO, path: Path) -> Iterator[bytes]:
    """The messages of one spool file, in the order they were appended."""
    while head := f.read(4):
        (n,) = _LENGTH.unpack(head)
        data = f.read(n)
        if len(data) != n:
            raise SourceError(f"{path}: the spool is cut short (a message of {n} bytes has {len(data)})")
        yield data
