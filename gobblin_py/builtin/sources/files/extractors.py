"""Extractors of the `files` source: JSON lines and CSV, plain or compressed, over a planned byte range.

Each reads exactly `[start, end)` of the file as planned (bytes appended since planning wait for the next
run), decodes line by line, and sends whatever one line or row gets wrong (invalid UTF-8, bad JSON, a
wrong column count, an oversized CSV field) to `context.reject` with its location; the rest of the file is
read. A compressed stream that turns out corrupt or truncated is one reject naming where it stopped.

JSON lines come in batches of lines (`LineBatch`), so a `json_to_avro` task can parse a whole batch with Arrow's
JSON reader (the columnar path, `api.batches`); any other task reads them one by one as before.
"""

from __future__ import annotations

import contextlib
import csv
import enum
import io
import itertools
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any

import orjson

from gobblin_py.api import BatchExtractor, Extractor, JsonLines, RawBatch, TaskContext
from gobblin_py.api.types import Record, Schema, WatermarkValue
from gobblin_py.builtin.sources.files.compression import CHUNK, CORRUPT, Compression, decompressing, split_compression
from gobblin_py.errors import RetriableTaskError, SourceError
from gobblin_py.fs import Location, filesystem_for

BOM = b"\xef\xbb\xbf"  # Excel's UTF-8 byte-order mark, tolerated at the start of a file
SHOWN_CHARS = 1000  # how much of an unparseable line an error entry keeps
BATCH_LINES = 8192  # a JSON-lines batch ends at this many lines or at BATCH_BYTES, whichever comes first:
BATCH_BYTES = 4 << 20  # big enough for Arrow to parse fast, small enough to keep a task's memory flat


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

    def _reject_corrupt(self) -> None:
        """The one reject of a corrupt compressed stream that ended `_lines`, at the line after the last one read."""
        exc, self._corrupt = self._corrupt, None
        if exc is not None:
            self.line = self.read + 1
            self.context.reject(None, f"cannot decompress {self.path} ({self.compression.value}) from this line on: "
                                f"{type(exc).__name__}: {exc}; the rest of the file is not read", self.location())


class _Ended(Sequence[bytes]):
    """Lines without their "\\n" given back as read: each with it, but for a last one the file ended without it."""

    __slots__ = ("values", "ended")

    def __init__(self, values: Sequence[bytes], ended: bool) -> None:
        self.values, self.ended = values, ended

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, i: int) -> bytes:  # type: ignore[override]
        value = self.values[i]
        return value if not self.ended and i in (-1, len(self.values) - 1) else value + b"\n"


@dataclass(frozen=True)
class LineBatch(RawBatch):
    """Consecutive non-blank lines of a file: `lines` as read (what the row path parses, so its errors name the
    same positions) and each one's number; `values` are the lines without their "\\n" on the columnar path (one
    JSON document each, for a reader of the whole batch), else the lines as read (only their count is used)."""

    lines: Sequence[bytes] = ()
    numbers: Sequence[int] = ()


