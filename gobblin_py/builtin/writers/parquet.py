"""The `parquet` writer: Parquet files through pyarrow, converted in batches, time-partitioned as the avro writer.

A buffering writer can only route a bad record while `write()` is handling that record: the framework sends
to the error file the record whose `write()` raised, with the extractor's location at that moment. So each
record is checked in `write()` against the Arrow type of every field (`ArrowMapping.check`: one `type()` test
per field for common values, a full check for the rest) and refused there as a RecordError naming the field
path; records that pass are buffered and converted `batch_records` at a time with
`pa.RecordBatch.from_pylist`, which the check guarantees to succeed. Should a batch fail anyway (a value the
check let through), the records are converted one by one to find it, and the task fails naming that record
rather than losing it or blaming another: nothing of the attempt is published, and the error file never
names a record that was not the one at fault.

Converted batches wait per file until `row_group_records` rows make a row group, so every row group but a
file's last holds exactly that many rows; memory is bounded by one batch of Python records plus one row
group of Arrow data across all open files (when partitions together hold more, the fullest one is written
as a shorter row group). The writer keeps the record objects it is given until their batch is converted, so a
plugin before it must not change a record once it has passed it on (the built-in ones make a new one each time).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import orjson
from pydantic import Field, model_validator

from gobblin_py.api import BatchWriter, DataWriter, FileMerger, MergedFiles, MergeSpec, Settings, WriterTarget
from gobblin_py.api.types import Record, Schema
from gobblin_py.builtin.extras import require
from gobblin_py.builtin.schemas.arrow import arrow_mapping
from gobblin_py.builtin.writers.partitioned_files import ROLL_HELP, PartitionedFiles, RollSettings
from gobblin_py.builtin.writers.time_partitioner import PARTITION_HELP, PartitionSettings
from gobblin_py.errors import ConfigError, TaskError

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

class ParquetWriterSettings(Settings):
    compression: Literal["zstd", "snappy", "gzip", "none"] = Field(default="zstd", description="the column chunks' compression")
    compression_level: int | None = Field(default=None, description="the codec's level (zstd 1-22, gzip 1-9)")
    row_group_records: int = Field(default=131_072, ge=1, description="rows per row group (a file's last may hold fewer)")
    batch_records: int = Field(default=65_536, ge=1, description="records buffered before they are converted to Arrow")
    partition: PartitionSettings | None = Field(default=None, description=PARTITION_HELP)
    roll: RollSettings | None = Field(default=None, description=ROLL_HELP + " (by bytes: once the row groups written reach it)")
    dictionary: Literal["auto", "all", "none"] | list[str] = Field(
        default="auto", description="dictionary-encoded columns: auto (top-level text and binary ones), all, none, or a list")

    @model_validator(mode="after")
    def _installed(self) -> ParquetWriterSettings:
        require("pyarrow.parquet", "the parquet writer needs pyarrow", "tables")
        return self


class _File:
    """One open Parquet file: its pyarrow writer, the records not yet converted, the Arrow rows not yet written."""

    __slots__ = ("fresh", "path", "pending", "pending_rows", "rows", "size", "writer")

    def __init__(self, path: Path, writer: pq.ParquetWriter) -> None:
        self.path = path
        self.writer = writer
        self.rows: list[Record] = []
        self.pending: list[pa.RecordBatch] = []
        self.pending_rows = 0
        self.size = 0  # bytes on disk after the last row groups written (what rolling by max_bytes compares)
        self.fresh = 0  # rows placed since the last conversion point, as records or from batches


class ParquetWriter(DataWriter, BatchWriter, FileMerger):
    """Writes Parquet files of the Avro record schema mapped to Arrow (see `arrow_schema`); a record that does not
    fit that schema is a RecordError naming the field path, and the rest are written. Arrow batches of the
    schema (the columnar path) are written as they are."""

    Settings = ParquetWriterSettings
    needs_avro_schema = True
    merged_format = "Parquet"
    merged_suffix = ".parquet"
    leaves_own_merge_alone = True

    @classmethod
    def merged_fields(cls, inputs: tuple[str, ...]) -> list[str]:
        """The fields of the newest file's schema, which the merge writes every input's batches in."""
        from gobblin_py.builtin.writers.parquet_merge import newest_fields

        return newest_fields(inputs)

    @classmethod
    def merge_files(cls, settings: ParquetWriterSettings, spec: MergeSpec, target: WriterTarget) -> MergedFiles:
        """Compaction: Arrow batches rewritten with the branch's compression and row groups in the newest file's
        schema, ceil(bytes / target) files of as many rows each."""
        from gobblin_py.builtin.writers.parquet_merge import merge_parquet

        written = settings.model_dump(mode="json", exclude={"partition", "roll"})
        return merge_parquet(lambda rows: cls(cls.Settings.model_validate({**written, "roll": {"max_records": rows}})),
                             spec, target)

    def open(self, schema: Schema, target: WriterTarget) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        mapping = arrow_mapping(schema)  # ConfigError naming the field for a type Parquet cannot hold
        self._pa, self._pq = pa, pq
        self.check = mapping.check
        # parquet-avro's key: readers that know it (parquet-mr, Hive) get back the exact Avro schema
        self.arrow_schema = mapping.schema.with_metadata({"parquet.avro.schema": orjson.dumps(schema).decode()})
        s = self.settings
        self._dictionary = _dictionary_columns(s.dictionary, mapping.schema)
        self._batch = s.batch_records
        self._group = s.row_group_records
        self.files: PartitionedFiles[_File] = PartitionedFiles(target, ".parquet", s.partition, self._open_file, self._close_file,
                                                               s.roll, _size)
        self._rolls = s.roll is not None
        self._buffered = 0  # rows placed in the open files since the last conversion point (see `write_batch`)
        self._pending = 0  # converted rows in every file's `pending`

    def _open_file(self, path: Path) -> _File:
        s = self.settings
        writer = self._pq.ParquetWriter(str(path), self.arrow_schema, compression=s.compression,
                                        compression_level=s.compression_level, use_dictionary=self._dictionary)
        return _File(path, writer)

    def write(self, record: Record) -> None:
        self.check(record)  # RecordError naming the field: the framework routes this record
        files = self.files
        key = files.key_for(record)
        h = files.handle(key) if self._rolls else files.handles.get(key) or files.handle(key)
        h.rows.append(record)
        h.fresh += 1
        files.counts[key] += 1
        self._buffered += 1
        if self._buffered >= self._batch:
            self._convert_all()

    # --- batches → row groups ----------------------------------------------------------------------------

    def write_batch(self, batch: Any) -> bool:
        """An Arrow batch of this writer's schema, placed in its partitions' files as `write` would place each row;
        False (nothing written) for a batch of another schema or one `PartitionedFiles.split` cannot place so.
        Row groups are cut at the records where `write` would convert (every `batch_records`), so the files are
        the row path's byte for byte however the rows came in."""
        if not batch.schema.equals(self.arrow_schema, check_metadata=False):
            return False
        parts = self.files.split(batch)  # by the batch's own field metadata (gobblin.row_values), as the avro writer
        if parts is None:
            return False
        start, n = 0, batch.num_rows
        while start < n:
            take = min(n - start, self._batch - self._buffered)  # up to the row path's next conversion point
            if take < n:
                parts = self.files.split(batch.slice(start, take))
                assert parts is not None, "the rows of a batch that split, split alike in its slices"
            self._place(parts)
            start += take
            if self._buffered >= self._batch:
                self._convert_all()
        return True

    def _place(self, parts: list[tuple[str, Any]]) -> None:
        """Rows of a batch by partition into their files' converted rows, each file's slice up to where it rolls."""
        files = self.files
        for key, part in parts:
            rows = self._pa.RecordBatch.from_arrays(part.columns, schema=self.arrow_schema)  # with the file metadata
            start = 0
            while start < rows.num_rows:  # one slice per file the partition's rows fill (one without roll:)
                h = files.handle(key)
                room = files.room(key)
                take = rows.num_rows - start if room is None else min(room, rows.num_rows - start)
                if h.rows:  # records the row path buffered before this batch stay before it in the file
                    self._convert(h)
                h.pending.append(rows.slice(start, take))
                h.pending_rows += take
                h.fresh += take
                self._pending += take
                self._buffered += take
                files.counts[key] += take
                start += take

    def _convert_all(self) -> None:
        """The conversion point: every file's records to Arrow, and the row groups they make written."""
        for h in self.files.handles.values():
            if h.rows:
                self._convert(h)
            h.fresh = 0
        self._buffered = 0
        self._write_full_groups()

    def _write_full_groups(self) -> None:
        """Every whole row group the converted rows hold; past `row_group_records` in all, the fullest file's rest."""
        for h in self.files.handles.values():
            if h.pending_rows >= self._group:
                self._write_groups(h, whole_only=True)
        while self._pending >= self._group:  # several partitions hold a row group between them
            self._write_groups(max(self.files.handles.values(), key=lambda f: f.pending_rows), whole_only=False)

    def _convert(self, h: _File) -> None:
        rows, h.rows = h.rows, []
        try:
            batch = self._pa.RecordBatch.from_pylist(rows, schema=self.arrow_schema)
        except (self._pa.ArrowException, ValueError, TypeError, OverflowError) as exc:
            if isinstance(exc, OSError):
                raise
            raise TaskError(f"{h.path.name}: {_culprit(self._pa, rows, self.arrow_schema, exc)}; the per-record "
                            "check let it through (a gobblin-py bug: please report it with this message); "
                            "nothing of this attempt is published") from exc
        h.pending.append(batch)
        h.pending_rows += batch.num_rows
        self._pending += batch.num_rows

    def _write_groups(self, h: _File, whole_only: bool) -> None:
        """Write `h`'s converted rows as row groups of `row_group_records` (and, unless `whole_only`, the rest)."""
        table = self._pa.Table.from_batches(h.pending, schema=self.arrow_schema)
        n = table.num_rows
        cut = n - n % self._group if whole_only else n
        if cut:  # one chunk: pages are cut where they fill, not where converted batches happened to end
            h.writer.write_table(table.slice(0, cut).combine_chunks(), row_group_size=self._group)
            h.size = h.path.stat().st_size  # once per row group, not per record
        rest = table.slice(cut)
        h.pending = rest.to_batches() if rest.num_rows else []
        self._pending -= cut
        h.pending_rows = n - cut

    def _close_file(self, h: _File) -> None:
        self._buffered -= h.fresh
        h.fresh = 0
        if h.rows:
            self._convert(h)
        if h.pending_rows:
            self._write_groups(h, whole_only=False)
        h.writer.close()

    def close(self) -> list[tuple[Path, int]]:
        return self.files.close()

    def abort(self) -> None:
        for h in self.files.handles.values():  # what close() did not reach: drop buffers, release the files
            h.rows, h.pending = [], []
            try:
                h.writer.close()
            except Exception:  # noqa: BLE001 - the attempt already failed; its staging is deleted next
                pass


