"""The `avro` writer: fastavro container files, optionally time-partitioned by a record field; Arrow batches (the
columnar path) are encoded a column at a time by `avro_arrow` into the same blocks fastavro would write."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Literal, NoReturn

import fastavro
from fastavro.write import Writer
from pydantic import Field

from gobblin_py.api import DataWriter, FileMerger, MergedFiles, MergeSpec, Settings, WriterTarget
from gobblin_py.api.batches import BatchWriter
from gobblin_py.api.types import Record, Schema
from gobblin_py.builtin.schemas.avro_values import AvroTypeChecker
from gobblin_py.builtin.writers.partitioned_files import ROLL_HELP, PartitionedFiles, RollSettings
from gobblin_py.builtin.writers.time_partitioner import PARTITION_HELP, PartitionSettings
from gobblin_py.errors import ConfigError, RecordError, TaskError, is_record_fault

if TYPE_CHECKING:
    from gobblin_py.builtin.writers.avro_arrow import AvroArrowEncoder, EncodedRows


class AvroWriterSettings(Settings):
    codec: Literal["null", "deflate", "snappy", "zstandard"] = Field(default="deflate", description="the block compression")
    codec_level: int | None = Field(default=None, description="the codec's level (deflate 1-9, zstandard 1-22; unset: its default)")
    sync_interval: int = Field(default=16000 * 64, ge=1024, description="bytes of records per block, before compression")
    partition: PartitionSettings | None = Field(default=None, description=PARTITION_HELP)
    roll: RollSettings | None = Field(default=None, description=ROLL_HELP)


class _Open:
    __slots__ = ("file", "ratio", "tail", "tail_bytes", "tail_count", "tell", "writer")

    def __init__(self, file: BinaryIO, writer: Writer) -> None:
        self.file = file
        self.writer = writer
        self.tell = writer.io.tell  # where the current block's bytes end
        self.ratio = 1.0  # compressed / encoded bytes of the last block written out for rolling
        self.tail: list[bytes] = []  # encoded records of batches that do not fill a block yet (fastavro's own
        self.tail_bytes = 0          # open block holds the row path's): written before anything else comes
        self.tail_count = 0


class _Block:
    """What fastavro's `Writer.write_block` takes: a count and the encoded records."""

    def __init__(self, num_records: int, data: bytes) -> None:
        self.num_records = num_records
        self.bytes_ = io.BytesIO(data)


