"""The `avro` writer: fastavro container files, optionally time-partitioned by a record field."""

from __future__ import annotations

from pathlib import Path
from typing import Any, BinaryIO, Literal

import hashlib

import fastavro
from fastavro.write import Writer
from pydantic import Field

from gobblin_py.api import DataWriter, Settings, WriterTarget
from gobblin_py.api.types import Record, Schema
from gobblin_py.builtin.partitioned_files import PartitionedFiles
from gobblin_py.builtin.time_partitioner import PartitionSettings
from gobblin_py.errors import TaskError


class AvroWriterSettings(Settings):
    codec: Literal["null", "deflate", "snappy", "zstandard"] = "deflate"
    codec_level: int | None = None
    sync_interval: int = Field(default=16000 * 64, ge=1024)
    partition: PartitionSettings | None = None


class _Open:
    __slots__ = ("file", "writer")

    def __init__(self, file: BinaryIO, writer: Writer) -> None:
        self.file = file
        self.writer = writer


class AvroWriter(DataWriter):
    """Writes Avro container files; the schema must be an Avro record (use json_to_avro first)."""

    Settings = AvroWriterSettings

    def open(self, schema: Schema, target: WriterTarget) -> None:
        if not (isinstance(schema, dict) and schema.get("type") == "record"):
            raise TaskError("the avro writer needs an Avro record schema; add a json_to_avro converter before it")
        self.schema = fastavro.parse_schema(schema)
        s = self.settings
        self.files: PartitionedFiles[_Open] = PartitionedFiles(target, ".avro", s.partition, self._open_file, self._close_file)
        self._single: Any = None  # the unpartitioned file's fastavro write, bound once
        self._count = 0

    def _open_file(self, path: Path) -> _Open:
        f = open(path, "wb")
        s = self.settings
        marker = hashlib.md5(path.name.encode()).digest()  # same range → byte-identical file
        return _Open(f, Writer(f, self.schema, codec=s.codec, sync_interval=s.sync_interval,
                               compression_level=s.codec_level, sync_marker=marker))

    @staticmethod
    def _close_file(handle: _Open) -> None:
        handle.writer.flush()
        handle.file.close()

    def write(self, record: Record) -> None:
        if self.files.partitioner is not None:
            self.files.handle_for(record).writer.write(record)
            return
        if self._single is None:
            self._single = self.files.unpartitioned().writer.write
        self._single(record)
        self._count += 1

    def close(self) -> list[tuple[Path, int]]:
        return self.files.close(self._count if self._single is not None else None)