def _dictionary_columns(setting: str | list[str], schema: pa.Schema) -> bool | list[str]:
    """pyarrow's `use_dictionary` for the setting. `auto`: the top-level text and binary columns, where repeated
    values are common (names, pages, countries); a dictionary of unique numbers (ids, times, amounts) only costs: on
    a Kafka-events schema it made writing 2.7x slower and the files 1.5x bigger."""
    import pyarrow as pa

    if setting == "all":
        return True
    if setting == "none":
        return False
    if setting == "auto":
        return [f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type) or pa.types.is_binary(f.type)]
    unknown = [c for c in setting if c not in schema.names]
    if unknown:
        raise ConfigError(f"writer.dictionary: {', '.join(map(repr, unknown))} not a top-level column of the schema "
                          f"(columns: {', '.join(schema.names)})")
    return list(setting)


def _size(h: _File) -> int:
    """The bytes of a file's row groups written so far: the rows still buffered are not counted, so a file rolled
    by `max_bytes` may pass it by up to a row group."""
    return h.size


def _culprit(pa: Any, rows: list[Record], schema: pa.Schema, exc: Exception) -> str:
    """The first of `rows` Arrow refuses, by its place in the batch and the field, found one record at a time."""
    for i, row in enumerate(rows):
        try:
            pa.RecordBatch.from_pylist([row], schema=schema)
        except Exception as one:  # noqa: BLE001 - any failure of this record names it
            field = next((f.name for f in schema if _fails(pa, row, f)), None)
            where = f"field {field!r} of " if field else ""
            return f"{where}record {i + 1} of a batch of {len(rows)} does not convert to Arrow ({type(one).__name__}: {one})"
    return f"a batch of {len(rows)} records does not convert to Arrow ({type(exc).__name__}: {exc})"


def _fails(pa: Any, row: Record, field: pa.Field) -> bool:
    try:
        pa.array([row.get(field.name)], type=field.type)
    except Exception:  # noqa: BLE001 - the question is only whether it converts
        return True
    return False