class JsonLinesExtractor(_FileExtractor, BatchExtractor):
    """One JSON object per line; a line that is not an object goes to the bad-record handling. Blank lines are
    skipped; the rest come in `LineBatch`es of up to BATCH_LINES lines or BATCH_BYTES."""

    _columnar = False  # set by `columnar_path`: only then do batches carry their lines without line ends

    def get_schema(self) -> Schema:
        return {"type": "json", "source": str(self.path)}

    def columnar_path(self) -> None:
        self._columnar = True

    def read_batches(self) -> Iterator[LineBatch]:
        with self._open(self.file.start, self.file.end) as f:
            if self._columnar and self.compression is Compression.NONE:
                yield from self._blocks(f)
                return
            lines: list[bytes] = []
            blanks: list[int] = []  # numbers of the blank lines among the batch's
            first = 1  # the number of the batch's first line
            size = 0
            for raw in self._lines(f):
                if not raw or raw.isspace():  # the same ASCII whitespace as `bytes.strip`, without a copy
                    blanks.append(first + len(lines) + len(blanks))
                    continue
                lines.append(raw)
                size += len(raw)
                if size >= BATCH_BYTES or len(lines) >= BATCH_LINES:
                    yield self._batch(lines, first, blanks)
                    first += len(lines) + len(blanks)
                    lines, blanks, size = [], [], 0
            if lines:
                yield self._batch(lines, first, blanks)
            self.read = first + len(lines) + len(blanks) - 1
            self._reject_corrupt()  # after the lines read before it, as the row path always had it

    def _blocks(self, stream: IO[bytes]) -> Iterator[LineBatch]:
        """The columnar path's batches of a plain file: blocks of whole lines cut from big reads and split in C, no
        Python step per line (the row path's batches, with their lines as read, come back from `LineBatch.lines`)."""
        number, carry, bom = 1, b"", not self.file.start
        while chunk := stream.read(BATCH_BYTES):
            data = carry + chunk if carry else chunk
            cut = data.rfind(b"\n")
            if cut < 0:
                carry = data
                continue
            block, carry = data[:cut], data[cut + 1:]
            if bom:
                block, bom = block.removeprefix(BOM), False
            number += yield from self._split(block, number, ended=True)
        if carry:
            number += yield from self._split(carry.removeprefix(BOM) if bom else carry, number, ended=False)
        self.read = number - 1

    def _split(self, block: bytes, first: int, ended: bool) -> Generator[LineBatch, None, int]:
        """The lines of `block` (numbered from `first`; the last one ended by "\\n" unless not `ended`) in batches of
        up to BATCH_LINES, then returns how many lines it had: a framed block (`JsonLines`) is cut at its line ends
        with no Python step per line; any other is split, and a blank line among its lines skipped as the row path
        skips it."""
        ends = _line_ends_if_framed(block)
        if ends is None:
            lines = block.split(b"\n")
            kept = [(n, line) for n, line in enumerate(lines, first) if line and not line.isspace()]
            for i in range(0, len(kept), BATCH_LINES):
                part = kept[i:i + BATCH_LINES]
                values = [line for _, line in part]
                last = ended or part[-1][0] != first + len(lines) - 1
                yield LineBatch("json", values, _Ended(values, last), [n for n, _ in part])
            return len(lines)
        count = len(ends) + 1
        for i in range(0, count, BATCH_LINES):
            start = int(ends[i - 1]) + 1 if i else 0
            more = i + BATCH_LINES < count
            values = JsonLines(block[start:int(ends[i + BATCH_LINES - 1]) if more else len(block)],
                               min(BATCH_LINES, count - i))
            yield LineBatch("json", values, _Ended(values, ended or more), range(first + i, first + i + len(values)))
        return count

    def _batch(self, lines: list[bytes], first: int, blanks: list[int]) -> LineBatch:
        """The batch of `lines`, numbered from `first` on past the `blanks` between them."""
        numbers: Sequence[int] = range(first, first + len(lines))
        if blanks:  # rare: number the lines around them one by one
            skipped = set(blanks)
            numbers = [n for n in range(first, first + len(lines) + len(blanks)) if n not in skipped]
        values = lines
        if self._columnar:
            values = [raw[:-1] for raw in lines]
            if not lines[-1].endswith(b"\n"):  # the file's last line, with no line end
                values[-1] = lines[-1]
        return LineBatch("json", values, lines, numbers)

    def records_of(self, batch: RawBatch) -> Iterator[Record]:
        assert isinstance(batch, LineBatch)
        loads = orjson.loads
        reject = self.context.reject
        for self.line, raw in zip(batch.numbers, batch.lines):
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
        """Lines decoded one at a time: an invalid one is kept (surrogate-escaped) and remembered, so only its row
        is rejected; a corrupt stream's reject comes as the reader asks past the last line read."""
        for self.read, raw in enumerate(self._lines(stream), 1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                self._bad_lines[self.read] = str(exc)
                text = raw.decode("utf-8", "surrogateescape")
            self._last = text
            yield text
        self._reject_corrupt()

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


def _line_ends_if_framed(block: bytes) -> Any | None:
    """The offsets of `block`'s "\\n"s (a numpy array) when its lines are framed as `JsonLines` says, else None;
    checked by numpy over the bytes, with no Python step per line (Arrow's uint8 kernels took 6 times as long)."""
    if not block or block[0] != 0x7B or block[-1] != 0x7D or b"\r" in block:  # "{" first, "}" last
        return None
    try:
        import numpy as np
    except ImportError:  # the columnar path's extras bring it; without it, blocks are split line by line
        return None
    data = np.frombuffer(block, np.uint8)
    ends = np.flatnonzero(data == 0x0A)
    if len(ends) and not ((data[ends - 1] == 0x7D).all() and (data[ends + 1] == 0x7B).all()):
        return None
    return ends


def _shown(text: str) -> str:
    """`text` with undecodable bytes shown as U+FFFD (error files are UTF-8 JSON)."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
