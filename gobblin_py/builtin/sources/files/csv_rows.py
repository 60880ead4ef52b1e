"""The `files` source's CSV extractor: a header row (or `csv_columns`), rows read by Python's `csv` on the row path
and cut into blocks of whole rows (`CsvBlock`) for Arrow's CSV reader on the columnar path, where the quoting is
standard; a block that is not sends the rest of the range to the row path."""

from __future__ import annotations

import csv
import io
import itertools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any

from gobblin_py.api import BatchExtractor, CsvBlock, RawBatch, TaskContext
from gobblin_py.api.types import Record, Schema
from gobblin_py.builtin.sources.files import reading
from gobblin_py.builtin.sources.files.compression import Compression
from gobblin_py.builtin.sources.files.reading import BOM, SHOWN_CHARS, FileExtractor, FileRange

_Item = tuple[int, Any, "str | None"]
"""What the row path makes of one CSV row: (its line, the row, None) for a record, (line, shown value, reason) for
a reject."""


@dataclass(frozen=True)
class _CsvRows(RawBatch):
    """Rows already read by Python's `csv` (the row path's batches, which no converter takes): `values` are `_Item`s."""


class CsvExtractor(FileExtractor, BatchExtractor):
    """CSV with a header row, or with none and `columns` naming them; a row with the wrong number of columns,
    invalid UTF-8 or a field over `field_size_limit` characters goes to the bad-record handling. A range after
    the file's start reads the header from the start, then the range's rows.

    Rows come in batches read by Python's `csv`, or, on the columnar path, in `CsvBlock`s of whole rows cut from big
    reads (`_blocks`), which `records_of` reads with Python's `csv` just as the row path would; once a block's quoting
    is not standard, the rest of the range comes in the row path's batches."""

    _columnar = False  # set by `columnar_path`: only then do batches come as blocks

    def __init__(self, file: FileRange, context: TaskContext, delimiter: str, field_size_limit: int,
                 columns: list[str] | None = None) -> None:
        super().__init__(file, context)
        self.delimiter = delimiter
        self.field_size_limit = field_size_limit
        self.headerless = columns is not None
        self._header: list[str] | None = list(columns) if columns is not None else None
        self._header_lines = 0  # how many lines the header row takes
        self._bad_lines: dict[int, str] = {}  # line number → the UnicodeDecodeError, for lines of the current row
        self._last: str = ""
        self._due: str | None = None  # the reject of a corrupt stream, due before the row the reader is at
        d = delimiter.encode()
        blocks = len(d) == 1 and d not in b'"\r\n'  # else no blocks: Arrow's delimiter is one byte
        self._quoting = _standard_quoting(d, bare_cr=True) if blocks else None
        self._quoting_cr = _standard_quoting(d, bare_cr=False) if blocks else None

    def _text(self, lines: Iterable[bytes], first: int = 1, ends_stream: bool = True) -> Iterator[str]:
        """Lines (numbered from `first`) decoded one at a time: an invalid one is kept (surrogate-escaped) and
        remembered, so only its row is rejected. When lines that run to the stream's end (`ends_stream`) end, a
        corrupt stream's reject falls due (`_due`), as the reader asks past the last line read."""
        for self.read, raw in enumerate(lines, first):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                self._bad_lines[self.read] = str(exc)
                text = raw.decode("utf-8", "surrogateescape")
            self._last = text
            yield text
        if ends_stream:
            self._due = self._take_corrupt()

    def _reader(self, text: Iterator[str]) -> csv.reader:  # type: ignore[valid-type]
        csv.field_size_limit(self.field_size_limit)  # process-wide; every CSV extractor sets its own before reading
        return csv.reader(text, delimiter=self.delimiter)

    def _read_header(self) -> list[str]:
        if self._header is None:
            with self._open(0, self.file.end) as f:
                reader = self._reader(self._text(self._lines(f)))
                header = next(reader, [])
                if self._due is not None:  # the stream ended before the header did
                    self.line = self.read + 1
                    self.context.reject(None, self._due, self.location())
                    self._due = None
                self._header_lines = reader.line_num
            self._header = [_shown(h) for h in header]
            self._bad_lines.clear()
        return self._header

    def get_schema(self) -> Schema:
        return {"type": "csv", "source": str(self.path), "fields": self._read_header()}

    def columnar_path(self) -> None:
        self._columnar = True

    def read_batches(self) -> Iterator[RawBatch]:
        self._read_header()
        skip = not self.file.start and not self.headerless  # the range's first row is the header
        with self._open(self.file.start, self.file.end) as f:
            if self._columnar and self._quoting is not None:
                yield from self._blocks(f, skip)
            else:
                yield from self._row_batches(self._lines(f), 1, skip)

    def _row_batches(self, lines: Iterator[bytes], first: int, skip: bool) -> Iterator[_CsvRows]:
        """The row path's batches: the rows Python's `csv` reads of `lines` (numbered from `first`), BATCH_LINES
        rows each, a corrupt stream's reject among them where the reader got to it."""
        items: list[_Item] = []
        for item in self._items(self._text(lines, first), first - 1, skip):
            items.append(item)
            if len(items) >= reading.BATCH_LINES:
                yield _CsvRows("csv_rows", items)
                items = []
        if items:
            yield _CsvRows("csv_rows", items)

    def _items(self, text: Iterator[str], offset: int, skip: bool) -> Iterator[_Item]:
        """The row path: what each row of `text` makes, its line counted from `offset`, the header row first skipped
        if `skip`; a corrupt stream's reject where it fell due (`_text`), before the row the reader was at."""
        header = self._header or []
        width = len(header)
        bad = self._bad_lines
        reader = self._reader(text)
        if skip:
            first = next(reader, None)
            if self._due is not None:
                yield self.read + 1, None, self._due
                self._due = None
            if first is None:
                return
        bad.clear()
        while True:
            try:
                row = next(reader)
            except StopIteration:
                if self._due is not None:
                    yield self.read + 1, None, self._due
                    self._due = None
                return
            except csv.Error as exc:
                bad.clear()
                yield offset + reader.line_num, _shown(self._last)[:SHOWN_CHARS], f"unreadable CSV row: {exc}"
                continue
            if self._due is not None:  # the stream ended inside this row
                yield self.read + 1, None, self._due
                self._due = None
            line = offset + reader.line_num
            if bad:
                first_bad = min(bad)
                yield (line, _shown(self.delimiter.join(row))[:SHOWN_CHARS],
                       f"invalid UTF-8 on line {first_bad}: {bad[first_bad]}")
                bad.clear()
                continue
            if not row:
                continue
            if len(row) != width:
                yield line, self.delimiter.join(row), f"expected {width} columns ({', '.join(header)}), got {len(row)}"
                continue
            yield line, row, None

    def _blocks(self, stream: IO[bytes], skip: bool) -> Iterator[RawBatch]:
        """The columnar path's batches: `CsvBlock`s of whole rows from big reads (of a compressed file, from its lines
        put together), cut at the last "\\n" after an even count of quotes, with no Python step per row; from a block
        whose quoting is not standard (or a quoted field longer than any block) on, the row path's batches."""
        plain = self.compression is Compression.NONE
        lines = None if plain else self._lines(stream)
        chunks = _reads(stream) if lines is None else _joined(lines)
        number, carry, bom = 1, b"", plain and not self.file.start
        skip_lines = self._header_lines if skip else 0
        columns = tuple(self._header or ())
        for chunk in chunks:
            data = carry + chunk if carry else chunk
            if bom:
                data, bom = data.removeprefix(BOM), False
            if skip_lines:
                start = _after_lines(data, skip_lines)
                if start < 0:  # the header row goes on
                    carry = data
                    continue
                data, number, skip_lines = data[start:], number + skip_lines, 0
            cut = _row_end(data)
            block, carry = data[:cut], data[cut:]
            if not block:
                if len(carry) > MAX_CARRY:  # a quoted field bigger than any block: the row path reads it
                    yield from self._row_batches(self._rest(carry, stream, lines), number, False)
                    return
                continue
            if not self._standard(block):
                yield from self._row_batches(self._rest(data, stream, lines), number, False)
                return
            yield CsvBlock("csv", (), block, columns, self.delimiter, self.field_size_limit, number)
            number += block.count(b"\n")
        if carry and not skip_lines:  # the last row, with no line end or inside quotes: maybe the row path's
            if _row_end(carry + b"\n") != len(carry) + 1 or not self._standard(carry):
                yield from self._row_batches(iter(io.BytesIO(carry)), number, False)
                return
            yield CsvBlock("csv", (), carry, columns, self.delimiter, self.field_size_limit, number)
        number += carry.count(b"\n") + (not carry.endswith(b"\n")) if carry else 0  # the lines read, the header's too
        self.read = number - 1
        self._reject_corrupt()  # after the rows read before it, as the row path has it

    def _standard(self, block: bytes) -> bool:
        """Whether `block`'s quoting is standard (see `CsvBlock`), so that Python's `csv` ends a row at each "\\n"
        after an even count of quotes: then the block's cuts are the row path's."""
        if b'"' not in block:
            return True  # each line a row; a bare "\r" fails only its own line
        if len(block) > self.field_size_limit:
            return False  # a field over the limit ends Python's row where no quote count can tell
        quoting = self._quoting
        if b"\r" in block and block.count(b"\r") != block.count(b"\r\n"):
            quoting = self._quoting_cr  # a bare "\r" outside quotes ends Python's row too: only inside them
        return quoting is not None and quoting.fullmatch(block) is not None

    def _rest(self, data: bytes, stream: IO[bytes], lines: Iterator[bytes] | None) -> Iterator[bytes]:
        """The lines from `data` (the start of a row) on to the end of the range: of a plain `stream` after the read
        `data` ends in, else of the compressed file's `lines` (`data` then holds whole lines)."""
        if lines is not None:
            return itertools.chain(io.BytesIO(data), lines)
        if not data.endswith(b"\n"):
            data += stream.readline()
        return itertools.chain(io.BytesIO(data), stream)

    def records_of(self, batch: RawBatch) -> Iterator[Record]:
        if isinstance(batch, CsvBlock):
            text = self._text(io.BytesIO(batch.data), batch.first, ends_stream=False)
            items: Iterable[_Item] = self._items(text, batch.first - 1, False)
        else:
            assert isinstance(batch, _CsvRows)
            items = batch.values
        header = self._header or []
        reject = self.context.reject
        for self.line, value, reason in items:
            if reason is None:
                yield dict(zip(header, value))
            else:
                reject(value, reason, self.location())


