"""The `jsonl` writer: JSON lines files (optionally gzip), optionally time-partitioned."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import IO, Any, Literal

import orjson
from pydantic import Field

from gobblin_py.api import DataWriter, Settings, WriterTarget
from gobblin_py.api.types import Record, Schema
from gobblin_py.builtin.writers.partitioned_files import ROLL_HELP, PartitionedFiles, RollSettings
from gobblin_py.builtin.writers.time_partitioner import PARTITION_HELP, PartitionSettings
from gobblin_py.errors import RecordError

_OPTIONS = orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS


class JsonLinesSettings(Settings):
    compression: Literal["none", "gzip"] = Field(default="none", description="none, or gzip (files end .jsonl.gz)")
    partition: PartitionSettings | None = Field(default=None, description=PARTITION_HELP)
    roll: RollSettings | None = Field(default=None, description=ROLL_HELP)


class JsonLinesWriter(DataWriter):
    """One JSON object per line; any schema. Values JSON has no type for are written as text (`str`);
    a record orjson cannot encode at all (an int beyond 64 bits, a lone surrogate) is a RecordError."""

    Settings = JsonLinesSettings

    def open(self, schema: Schema, target: WriterTarget) -> None:
        gz = self.settings.compression == "gzip"
        opener = (lambda p: gzip.open(p, "wb")) if gz else (lambda p: open(p, "wb"))
        self.files: PartitionedFiles[IO[bytes]] = PartitionedFiles(
            target, ".jsonl.gz" if gz else ".jsonl", self.settings.partition, opener, lambda f: f.close(),
            self.settings.roll, _size)
        self._dumps = orjson.dumps

    def write(self, record: Record) -> None:
        try:  # the whole line is encoded before any byte of it reaches the file
            line = self._dumps(record, option=_OPTIONS, default=str)
        except TypeError as exc:
            raise RecordError(f"cannot encode as JSON: {_culprit(record)}{exc}") from None
        files = self.files
        key = files.key_for(record)
        files.handle(key).write(line)
        files.counts[key] += 1

    def close(self) -> list[tuple[Path, int]]:
        return self.files.close()


def _size(f: IO[bytes]) -> int:
    """Bytes written so far: for gzip the compressed bytes out (the compressor holds back a few KB more)."""
    return f.fileobj.tell() if isinstance(f, gzip.GzipFile) else f.tell()  # type: ignore[union-attr]


def _culprit(record: Any) -> str:
    """`field 'x': ` for the first top-level field orjson refuses, else nothing."""
    if isinstance(record, dict):
        for key, value in record.items():
            try:
                orjson.dumps(value, option=_OPTIONS, default=str)
            except TypeError:
                return f"field {key!r}: "
    return ""
