"""The `bytes` writer: each record's bytes as they are, optionally delimited and length-prefixed (Gobblin's
SimpleDataWriter, which the Kafka quick start uses to write each message's value)."""

from __future__ import annotations

from pathlib import Path
from typing import IO

from pydantic import Field, field_validator

from gobblin_py.api import DataWriter, Settings, WriterTarget
from gobblin_py.api.types import Record, Schema
from gobblin_py.builtin.writers.partitioned_files import ROLL_HELP, PartitionedFiles, RollSettings
from gobblin_py.builtin.writers.time_partitioner import PARTITION_HELP, PartitionSettings
from gobblin_py.errors import RecordError


class BytesWriterSettings(Settings):
    field: str = Field(default="value", min_length=1, description="the record field holding the bytes (text is written as UTF-8)")
    delimiter: str | None = Field(default=None, description="one ASCII character written after each record; unset or empty: none")
    prepend_size: bool = Field(default=False, description="an 8-byte big-endian length of the record (and its delimiter) before it")
    extension: str = Field(default="txt", pattern=r"^([A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*)?$",
                           description="the files' extension, without the dot; empty: none")
    partition: PartitionSettings | None = Field(default=None, description=PARTITION_HELP)
    roll: RollSettings | None = Field(default=None, description=ROLL_HELP)

    @field_validator("delimiter")
    @classmethod
    def _one_byte(cls, value: str | None) -> str | None:
        if value and (len(value) != 1 or not value.isascii()):
            raise ValueError(f"one ASCII character (a single byte), e.g. '\\n'; got {value!r}")
        return value or None


class BytesWriter(DataWriter):
    """Writes the bytes of each record's `field` (`bytes`, or `str` as UTF-8) back to back; any schema.

    A record without that field, or whose value is neither bytes nor text, is a RecordError naming the field.
    """

    Settings = BytesWriterSettings

    def open(self, schema: Schema, target: WriterTarget) -> None:
        s = self.settings
        self.files: PartitionedFiles[IO[bytes]] = PartitionedFiles(
            target, f".{s.extension}" if s.extension else "", s.partition, lambda p: open(p, "wb"), lambda f: f.close(),
            s.roll, lambda f: f.tell())
        self._delimiter = s.delimiter.encode("ascii") if s.delimiter else b""

    def write(self, record: Record) -> None:
        data = self._bytes_of(record) + self._delimiter  # the whole record is made before any byte reaches the file
        if self.settings.prepend_size:
            data = len(data).to_bytes(8, "big") + data
        files = self.files
        key = files.key_for(record)
        files.handle(key).write(data)
        files.counts[key] += 1

    def _bytes_of(self, record: Record) -> bytes:
        name = self.settings.field
        if not isinstance(record, dict) or name not in record:
            raise RecordError(f"field {name!r}: missing: the bytes writer writes this field's bytes", field=name)
        value = record[name]
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        if isinstance(value, str):
            try:
                return value.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise RecordError(f"field {name!r}: text that is not valid UTF-8 ({exc.reason})", field=name) from None
        shown = repr(value)
        shown = shown if len(shown) <= 100 else shown[:100] + "…"
        raise RecordError(f"field {name!r}: expected bytes or text, got {type(value).__name__} {shown}", field=name)

    def close(self) -> list[tuple[Path, int]]:
        return self.files.close()