MAX_CARRY = 16 * reading.BATCH_BYTES  # a quoted field that keeps a block open this long sends the range to the row path


def _standard_quoting(delimiter: bytes, bare_cr: bool) -> re.Pattern[bytes]:
    """A pattern that a block of rows of standard quoting (see `CsvBlock`) matches whole: each quote opens a field,
    closes it before a delimiter or a line end, or is doubled inside it; unless `bare_cr`, a "\\r" outside quotes
    only before "\\n". Scanned in C, about 5 ns a byte (several times that without `bare_cr`)."""
    d = re.escape(delimiter)
    quoted = rb'(?<![^' + d + rb'\n])"[^"]*+(?:""[^"]*+)*+"(?=[' + d + rb'\r\n]|\Z)'
    outside = rb'[^"]*+' if bare_cr else rb'[^"\r]*+(?:\r\n[^"\r]*+)*+'
    return re.compile(outside + rb'(?:' + quoted + outside + rb')*+')


def _reads(stream: IO[bytes]) -> Iterator[bytes]:
    """`stream` in reads of BATCH_BYTES (never shorter than a byte-order mark)."""
    while chunk := stream.read(max(reading.BATCH_BYTES, len(BOM))):
        yield chunk


def _joined(lines: Iterator[bytes]) -> Iterator[bytes]:
    """`lines` put together, about BATCH_BYTES at a time; between chunks none is held (the caller may go on with
    `lines` itself)."""
    part: list[bytes] = []
    size = 0
    for line in lines:
        part.append(line)
        size += len(line)
        if size >= reading.BATCH_BYTES:
            chunk = b"".join(part)
            part, size = [], 0
            yield chunk
    if part:
        yield b"".join(part)


def _after_lines(data: bytes, n: int) -> int:
    """Where the line after the first `n` lines of `data` starts, or -1 when `data` ends before."""
    at = 0
    for _ in range(n):
        at = data.find(b"\n", at) + 1
        if not at:
            return -1
    return at


def _row_end(data: bytes) -> int:
    """Just past the last "\\n" of `data` with an even count of quotes before it (outside a quoted field, under
    standard quoting); 0 when there is none."""
    end = data.rfind(b"\n") + 1
    quotes = data.count(b'"', 0, end) if end else 0
    while quotes % 2:  # inside a quoted field: go back before the line its last quote is on
        quote = data.rfind(b'"', 0, end)
        before = data.rfind(b"\n", 0, quote) + 1
        quotes -= data.count(b'"', before, end)
        end = before
    return end


def _shown(text: str) -> str:
    """`text` with undecodable bytes shown as U+FFFD (error files are UTF-8 JSON)."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
