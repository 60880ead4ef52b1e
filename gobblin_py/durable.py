"""Durable file operations: atomic replace with fsyncs, and content checksums."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable

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


def atomic_write(path: Path, data: bytes, *, midway: Callable[[], None] | None = None) -> None:
    """Replace `path` with `data` so a reader sees the old or the new content, never a mix.

    temp file in the same directory → write → flush → fsync → rename → fsync the directory.
    `midway` is called after half the bytes are written (a crash point for tests).
    """
    def write(f: BinaryIO) -> None:
        half = len(data) // 2
        f.write(data[:half])
        if midway is not None:
            f.flush()
            midway()
        f.write(data[half:])

    atomic_replace(path, write)
    fsync_dir(path.parent)


def atomic_replace(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Write a temp file beside `path` with `write`, fsync it and rename it over `path`; the caller fsyncs
    the directory (at once, or once for many files)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
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
