"""The columnar path: an extractor's raw values in batches, turned into Arrow record batches by one converter and
handed whole to the writer, instead of one Python record at a time.

A task takes it when its extractor is a `BatchExtractor`, its converter chain is one `BatchConverter` (or empty,
for an extractor that `makes_arrow` itself, as the jdbc source does), it has no row checks and one branch whose
writer is a `BatchWriter`. Any batch a stage cannot take exactly as the row
path would (a value the converter would coerce or refuse, a record the writer would route elsewhere) is handed
back — `None` or `False` — and that batch goes through the row path record by record, via
`BatchExtractor.records_of`. So both paths write the same records and send the same bad records to the error
file; the columnar one only skips the per-record Python work for the batches where nothing needs it.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, final

from gobblin_py.api.source import Extractor
from gobblin_py.api.types import Record

ROW_VALUES = b"gobblin.row_values"
"""Arrow field metadata an extractor's batch may carry: `datetime` says the row path's values of that timestamp
column are datetimes, so a writer splits a batch by partition as it would place those (see `TimePartitioner.split`);
`naive-datetime` says they are datetimes without a zone, which the row path places by this machine's wall clock: a
batch partitioned on such a column takes the row path."""


@dataclass(frozen=True)
class RawBatch:
    """Consecutive raw values of one WorkUnit, not yet decoded: `format` says what each value is (`json`: one
    JSON document; a Kafka extractor uses its deserializer's name; `rows`: a database row's tuple of values),
    and None is a value-less record (a tombstone)."""

    format: str
    values: Sequence[Any]


class JsonLines(Sequence[bytes]):
    """`count` JSON documents, one a line of `data` ("\\n" between them, none after the last), each line opening
    with "{" and closing with "}", no "\\r" anywhere: framed as Arrow's JSON reader frames a buffer, one document a
    row, so a reader parses `data` whole with no check of its own; the values are split off only when asked for
    (the row path). An extractor that has checked its lines' framing anyway hands them on so (files, JSON lines)."""

    __slots__ = ("_lines", "count", "data")

    def __init__(self, data: bytes, count: int) -> None:
        self.data, self.count = data, count
        self._lines: list[bytes] | None = None

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int) -> bytes:  # type: ignore[override]
        if self._lines is None:
            self._lines = self.data.split(b"\n")
        return self._lines[i]


@dataclass(frozen=True)
class CsvBlock(RawBatch):
    """A batch of format `csv`: `data` holds whole consecutive CSV rows as read (a header row, a byte-order mark cut
    off), each row one record or a blank line, its quotes standard (a quoted field opens at a field's start and
    closes before a delimiter or a line end; `""` inside it is a quote) and its fields no longer than `field_size_limit`
    characters where a quoted field could be longer; `columns` names the fields, `delimiter` separates them, and
    `first` is the number of its first line. `values` is empty: its records are counted as they are read."""

    data: bytes = b""
    columns: tuple[str, ...] = ()
    delimiter: str = ","
    field_size_limit: int = 0
    first: int = 1


class BatchExtractor(Extractor):
    """An Extractor that can hand out its values undecoded; its `read_records` is `records_of` over `read_batches`,
    so both paths read, decode and reject the same way."""

    @final
    def read_records(self) -> Iterator[Record]:
        for batch in self.read_batches():
            yield from self.records_of(batch)

    @abc.abstractmethod
    def read_batches(self) -> Iterator[RawBatch]:
        """The WorkUnit's values in order; the watermark reached moves past a batch once the next is asked for."""

    @abc.abstractmethod
    def records_of(self, batch: RawBatch) -> Iterator[Record]:
        """The row path of one batch: its decoded records, with `location()` at each and bad values rejected."""

    def columnar_path(self) -> None:
        """Told before `read_batches` when the task takes the columnar path: an extractor whose batches can come
        straight from a native Arrow reader may switch to it (its `records_of` must still take any batch)."""

    makes_arrow: bool = False
    """True for an extractor whose `to_arrow` turns its own batches into Arrow (a task without converters)."""

    def to_arrow(self, batch: RawBatch) -> Any | None:
        """The records `records_of` would give of the batch, as one `pyarrow.RecordBatch` of the Arrow mapping of
        the extractor's schema, or None when that cannot be proven for this batch (it then takes the row path)."""
        return None


class BatchConverter(abc.ABC):
    """A Converter (mixin) that can turn a whole RawBatch into one Arrow record batch of its output schema."""

    @abc.abstractmethod
    def convert_batch(self, batch: RawBatch) -> Any | None:
        """A `pyarrow.RecordBatch` holding exactly the records `convert_record` would make of the batch's values
        (same count, same values), or None when that cannot be proven for this batch: it then takes the row path."""

    def batch_written(self) -> None:
        """Told when the batch `convert_batch` last returned was written whole (so it takes no row path): a converter
        that counts something of its batches (input fields dropped) counts it here, never twice."""


class BatchWriter(abc.ABC):
    """A DataWriter (mixin) that can write an Arrow record batch of its schema at once."""

    def takes_batches(self) -> bool:
        """Whether this writer, as opened, can take batches at all (the Avro writer cannot for a schema its Arrow
        encoder lacks a type of); a task whose writer cannot keeps to the row path."""
        return True

    @abc.abstractmethod
    def write_batch(self, batch: Any) -> bool:
        """Write every row of `batch` (a `pyarrow.RecordBatch`) as `write` would, and return True; or write nothing
        and return False when a row would be refused or routed differently (the batch then takes the row path)."""