class AvroWriter(DataWriter, BatchWriter, FileMerger):
    """Writes Avro container files; the schema must be an Avro record (use json_to_avro first).

    A record that cannot be encoded is a RecordError naming the field, and leaves the file valid:
    fastavro encodes into the current block field by field, so the bytes a failed record left there
    are cut off before the next record is added.

    An Arrow batch (`write_batch`) is encoded by `avro_arrow` and cut into blocks where fastavro would cut
    them (after the record that takes a block to `sync_interval` bytes), so a file written from batches is
    byte for byte the file written record by record, whichever path each batch took: a record the row path
    writes after a batch's last records joins their block.
    """

    Settings = AvroWriterSettings
    needs_avro_schema = True
    merged_format = "Avro"
    merged_suffix = ".avro"

    @classmethod
    def merged_fields(cls, inputs: tuple[str, ...]) -> list[str]:
        """The newest file's writer schema's fields: the merge reads the older files into it."""
        from gobblin_py.builtin.writers.avro_merge import newest_fields

        return newest_fields(inputs)

    @classmethod
    def merge_files(cls, settings: AvroWriterSettings, spec: MergeSpec, target: WriterTarget) -> MergedFiles:
        """Compaction: blocks copied when every input has the newest one's schema and no dedup is asked, else records
        decoded into that schema (and deduplicated); files rolled at the target size, in the branch's codec."""
        from gobblin_py.builtin.writers.avro_merge import merge_avro

        return merge_avro(lambda roll: cls(cls.Settings(codec=settings.codec, codec_level=settings.codec_level, roll=roll)),
                          spec, target)

    def open(self, schema: Schema, target: WriterTarget) -> None:
        if not (isinstance(schema, dict) and schema.get("type") == "record"):
            raise ConfigError("the avro writer needs an Avro record schema, and its records have none; add a json_to_avro "
                              "converter naming an .avsc file before it, or write JSON lines (writer: {class: jsonl})")
        self.schema = fastavro.parse_schema(schema)
        self._raw_schema = schema
        s = self.settings
        self.files: PartitionedFiles[_Open] = PartitionedFiles(target, ".avro", s.partition, self._open_file, self._close_file,
                                                               s.roll, self._size)
        self._max_bytes = s.roll.max_bytes if s.roll is not None else None
        self._encoder = _arrow_encoder(schema)

    def _open_file(self, path: Path) -> _Open:
        f = open(path, "wb")
        s = self.settings
        marker = hashlib.md5(path.name.encode()).digest()  # same range → byte-identical file
        return _Open(f, Writer(f, self.schema, codec=s.codec, sync_interval=s.sync_interval,
                               compression_level=s.codec_level, sync_marker=marker))

    def _size(self, h: _Open) -> int:
        """The file's size so far: written blocks plus the open block at the last block's compression ratio; when
        that reaches the roll size the block is written out to know exactly, so a compressed file is not cut short."""
        written, pending = h.file.tell(), h.tell() + h.tail_bytes
        estimate = written + int(pending * h.ratio)
        if pending and self._max_bytes is not None and estimate >= self._max_bytes:
            _flush_tail(h)
            h.writer.flush()
            now = h.file.tell()
            h.ratio = max((now - written) / pending, 0.001)
            return now
        return estimate

    @staticmethod
    def _close_file(handle: _Open) -> None:
        _flush_tail(handle)
        handle.writer.flush()
        handle.file.close()

    def write(self, record: Record) -> None:
        files = self.files
        key = files.key_for(record)
        h = files.handle(key)
        if h.tail_count:
            self._join_tail(h, record)
        else:
            before = h.tell()
            try:
                h.writer.write(record)
            except Exception as exc:  # noqa: BLE001 - a record's fault is refused below, anything else re-raised
                self._refuse(h.writer, before, record, exc)
        files.counts[key] += 1

    def _join_tail(self, h: _Open, record: Record) -> None:
        """Encode `record` after the batches' records still waiting for a block, cut where fastavro would cut it
        had it written them all; a record that cannot be encoded closes their block, as `_refuse` closes fastavro's."""
        buf = io.BytesIO()
        try:
            fastavro.schemaless_writer(buf, self.schema, record)
        except Exception as exc:  # noqa: BLE001 - a record's fault is refused, anything else re-raised
            if not is_record_fault(exc):
                raise
            _flush_tail(h)
            raise RecordError(f"cannot encode as Avro: {_why(self._raw_schema, record, exc)}") from None
        h.tail.append(buf.getvalue())
        h.tail_bytes += buf.tell()
        h.tail_count += 1
        if h.tail_bytes >= self.settings.sync_interval:
            _flush_tail(h)

    def append_block(self, block: Any) -> None:
        """Copy one block of another container file of the same schema, its records neither decoded nor encoded
        (compaction); an unpartitioned writer only. `block` is what `fastavro.block_reader` yields: a file rolls
        before a block that would take it to `roll.max_bytes`, so a file passes it only by a block larger than it."""
        h = self.files.handle("", coming=block.size)
        _flush_tail(h)
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

    # --- the columnar path -----------------------------------------------------------------------------------

    def takes_batches(self) -> bool:
        return self._encoder is not None

    def write_batch(self, batch: Any) -> bool:
        encoder = self._encoder
        parts = self.files.split(batch) if encoder is not None else None
        if parts is None:
            return False
        encoded = []
        for key, rows in parts:  # every part encoded before any is written: a batch is written whole or not at all
            rows_encoded = encoder.encode(rows)  # type: ignore[union-attr]
            if rows_encoded is None:
                return False
            encoded.append((key, rows_encoded))
        files = self.files
        for key, rows_encoded in encoded:
            start, n = 0, len(rows_encoded)
            while start < n:  # one slice per file the partition's rows fill (one without roll:)
                h = files.handle(key)
                room = files.room(key)
                end = n if room is None else min(n, start + room)
                if self._max_bytes is not None:
                    end = min(end, self._fitting(h, rows_encoded, start))
                self._append(h, rows_encoded, start, end)
                files.counts[key] += end - start
                start = end
        return True

    def _fitting(self, h: _Open, rows: EncodedRows, start: int) -> int:
        """Where the records from `start` fill the open file to `roll.max_bytes` (the record that reaches it
        included, as the row path rolls after it), at the last block's compression ratio."""
        import numpy as np

        budget = self._max_bytes - self._size(h)  # type: ignore[operator]
        ends = (rows.offsets[start + 1:] - rows.offsets[start]) * h.ratio
        return start + int(np.searchsorted(ends, budget, side="left")) + 1

    def _append(self, h: _Open, rows: EncodedRows, start: int, end: int) -> None:
        """Records `start` to `end` after the open block's, in blocks cut where fastavro cuts them."""
        import numpy as np

        w = h.writer
        if w.block_count:  # records the row path encoded into fastavro's open block come first
            h.tail.append(w.io.getvalue())
            h.tail_bytes += w.io.tell()
            h.tail_count += w.block_count
            w.io.clear()
            w.block_count = 0
        offsets, interval = rows.offsets, self.settings.sync_interval
        pos = start
        while pos < end:
            cut = max(pos + 1, int(np.searchsorted(offsets, offsets[pos] + interval - h.tail_bytes, side="left")))
            if cut > end:
                h.tail.append(rows.span(pos, end))
                h.tail_bytes += int(offsets[end] - offsets[pos])
                h.tail_count += end - pos
                return
            h.tail.append(rows.span(pos, cut))
            h.tail_count += cut - pos
            _flush_tail(h)
            pos = cut


def _flush_tail(h: _Open) -> None:
    """Write the batches' records still waiting for a block as one."""
    if h.tail_count:
        h.writer.write_block(_Block(h.tail_count, b"".join(h.tail)))
        h.tail.clear()
        h.tail_bytes = h.tail_count = 0


def _arrow_encoder(schema: dict[str, Any]) -> AvroArrowEncoder | None:
    """The Arrow encoder of the schema, or None where there is none (pyarrow or numpy missing, a type it lacks)."""
    from gobblin_py.builtin.schemas.arrow import arrow_mapping

    try:
        from gobblin_py.builtin.writers.avro_arrow import AvroArrowEncoder

        mapping = arrow_mapping(schema)
    except ImportError:  # the columnar path needs pyarrow and numpy (the tables extra); records go one at a time
        return None
    except ConfigError:  # a type Arrow has no mapping for: the row path writes it
        return None
    return AvroArrowEncoder.for_schema(schema, mapping.schema)


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
