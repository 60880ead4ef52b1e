"""The extractor of a packed work unit: several small files of one dataset and format read one after another, each
by its own format's extractor, into the task's one writer (see `source` for how files are packed).

Each batch is decoded by the extractor of the file it came from (`records_of`, `to_arrow` and `location` follow the
file being read), so a bad record names its own file and line; a file opened only when its turn comes is checked
then (missing or shorter than planned fails the task, and so every file of the unit waits for the next run)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from gobblin_py.api import BatchExtractor, RawBatch
from gobblin_py.api.context import SourceMessage
from gobblin_py.api.types import Record, Schema, WatermarkValue
from gobblin_py.builtin.sources.files.reading import FileRange


class PackedExtractor(BatchExtractor):
    """Reads `parts` in order, each through the extractor `open_one` makes for it (one open at a time)."""

    def __init__(self, parts: list[FileRange], open_one: Callable[[FileRange], BatchExtractor]) -> None:
        self._parts = parts
        self._open_one = open_one
        self._current = open_one(parts[0])
        self._columnar = False

    def get_schema(self) -> Schema:
        """The first file's schema: files are packed only where all of a unit's have the same (JSON lines, or CSV
        with `csv_columns`)."""
        return self._current.get_schema()

    def columnar_path(self) -> None:
        self._columnar = True
        self._current.columnar_path()

    def read_batches(self) -> Iterator[RawBatch]:
        for i, part in enumerate(self._parts):
            if i:
                self._current.close()
                self._current = self._open_one(part)
                if self._columnar:
                    self._current.columnar_path()
            yield from self._current.read_batches()

    def records_of(self, batch: RawBatch) -> Iterator[Record]:
        return self._current.records_of(batch)

    def to_arrow(self, batch: RawBatch) -> Any | None:
        return self._current.to_arrow(batch)

    def location(self) -> str:
        return self._current.location()

    def current_message(self) -> SourceMessage | None:
        return self._current.current_message()

    def actual_high_watermark(self) -> WatermarkValue:
        """The first file's end, as the unit's `watermark_key` is the first file's; every file's own watermark is its
        planned end (`WorkUnit.reached`), since the task succeeds only once it read them all."""
        return self._parts[0].end

    def close(self) -> None:
        self._current.close()
