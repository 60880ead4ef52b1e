"""Compressed input files, told by their last suffix: `.gz`, `.bz2`, `.zst`, `.xz`; the suffix under it names the format.

A truncated or corrupt stream always raises one of `CORRUPT` (never a silent early end), so a reader can
report where the readable part stopped.
"""

from __future__ import annotations

import bz2
import enum
import gzip
import io
import lzma
import zlib
from typing import IO

import zstandard

CHUNK = 1 << 20


class Compression(str, enum.Enum):
    NONE = ""
    GZIP = "gz"
    BZIP2 = "bz2"
    ZSTD = "zst"
    XZ = "xz"


_SUFFIXES = {".gz": Compression.GZIP, ".gzip": Compression.GZIP, ".bz2": Compression.BZIP2,
             ".zst": Compression.ZSTD, ".zstd": Compression.ZSTD, ".xz": Compression.XZ}

CORRUPT: tuple[type[BaseException], ...] = (OSError, EOFError, zlib.error, lzma.LZMAError, zstandard.ZstdError)
"""What reading a corrupt or truncated compressed stream raises."""


def split_compression(name: str) -> tuple[str, Compression]:
    """(`name` without its compression suffix, the compression): `x.csv.gz` → (`x.csv`, GZIP)."""
    stem, dot, suffix = name.rpartition(".")
    codec = _SUFFIXES.get(f".{suffix.lower()}") if dot else None
    return (stem, codec) if codec is not None else (name, Compression.NONE)


def decompressing(raw: IO[bytes], compression: Compression) -> IO[bytes]:
    """A buffered reader of the decompressed bytes of `raw` (`raw` itself when not compressed)."""
    if compression is Compression.NONE:
        return raw
    if compression is Compression.GZIP:
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if compression is Compression.BZIP2:
        return bz2.BZ2File(raw, mode="rb")
    if compression is Compression.XZ:
        return lzma.LZMAFile(raw, mode="rb")
    return io.BufferedReader(_ZstdFrames(raw), buffer_size=CHUNK)


class _ZstdFrames(io.RawIOBase):
    """Every zstd frame of `raw` in turn; a stream that ends inside a frame raises EOFError
    (zstandard's own stream reader just stops there)."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self._dctx = zstandard.ZstdDecompressor()
        self._obj = self._dctx.decompressobj()
        self._pending = b""
        self._pos = 0
        self._in_frame = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while self._pos >= len(self._pending):
            self._pending, self._pos = b"", 0
            chunk = self._raw.read(CHUNK)
            if not chunk:
                if self._in_frame:
                    raise EOFError("zstd stream ended inside a frame (the file is truncated)")
                return 0
            while chunk:
                self._in_frame = True
                self._pending += self._obj.decompress(chunk)
                if not self._obj.eof:
                    break
                chunk = self._obj.unused_data
                self._obj = self._dctx.decompressobj()
                self._in_frame = False
        n = min(len(buffer), len(self._pending) - self._pos)
        buffer[:n] = self._pending[self._pos:self._pos + n]
        self._pos += n
        return n
