"""The `avro` writer: fastavro container files, optionally time-partitioned by a record field."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any, BinaryIO, Literal, NoReturn

import fastavro
from fastavro.write import Writer
from pydantic import Field

from gobblin_py.api import DataWriter, Settings, WriterTarget
from gobblin_py.api.types import Record, Schema
from gobblin_py.builtin.avro_values import AvroTypeChecker
from gobblin_py.builtin.partitioned_files import PartitionedFiles, RollSettings
from gobblin_py.builtin.time_partitioner import PartitionSettings
from gobblin_py.errors import RecordError, TaskError, is_record_fault


class AvroWriterSettings(Settings):
    codec: Literal["null", "deflate", "snappy", "zstandard"] = "deflate"
    codec_level: int | None = None
    sync_interval: int = Field(default=16000 * 64, ge=1024)
    partition: PartitionSettings | None = None
    roll: RollSettings | None = None


class _Open:
    __slots__ = ("file", "writer", "tell", "ratio")

    def __init__(self, file: BinaryIO, writer: Writer) -> None:
        self.file = file
        self.writer = writer
        self.tell = writer.io.tell  # where the current block's bytes end
        self.ratio = 1.0  # compressed / encoded bytes of the last block written out for rolling


class _Block:
    """What fastavro's `Writer.write_block` takes: a count and the encoded records."""

    def __init__(self, num_records: int, data: bytes) -> None:
        self.num_records = num_records
        self.bytes_ = io.BytesIO(data)


class AvroWriter(DataWriter):
    """Writes Avro container files; the schema must be an Avro record (use json_to_avro first).

    A record that cannot be encoded is a RecordError naming the field, and leaves the file valid:
    fastavro encodes into the current block field by field, so the bytes a failed record left there
    are cut off before the next record is added.
    """

    Settings = AvroWriterSettings

    def open(self, schema: Schema, target: WriterTarget) -> None:
        if not (isinstance(schema, dict) and schema.get("type") == "record"):
            raise TaskError("the avro writer needs an Avro record schema; add a json_to_avro converter before it")
        self.schema = fastavro.parse_schema(schema)
        self._raw_schema = schema
        s = self.settings
        self.files: PartitionedFiles[_Open] = PartitionedFiles(target, ".avro", s.partition, self._open_file, self._close_file,
                                                               s.roll, self._size)
        self._max_bytes = s.roll.max_bytes if s.roll is not None else None

    def _open_file(self, path: Path) -> _Open:
        f = open(path, "wb")
        s = self.settings
        marker = hashlib.md5(path.name.encode()).digest()  # same range → byte-identical file
        return _Open(f, Writer(f, self.schema, codec=s.codec, sync_interval=s.sync_interval,
                               compression_level=s.codec_level, sync_marker=marker))

    def _size(self, h: _Open) -> int:
        """The file's size so far: written blocks plus the open block at the last block's compression ratio; when
        that reaches the roll size the block is written out to know exactly, so a compressed file is not cut short."""
        written, pending = h.file.tell(), h.tell()
        estimate = written + int(pending * h.ratio)
        if pending and self._max_bytes is not None and estimate >= self._max_bytes:
            h.writer.flush()
            now = h.file.tell()
            h.ratio = max((now - written) / pending, 0.001)
            return now
        return estimate

    @staticmethod
    def _close_file(handle: _Open) -> None:
        handle.writer.flush()
        handle.file.close()

    def write(self, record: Record) -> None:
        files = self.files
        key = files.key_for(record)
        h = files.handle(key)
        before = h.tell()
        try:
            h.writer.write(record)
        except Exception as exc:  # noqa: BLE001 - a record's fault is refused below, anything else re-raised
            self._refuse(h.writer, before, record, exc)
        files.counts[key] += 1

    def append_block(self, block: Any) -> None:
        """Copy one block of another container file of the same schema, its records neither decoded nor encoded
        (compaction); an unpartitioned writer only. `block` is what `fastavro.block_reader` yields: a file rolls
        before a block that would take it to `roll.max_bytes`, so a file passes it only by a block larger than it."""
        h = self.files.handle("", coming=block.size)
        h.writer.write_block(block)  # records written before it become a block of their own first
        self.files.counts[""] += block.num_records

    def _refuse(self, w: Writer, before: int, record: Record, exc: Exception) -> NoReturn:
        """Cut what `record` left in the block, then raise the RecordError naming it (or re-raise `exc`)."""
        if not is_record_fault(exc):
            raise exc
        try:
            if w.io.tell() != before:
                encoded, count = w.io.getvalue()[:before], w.block_count
                w.io.clear()
                w.block_count = 0
                if count:
                    w.write_block(_Block(count, encoded))  # the records before it, as a block of their own
        except AttributeError as internals:  # fastavro changed: fail the task rather than write a torn block
            raise TaskError(f"cannot drop a partly encoded record from an Avro block ({internals}); "
                            f"the record: {_why(self._raw_schema, record, exc)}") from exc
        raise RecordError(f"cannot encode as Avro: {_why(self._raw_schema, record, exc)}") from None

    def close(self) -> list[tuple[Path, int]]:
        return self.files.close()


def _why(schema: dict[str, Any], record: Record, exc: Exception) -> str:
    """The first field whose value does not fit its type (or is not UTF-8 text), with the encoder's error."""
    checker = AvroTypeChecker(schema)
    for field in checker.parsed_fields():
        value = record.get(field["name"]) if isinstance(record, dict) else None
        if not checker.matches(value, field["type"]) or not _utf8(value):
            return f"field {field['name']!r}: {_short(value)} ({type(exc).__name__}: {exc})"
    return f"{type(exc).__name__}: {exc}"


def _utf8(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(value, dict):
        return all(_utf8(k) and _utf8(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(_utf8(v) for v in value)
    return True


def _short(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"
