"""Durable file operations: atomic replace with fsyncs, and content checksums."""

from __future__ import annotations

import errno
import os
import tempfile
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO

import crc32c

_CHUNK = 1 << 20


def fsync_dir(path: Path) -> None:
    """Make a rename or create inside `path` survive a power loss."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    """Make a file's content durable (a published file must survive the power loss its watermark does)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_all(paths: Iterable[Path]) -> None:
    """fsync files and directories all at once, on threads: the disk's cache flush that each fsync waits for is shared
    by those in flight together, where one after another each waits for its own (200 directories on this project's
    2-core machine: about 3-5 ms each one after another, under 0.1 ms each at once). Returns once every one is durable;
    the first error is raised."""
    todo = list(dict.fromkeys(Path(p) for p in paths))
    if len(todo) < 2:
        for p in todo:
            _fsync_path(p)
        return
    list(_pool().map(_fsync_path, todo))  # raises the first error


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if path.is_dir() else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_POOL: tuple[int, ThreadPoolExecutor] | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """The process's fsync threads (made again in a forked child, whose copy has no threads)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL[0] != os.getpid():
            _POOL = (os.getpid(), ThreadPoolExecutor(max_workers=8, thread_name_prefix="gobblin-fsync"))
        return _POOL[1]


def makedirs_durably(path: Path, defer: list[Path] | None = None) -> None:
    """Create `path` and its missing parents, fsyncing the parent of each directory created, so a power loss
    cannot drop a directory entry (`output/a/2026`) while a watermark that counts its files survives.

    Nothing but one stat when `path` exists; a directory another process creates meanwhile is fsynced too.
    `defer`: the parents to fsync are appended to it instead, for the caller to fsync (`fsync_all`) before anything
    relies on the new directories.
    """
    path = Path(path)
    if path.is_dir():
        return
    missing: list[Path] = []
    p = path
    while not p.is_dir():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir()
        except FileExistsError:
            if not d.is_dir():
                raise
        if defer is not None:
            defer.append(d.parent)
        else:
            fsync_dir(d.parent)


_NO_HARD_LINKS = frozenset({errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS})


def rename_noreplace(src: Path, dst: Path) -> None:
    """Move `src` to `dst`, raising FileExistsError when `dst` exists: never replaces a file.

    A hard link then an unlink of `src` (no-replace is atomic there; a crash between them leaves both names
    on one file, which a replay recognises); where the filesystem has no hard links, a check then a rename.
    EXDEV (another mount, even of the same disk) is raised for the caller to copy instead.
    """
    try:
        os.link(src, dst)
    except OSError as exc:
        if isinstance(exc, FileExistsError) or exc.errno not in _NO_HARD_LINKS:
            raise
        if os.path.lexists(dst):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(dst)) from None
        os.rename(src, dst)
        return
    os.unlink(src)


_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100


def exchange_dirs(a: Path, b: Path) -> None:
    """Swap two directories of one filesystem in one atomic step (Linux `renameat2(RENAME_EXCHANGE)`), then fsync
    their parents: a reader opening either path sees its old or its new content, never a mix and never nothing.

    OSError where the kernel or the filesystem cannot (ENOSYS, EINVAL: not Linux, or a filesystem without it;
    EXDEV: two filesystems).
    """
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        raise OSError(errno.ENOSYS, "renameat2 is not available (an atomic directory exchange needs Linux 3.15+)")
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"cannot exchange {a} and {b}: {os.strerror(code)}")
    for parent in dict.fromkeys((Path(a).parent, Path(b).parent)):
        fsync_dir(parent)


def atomic_write(path: Path, data: bytes, *, midway: Callable[[], None] | None = None) -> None:
    """Replace `path` with `data` so a reader sees the old or the new content, never a mix.

    temp file in the same directory → write → flush → fsync → rename → fsync the directory.
    `midway` is called after half the bytes are written (a crash point for tests).
    """
    atomic_replace(path, writing(data, midway))
    fsync_dir(path.parent)


def atomic_write_many(items: list[tuple[Path, bytes]], *, midway: Callable[[], None] | None = None,
                      between: Callable[[], None] | None = None) -> None:
    """Replace several files at once, each as `atomic_write` does (a reader sees a file's old or new content, never a
    mix), with one round of fsyncs for all: every temp file written, the temp files fsynced together (`fsync_all`),
    each renamed over its path, then each directory fsynced once together. Nothing is durable before the last fsync;
    a crash before it leaves any of the files replaced or not, each whole.

    `midway` is called in the middle of each file's write, `between` after the first rename when there are several
    (crash points for tests).
    """
    temps: list[tuple[Path, Path]] = []
    renamed = 0
    try:
        for path, data in items:
            makedirs_durably(path.parent)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            temps.append((Path(tmp), path))
            with os.fdopen(fd, "wb") as f:
                writing(data, midway)(f)
                f.flush()
        fsync_all(t for t, _ in temps)
        for tmp, path in temps:
            os.replace(tmp, path)
            renamed += 1
            if renamed == 1 and len(temps) > 1 and between is not None:
                between()
    except BaseException:
        for tmp, _ in temps[renamed:]:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
        raise
    fsync_all(path.parent for path, _ in items)


def remove_many_durably(paths: list[Path]) -> list[Path]:
    """Delete several files, then fsync their directories once, together; the paths that were there."""
    removed = []
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            continue
        removed.append(path)
    fsync_all(p.parent for p in removed)
    return removed


def writing(data: bytes, midway: Callable[[], None] | None = None) -> Callable[[BinaryIO], None]:
    """A writer of `data` for `atomic_replace` that calls `midway` (a crash point) after half the bytes are flushed."""
    def write(f: BinaryIO) -> None:
        half = len(data) // 2
        f.write(data[:half])
        if midway is not None:
            f.flush()
            midway()
        f.write(data[half:])

    return write


def atomic_replace(path: Path, write: Callable[[BinaryIO], None], *, replace: bool = True, mode: int | None = None) -> None:
    """Write a temp file beside `path` with `write`, fsync it and rename it over `path`; the caller fsyncs
    the directory (at once, or once for many files). New parent directories are made durably.

    `replace=False`: FileExistsError when `path` exists, which is left alone. `mode`: the file's permission
    bits (else mkstemp's 0600).
    """
    makedirs_durably(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            write(f)
            f.flush()
            os.fsync(f.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            rename_noreplace(Path(tmp), path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def remove_durably(path: Path) -> bool:
    """Delete `path` and fsync its directory; False when it was already gone."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    fsync_dir(path.parent)
    return True


def file_checksum(path: Path) -> str:
    """CRC32C of a file's content, as 8 hex digits (hardware-accelerated where available)."""
    value = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            value = crc32c.crc32c(chunk, value)
    return f"{value:08x}"


def bytes_checksum(data: bytes) -> str:
    """CRC32C of `data`, as 8 hex digits."""
    return f"{crc32c.crc32c(data):08x}"
