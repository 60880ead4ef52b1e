"""The `files` source: a directory of .jsonl / .csv files, one dataset per sub-directory; local or any
filesystem URL (`s3://bucket/in`).

As Gobblin's FileBasedSource, the state of a dataset is the set of files already ingested
(watermark key = the file's path in the dataset, value = its size); each new file is a WorkUnit.
"""

from __future__ import annotations

import csv
import fnmatch
import io
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import orjson
from pydantic import Field

from gobblin_py.api import Extractor, Settings, Source, SourceState, TaskContext, WorkUnit
from gobblin_py.api.types import Record, Schema, WatermarkValue
from gobblin_py.config.paths import ExistingDirLocation
from gobblin_py.durable import bytes_checksum
from gobblin_py.errors import FileSystemError, SourceError
from gobblin_py.fs import Location, filesystem_for

log = logging.getLogger(__name__)


class FilesSettings(Settings):
    path: ExistingDirLocation
    include: list[str] = Field(default_factory=lambda: ["*.jsonl", "*.json", "*.ndjson", "*.csv"])
    csv_delimiter: str = Field(default=",", min_length=1, max_length=1)


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "file"


class FilesSource(Source):
    """One WorkUnit per file not yet ingested, per dataset sub-directory of `path`."""

    Settings = FilesSettings

    def get_workunits(self, state: SourceState) -> list[WorkUnit]:
        root = Location(self.settings.path)
        fs = filesystem_for(root)
        try:
            if not fs.is_dir(root):
                raise SourceError(f"source.path {root} is not a directory")
            files = fs.find(root)
        except FileSystemError as exc:
            raise SourceError(f"cannot list source.path {root}: {exc}") from exc
        units: list[WorkUnit] = []
        done_of: dict[str, dict[str, WatermarkValue]] = {}
        for file, size in files.items():
            dataset, _, rel = file[len(root.rstrip("/")) + 1:].partition("/")
            if not rel or dataset.startswith((".", "_")) or file.name.startswith((".", "_")):
                continue  # datasets are the sub-directories; hidden files and directories are skipped
            if not any(fnmatch.fnmatch(file.name, pat) for pat in self.settings.include):
                continue
            done = done_of.setdefault(dataset, state.watermarks(dataset))
            if rel in done:
                if done[rel] != size:
                    log.warning("%s changed size since it was ingested (%s → %s bytes); files are ingested once, not re-read", file, done[rel], size)
                continue
            wu_id = f"{_safe(Path(rel).stem)}-{bytes_checksum(f'{dataset}/{rel}'.encode())}"
            units.append(WorkUnit(id=wu_id, dataset=dataset, watermark_key=rel, low_watermark=None,
                                  expected_high_watermark=size, props={"file": str(file)}))
        return units

    def get_extractor(self, workunit: WorkUnit, context: TaskContext) -> Extractor:
        path = Location(workunit.props["file"])
        if path.name.lower().endswith(".csv"):
            return CsvExtractor(path, context, self.settings.csv_delimiter)
        return JsonLinesExtractor(path, context)


class _FileExtractor(Extractor):
    def __init__(self, path: Location, context: TaskContext) -> None:
        self.path = path
        self.context = context
        self.line = 0
        self.fs = filesystem_for(path)
        size = self.fs.size(path)
        if size is None:
            raise SourceError(f"input file {path} disappeared before it was read")
        self._size = size

    def _open(self) -> IO[bytes]:
        return self.fs.open_read(self.path)

    def _open_text(self) -> io.TextIOWrapper:
        return io.TextIOWrapper(self._open(), encoding="utf-8-sig", newline="")  # tolerate Excel's byte-order mark

    def location(self) -> str:
        return f"{self.path}:{self.line}"

    def actual_high_watermark(self) -> WatermarkValue:
        return self._size


class JsonLinesExtractor(_FileExtractor):
    """One JSON object per line; a line that is not an object goes to the bad-record handling."""

    def get_schema(self) -> Schema:
        return {"type": "json", "source": str(self.path)}

    def read_records(self) -> Iterator[Record]:
        loads = orjson.loads
        reject = self.context.reject
        with self._open() as f:
            for self.line, raw in enumerate(f, 1):
                if not raw.strip():
                    continue
                try:
                    record = loads(raw)
                except orjson.JSONDecodeError as exc:
                    reject(raw.decode("utf-8", "replace").rstrip("\n"), f"not valid JSON: {exc}", self.location())
                    continue
                if type(record) is not dict:
                    reject(record, f"expected a JSON object, got {type(record).__name__}", self.location())
                    continue
                yield record


class CsvExtractor(_FileExtractor):
    """CSV with a header row; a row with the wrong number of columns goes to the bad-record handling."""

    def __init__(self, path: Location, context: TaskContext, delimiter: str) -> None:
        super().__init__(path, context)
        self.delimiter = delimiter
        self._header: list[str] | None = None

    def _read_header(self) -> list[str]:
        if self._header is None:
            with self._open_text() as f:
                self._header = next(csv.reader(f, delimiter=self.delimiter), [])
        return self._header

    def get_schema(self) -> Schema:
        return {"type": "csv", "source": str(self.path), "fields": self._read_header()}

    def read_records(self) -> Iterator[Record]:
        with self._open_text() as f:
            reader = csv.reader(f, delimiter=self.delimiter)
            header = next(reader, None)
            if header is None:
                return
            width = len(header)
            for row in reader:
                self.line = reader.line_num
                if not row:
                    continue
                if len(row) != width:
                    self.context.reject(self.delimiter.join(row), f"expected {width} columns ({', '.join(header)}), got {len(row)}", self.location())
                    continue
                yield dict(zip(header, row))
