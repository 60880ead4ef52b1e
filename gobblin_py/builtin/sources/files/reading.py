"""What every extractor of the `files` source shares: the formats by extension, the planned byte range of a file,
the stream bounded to it, and the base extractor that opens it (decompressing), numbers its lines and turns a corrupt
compressed stream into one reject naming where it stopped.

Each extractor reads exactly `[start, end)` of the file as planned (bytes appended since planning wait for the next
run), decodes line by line, and sends whatever one line or row gets wrong (invalid UTF-8, bad JSON, a wrong column
count, an oversized CSV field) to `context.reject` with its location; the rest of the file is read. JSON lines
(`json_lines`) and CSV (`csv_rows`) come in batches a `json_to_avro` task can parse whole with Arrow's readers (the
columnar path, `api.batches`); any other task reads them one by one.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import io
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

from gobblin_py.api import Extractor, TaskContext
from gobblin_py.api.types import WatermarkValue
from gobblin_py.builtin.sources.files.compression import CHUNK, CORRUPT, Compression, decompressing, split_compression
from gobblin_py.errors import RetriableTaskError, SourceError
from gobblin_py.fs import Location, filesystem_for

BOM = b"\xef\xbb\xbf"  # Excel's UTF-8 byte-order mark, tolerated at the start of a file
SHOWN_CHARS = 1000  # how much of an unparseable line an error entry keeps
BATCH_LINES = 8192  # a batch of JSON lines (or of CSV rows on the row path) ends at this many or at BATCH_BYTES,
BATCH_BYTES = 4 << 20  # whichever comes first: big enough for Arrow to parse fast, small enough to keep memory flat


class FileFormat(str, enum.Enum):
    JSON_LINES = "jsonl"
    CSV = "csv"


_FORMATS = {"jsonl": FileFormat.JSON_LINES, "json": FileFormat.JSON_LINES, "ndjson": FileFormat.JSON_LINES,
            "csv": FileFormat.CSV}
KNOWN_EXTENSIONS = tuple(f".{ext}" for ext in _FORMATS)


def format_of(name: str) -> tuple[FileFormat | None, Compression]:
    """The format from the extension under any compression suffix (`x.csv.gz` is CSV); None when unknown. Only the
    name's last two suffixes count, so the answer is kept per pair (a listing of 50,000 files asks 50,000 times)."""
    last = name.rfind(".")
    if last < 0:
        return None, Compression.NONE
    before = name.rfind(".", 0, last)
    return _format_of_suffixes("x" + name[before if before >= 0 else last:])  # `x.<last two suffixes>`: the same answer


@functools.lru_cache(maxsize=4096)
def _format_of_suffixes(name: str) -> tuple[FileFormat | None, Compression]:
    """`format_of` worked out, for a name of at most two suffixes."""
    inner, compression = split_compression(name)
    _, dot, ext = inner.rpartition(".")
    return (_FORMATS.get(ext.lower()) if dot else None), compression


@dataclass(frozen=True)
class FileRange:
    """What one WorkUnit reads: bytes `[start, end)` of `path` (a compressed file is always read whole)."""

    path: Location
    start: int
    end: int


class _Bounded(io.RawIOBase):
    """Exactly `length` bytes of `raw`; a file that ends sooner changed while it was read, and fails the task."""

    def __init__(self, raw: IO[bytes], length: int, where: FileRange) -> None:
        self._raw = raw
        self._left = length
        self._where = where

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        n = min(len(buffer), self._left)
        if n <= 0:
            return 0
        try:
            data = self._raw.read(n)
        except OSError as exc:  # an I/O failure, told apart from a corrupt stream (which is one reject)
            raise RetriableTaskError(f"reading input file {self._where.path} at byte {self._where.end - self._left}: "
                                     f"{type(exc).__name__}: {exc}") from None
        if not data:
            w = self._where
            raise SourceError(f"input file {w.path} ended at byte {w.end - self._left}, before the planned end {w.end}: "
                              "it was truncated or replaced while being read; nothing of it is published")
        buffer[:len(data)] = data
        self._left -= len(data)
        return len(data)


class FileExtractor(Extractor):
    def __init__(self, file: FileRange, context: TaskContext) -> None:
        self.file = file
        self.path = file.path
        self.context = context
        self.line = 0  # the line `location()` names: of the record or row at hand
        self.read = 0  # lines read, as the reader counts them (for `_reject_corrupt`)
        self._corrupt: BaseException | None = None  # what ended `_lines` early, until rejected
        self.fs = filesystem_for(file.path)
        self.compression = format_of(file.path.name)[1]
        size = self.fs.size(file.path)
        if size is None:
            raise SourceError(f"input file {file.path} disappeared before it was read")
        if size < file.end:
            raise SourceError(f"input file {file.path} has {size} bytes, fewer than the {file.end} planned: it was "
                              "truncated or replaced after planning; the next run reports it")

    @contextlib.contextmanager
    def _open(self, start: int, end: int) -> Iterator[IO[bytes]]:
        """The decompressed bytes of file bytes `[start, end)`; closes the file too (a decompressor leaves it open)."""
        with self.fs.open_read(self.path) as raw:
            if start:
                raw.seek(start)
            with decompressing(io.BufferedReader(_Bounded(raw, end - start, self.file), buffer_size=CHUNK), self.compression) as stream:
                yield stream

    def location(self) -> str:
        if self.file.start:
            return f"{self.path}:{self.line} (line counted from byte {self.file.start})"
        return f"{self.path}:{self.line}"

    def actual_high_watermark(self) -> WatermarkValue:
        return self.file.end

    def _lines(self, stream: IO[bytes]) -> Iterator[bytes]:
        """The raw lines of `stream` (the BOM cut off the file's first), which the caller counts in `self.read`; a
        corrupt compressed stream ends them early, and the caller rejects it (`_reject_corrupt`) once it has handled
        the lines before. A plain file's lines come straight from its reader, with no Python frame per line."""
        self.read = 0
        self._corrupt = None
        lines = iter(stream) if self.compression is Compression.NONE else self._until_corrupt(stream)
        if self.file.start:
            return lines
        first = next(lines, None)
        return lines if first is None else itertools.chain((first.removeprefix(BOM),), lines)

    def _until_corrupt(self, stream: IO[bytes]) -> Iterator[bytes]:
        """The lines of a compressed `stream` up to where it turns out corrupt or truncated (kept in `_corrupt`)."""
        try:
            yield from stream
        except CORRUPT as exc:  # I/O errors come as RetriableTaskError (see `_Bounded`), never caught here
            self._corrupt = exc

    def _take_corrupt(self) -> str | None:
        """The reason of the one reject of a corrupt compressed stream that ended `_lines` (given once), else None."""
        exc, self._corrupt = self._corrupt, None
        if exc is None:
            return None
        return (f"cannot decompress {self.path} ({self.compression.value}) from this line on: "
                f"{type(exc).__name__}: {exc}; the rest of the file is not read")

    def _reject_corrupt(self) -> None:
        """The one reject of a corrupt compressed stream that ended `_lines`, at the line after the last one read."""
        reason = self._take_corrupt()
        if reason is not None:
            self.line = self.read + 1
            self.context.reject(None, reason, self.location())
