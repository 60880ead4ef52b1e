"""The `jsonl` writer: JSON lines files (optionally gzip), optionally time-partitioned."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import IO, Literal

import orjson

from gobblin_py.api import DataWriter, Settings, WriterTarget
from gobblin_py.api.types import Record, Schema
from gobblin_py.builtin.partitioned_files import PartitionedFiles
from gobblin_py.builtin.time_partitioner import PartitionSettings


class JsonLinesSettings(Settings):
    compression: Literal["none", "gzip"] = "none"
    partition: PartitionSettings | None = None


class JsonLinesWriter(DataWriter):
    """One JSON object per line; any schema."""

    Settings = JsonLinesSettings

    def open(self, schema: Schema, target: WriterTarget) -> None:
        gz = self.settings.compression == "gzip"
        opener = (lambda p: gzip.open(p, "wb")) if gz else (lambda p: open(p, "wb"))
        self.files: PartitionedFiles[IO[bytes]] = PartitionedFiles(
            target, ".jsonl.gz" if gz else ".jsonl", self.settings.partition, opener, lambda f: f.close())
        self._dumps = orjson.dumps

    def write(self, record: Record) -> None:
        self.files.handle_for(record).write(self._dumps(record, option=orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS, default=str))

    def close(self) -> list[tuple[Path, int]]:
        return self.files.close()
