"""The `files` source: a directory of .jsonl / .csv files, one dataset per sub-directory.

As Gobblin's FileBasedSource, the state of a dataset is the set of files already ingested
(watermark key = the file's path in the dataset, value = its size); each new file is a WorkUnit.
"""

from __future__ import annotations

import csv
import fnmatch
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import orjson
from pydantic import Field

from gobblin_py.api import Extractor, Settings, Source, SourceState, TaskContext, WorkUnit
from gobblin_py.api.types import Record, Schema, WatermarkValue
from gobblin_py.config.paths import ExistingDir
from gobblin_py.durable import bytes_checksum
from gobblin_py.errors import SourceError

log = logging.getLogger(__name__)


class FilesSettings(Settings):
    path: ExistingDir
    include: list[str] = Field(default_factory=lambda: ["*.jsonl", "*.json", "*.ndjson", "*.csv"])
    csv_delimiter: str = Field(default=",", min_length=1, max_length=1)


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "file"


class FilesSource(Source):
    """One WorkUnit per file not yet ingested, per dataset sub-directory of `path`."""

    Settings = FilesSettings

    def get_workunits(self, state: SourceState) -> list[WorkUnit]:
        root: Path = self.settings.path
        if not root.is_dir():
            raise SourceError(f"source.path {root} is not a directory")
        units: list[WorkUnit] = []
        for ds_dir in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
            dataset = ds_dir.name
            done = state.watermarks(dataset)
            for file in sorted(ds_dir.rglob("*")):
                rel = file.relative_to(ds_dir).as_posix()
                if not file.is_file() or file.name.startswith((".", "_")):
                    continue
                if not any(fnmatch.fnmatch(file.name, pat) for pat in self.settings.include):
                    continue
                size = file.stat().st_size
                if rel in done:
                    if done[rel] != size:
                        log.warning("%s changed size since it was ingested (%s → %s bytes); files are ingested once, not re-read", file, done[rel], size)
                    continue
                wu_id = f"{_safe(Path(rel).stem)}-{bytes_checksum(f'{dataset}/{rel}'.encode())}"
                units.append(WorkUnit(id=wu_id, dataset=dataset, watermark_key=rel, low_watermark=None,
                                      expected_high_watermark=size, props={"file": str(file)}))
        return units

    def get_extractor(self, workunit: WorkUnit, context: TaskContext) -> Extractor:
        path = Path(workunit.props["file"])
        if path.suffix.lower() == ".csv":
            return CsvExtractor(path, context, self.settings.csv_delimiter)
        return JsonLinesExtractor(path, context)


class _FileExtractor(Extractor):
    def __init__(self, path: Path, context: TaskContext) -> None:
        self.path = path
        self.context = context
        self.line = 0
        try:
            self._size = path.stat().st_size
        except FileNotFoundError:
            raise SourceError(f"input file {path} disappeared before it was read") from None

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
        with open(self.path, "rb") as f:
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

    def __init__(self, path: Path, context: TaskContext, delimiter: str) -> None:
        super().__init__(path, context)
        self.delimiter = delimiter
        self._header: list[str] | None = None

    def _read_header(self) -> list[str]:
        if self._header is None:
            with open(self.path, newline="", encoding="utf-8-sig") as f:
                self._header = next(csv.reader(f, delimiter=self.delimiter), [])
        return self._header

    def get_schema(self) -> Schema:
        return {"type": "csv", "source": str(self.path), "fields": self._read_header()}

    def read_records(self) -> Iterator[Record]:
        with open(self.path, newline="", encoding="utf-8-sig") as f:  # tolerate Excel's byte-order mark
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
