"""The `files` source's JSON-lines extractor: one JSON object a line, in batches of lines (`LineBatch`) that the row
path parses line by line and the columnar path hands to Arrow's JSON reader whole (`JsonLines` where a block's
framing was checked)."""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any

import orjson

from gobblin_py.api import BatchExtractor, JsonLines, RawBatch
from gobblin_py.api.types import Record, Schema
from gobblin_py.builtin.sources.files import reading
from gobblin_py.builtin.sources.files.compression import Compression
from gobblin_py.builtin.sources.files.reading import BOM, SHOWN_CHARS, FileExtractor


class _Ended(Sequence[bytes]):
    """Lines without their "\\n" given back as read: each with it, but for a last one the file ended without it."""

    __slots__ = ("ended", "values")

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


class JsonLinesExtractor(FileExtractor, BatchExtractor):
    """One JSON object per line; a line that is not an object goes to the bad-record handling. Blank lines are
    skipped; the rest come in `LineBatch`es of up to BATCH_LINES lines or BATCH_BYTES (`reading`)."""

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
                if size >= reading.BATCH_BYTES or len(lines) >= reading.BATCH_LINES:
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
        while chunk := stream.read(reading.BATCH_BYTES):
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
            for i in range(0, len(kept), reading.BATCH_LINES):
                part = kept[i:i + reading.BATCH_LINES]
                values = [line for _, line in part]
                last = ended or part[-1][0] != first + len(lines) - 1
                yield LineBatch("json", values, _Ended(values, last), [n for n, _ in part])
            return len(lines)
        count = len(ends) + 1
        for i in range(0, count, reading.BATCH_LINES):
            start = int(ends[i - 1]) + 1 if i else 0
            more = i + reading.BATCH_LINES < count
            values = JsonLines(block[start:int(ends[i + reading.BATCH_LINES - 1]) if more else len(block)],
                               min(reading.BATCH_LINES, count - i))
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
