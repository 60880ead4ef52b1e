"""Extractors of the `files` source: JSON lines and CSV, plain or compressed, over a planned byte range.

Each reads exactly `[start, end)` of the file as planned (bytes appended since planning wait for the next
run), decodes line by line, and sends whatever one line or row gets wrong (invalid UTF-8, bad JSON, a
wrong column count, an oversized CSV field) to `context.reject` with its location; the rest of the file is
read. A compressed stream that turns out corrupt or truncated is one reject naming where it stopped.
"""

from __future__ import annotations

import contextlib
import csv
import enum
import io
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

import orjson

from gobblin_py.api import Extractor, TaskContext
from gobblin_py.api.types import Record, Schema, WatermarkValue
from gobblin_py.builtin.sources.files.compression import CHUNK, CORRUPT, Compression, decompressing, split_compression
from gobblin_py.errors import RetriableTaskError, SourceError
from gobblin_py.fs import Location, filesystem_for

BOM = b"\xef\xbb\xbf"  # Excel's UTF-8 byte-order mark, tolerated at the start of a file
SHOWN_CHARS = 1000  # how much of an unparseable line an error entry keeps


class FileFormat(str, enum.Enum):
    JSON_LINES = "jsonl"
    CSV = "csv"


_FORMATS = {"jsonl": FileFormat.JSON_LINES, "json": FileFormat.JSON_LINES, "ndjson": FileFormat.JSON_LINES,
            "csv": FileFormat.CSV}
KNOWN_EXTENSIONS = tuple(f".{ext}" for ext in _FORMATS)


def format_of(name: str) -> tuple[FileFormat | None, Compression]:
    """The format from the extension under any compression suffix (`x.csv.gz` is CSV); None when unknown."""
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


class _FileExtractor(Extractor):
    def __init__(self, file: FileRange, context: TaskContext) -> None:
        self.file = file
        self.path = file.path
        self.context = context
        self.line = 0
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
        """The raw lines of `stream`, counted in `self.line`; a corrupt compressed stream ends them with one reject."""
        corrupt = CORRUPT if self.compression is not Compression.NONE else ()  # I/O errors are never caught here
        try:
            for self.line, raw in enumerate(stream, 1):
                if self.line == 1 and not self.file.start and raw.startswith(BOM):
                    raw = raw[len(BOM):]
                yield raw
        except corrupt as exc:
            self.line += 1
            self.context.reject(None, f"cannot decompress {self.path} ({self.compression.value}) from this line on: "
                                f"{type(exc).__name__}: {exc}; the rest of the file is not read", self.location())


class JsonLinesExtractor(_FileExtractor):
    """One JSON object per line; a line that is not an object goes to the bad-record handling."""

    def get_schema(self) -> Schema:
        return {"type": "json", "source": str(self.path)}

    def read_records(self) -> Iterator[Record]:
        loads = orjson.loads
        reject = self.context.reject
        with self._open(self.file.start, self.file.end) as f:
            for raw in self._lines(f):
                if not raw.strip():
                    continue
                try:
                    record = loads(raw)
                except orjson.JSONDecodeError as exc:
                    reject(raw.decode("utf-8", "replace").rstrip("\r\n")[:SHOWN_CHARS], f"not valid JSON: {exc}", self.location())
                    continue
                if type(record) is not dict:
                    reject(record, f"expected a JSON object, got {type(record).__name__}", self.location())
                    continue
                yield record


class CsvExtractor(_FileExtractor):
    """CSV with a header row, or with none and `columns` naming them; a row with the wrong number of columns,
    invalid UTF-8 or a field over `field_size_limit` characters goes to the bad-record handling. A range after
    the file's start reads the header from the start, then the range's rows."""

    def __init__(self, file: FileRange, context: TaskContext, delimiter: str, field_size_limit: int,
                 columns: list[str] | None = None) -> None:
        super().__init__(file, context)
        self.delimiter = delimiter
        self.field_size_limit = field_size_limit
        self.headerless = columns is not None
        self._header: list[str] | None = list(columns) if columns is not None else None
        self._bad_lines: dict[int, str] = {}  # line number → the UnicodeDecodeError, for lines of the current row
        self._last: str = ""

    def _text(self, stream: IO[bytes]) -> Iterator[str]:
        """Lines decoded one at a time: an invalid one is kept (surrogate-escaped) and remembered, so only its row is rejected."""
        for raw in self._lines(stream):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                self._bad_lines[self.line] = str(exc)
                text = raw.decode("utf-8", "surrogateescape")
            self._last = text
            yield text

    def _reader(self, stream: IO[bytes]) -> csv.reader:  # type: ignore[valid-type]
        csv.field_size_limit(self.field_size_limit)  # process-wide; every CSV extractor sets its own before reading
        return csv.reader(self._text(stream), delimiter=self.delimiter)

    def _read_header(self) -> list[str]:
        if self._header is None:
            with self._open(0, self.file.end) as f:
                header = next(self._reader(f), [])
            self._header = [_shown(h) for h in header]
            self._bad_lines.clear()
        return self._header

    def get_schema(self) -> Schema:
        return {"type": "csv", "source": str(self.path), "fields": self._read_header()}

    def read_records(self) -> Iterator[Record]:
        header = self._read_header()
        width = len(header)
        reject = self.context.reject
        bad = self._bad_lines
        with self._open(self.file.start, self.file.end) as f:
            reader = self._reader(f)
            if not self.file.start and not self.headerless and next(reader, None) is None:
                return
            bad.clear()
            while True:
                try:
                    row = next(reader)
                except StopIteration:
                    return
                except csv.Error as exc:
                    self.line = reader.line_num
                    bad.clear()
                    reject(_shown(self._last)[:SHOWN_CHARS], f"unreadable CSV row: {exc}", self.location())
                    continue
                self.line = reader.line_num
                if bad:
                    first = min(bad)
                    reject(_shown(self.delimiter.join(row))[:SHOWN_CHARS], f"invalid UTF-8 on line {first}: {bad[first]}", self.location())
                    bad.clear()
                    continue
                if not row:
                    continue
                if len(row) != width:
                    reject(self.delimiter.join(row), f"expected {width} columns ({', '.join(header)}), got {len(row)}", self.location())
                    continue
                yield dict(zip(header, row))


def _shown(text: str) -> str:
    """`text` with undecodable bytes shown as U+FFFD (error files are UTF-8 JSON)."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
