"""One compaction task (a Spark task, pure and picklable): merge a partition's files into files near the target size
in task output, as the branch's writer writes them. Avro files (rolled by bytes): blocks are copied without decoding
when every input has the same schema and no dedup is asked, else records are decoded (and deduplicated). Parquet
files (a directory's or a table partition's): read as Arrow batches and written by the parquet writer, split into
ceil(bytes / target) files of as many rows each."""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fastavro

from gobblin_py.api import OutputFile, WriterTarget
from gobblin_py.builtin.writers.avro import AvroWriter, AvroWriterSettings
from gobblin_py.builtin.writers.parquet import ParquetWriter, ParquetWriterSettings
from gobblin_py.builtin.writers.partitioned_files import RollSettings
from gobblin_py.errors import TaskError
from gobblin_py.fs import Location, filesystem_for
from gobblin_py.runtime.task.committables import commit_writer
from gobblin_py.compaction.plan import CompactionWork, DedupSpec, PartitionWork, TablePartitionWork


@dataclass
class PartitionResult:
    """What a compaction task made of one partition; `error` when it failed (nothing of it is published)."""

    work: CompactionWork
    files: list[OutputFile] = field(default_factory=list)
    records_in: int = 0
    records_out: int = 0
    error: str | None = None
    duration_s: float = 0.0

    @property
    def duplicates_removed(self) -> int:
        return self.records_in - self.records_out if self.error is None else 0


def _schema(path: Path) -> dict[str, Any]:
    with open(path, "rb") as f:
        return json.loads(fastavro.reader(f).metadata["avro.schema"])


def _records(paths: list[Path], schemas: list[dict[str, Any]], schema: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every record of `paths`, read into `schema` (resolved only for a file written with another one)."""
    parsed = fastavro.parse_schema(schema)
    for path, written in zip(paths, schemas):
        with open(path, "rb") as f:
            yield from fastavro.reader(f, reader_schema=None if written == schema else parsed)


def _dedup(records: list[dict[str, Any]], spec: DedupSpec) -> list[dict[str, Any]]:
    """One record per key (in the order keys first appear), the latest or first by `order_by`, ties to the later
    record for `latest`; records without the key are all kept."""
    kept: dict[Any, dict[str, Any]] = {}
    keyless: list[dict[str, Any]] = []
    latest = spec.keep == "latest"
    for rec in records:
        key = rec.get(spec.key)
        if key is None:
            keyless.append(rec)
            continue
        if not isinstance(key, (str, int, float, bytes, bool)):
            key = json.dumps(key, sort_keys=True, default=str)
        old = kept.get(key)
        if old is None:
            kept[key] = rec
        elif spec.order_by is None:
            if latest:
                kept[key] = rec
        else:
            new_v, old_v = rec.get(spec.order_by), old.get(spec.order_by)
            if new_v is not None and (old_v is None or (new_v >= old_v if latest else new_v < old_v)):
                kept[key] = rec
    return [*kept.values(), *keyless]


def compact_partition(work: CompactionWork) -> list[PartitionResult]:
    """Merge `work`'s files into task output (a list of one result, for `flat_map`); any failure is the result's
    error, and the attempt's staging is removed either way."""
    t0 = time.monotonic()
    result = PartitionResult(work)
    cid = work.compaction_id[:16]
    staging = Path(work.staging_dir) / cid
    target = WriterTarget(staging_dir=staging, task_output_dir=f"{work.task_output_dir}/{cid}", rel_dir=work.rel,
                          file_stem=work.stem, dataset=work.dataset)
    writer: AvroWriter | ParquetWriter | None = None
    try:
        if work.parquet is not None:
            writer = _merge_parquet(work, target, result)
        else:
            assert isinstance(work, PartitionWork)
            writer = _merge_avro(work, target, result)
        result.files = commit_writer(writer, target)
        result.records_out = sum(f.records for f in result.files)
        if work.dedup is None and result.records_out != result.records_in:
            raise TaskError(f"merged {result.records_out} records of {result.records_in} read")
    except Exception as exc:  # noqa: BLE001 - one partition's failure is reported, the others go on
        if writer is not None:
            writer.abort()
        result.files, result.error = [], f"{type(exc).__name__}: {exc}" if not isinstance(exc, TaskError) else str(exc)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    result.duration_s = time.monotonic() - t0
    return [result]


def _merge_avro(work: PartitionWork, target: WriterTarget, result: PartitionResult) -> AvroWriter:
    """Avro files, rolled by bytes: blocks copied when every input has the newest one's schema and no dedup is asked,
    else records decoded into that schema (and deduplicated)."""
    paths = [work.directory / f.name for f in work.inputs]
    writer = AvroWriter(AvroWriterSettings(codec=work.codec, codec_level=work.codec_level,  # type: ignore[arg-type]
                                           roll=RollSettings(max_bytes=work.target_bytes)))
    schemas = [_schema(p) for p in paths]
    schema = schemas[-1]  # the newest file's: older ones are read into it
    writer.open(schema, target)
    if work.dedup is None and all(s == schema for s in schemas):
        for path in paths:
            with open(path, "rb") as f:
                for block in fastavro.block_reader(f):
                    writer.append_block(block)
                    result.records_in += block.num_records
    elif work.dedup is not None:
        records = list(_records(paths, schemas, schema))
        result.records_in = len(records)
        for rec in _dedup(records, work.dedup):
            writer.write(rec)
    else:
        for rec in _records(paths, schemas, schema):
            writer.write(rec)
            result.records_in += 1
    return writer


_ROW = "\0row"
"""The row number kept beside the key and order-by values while a table partition is deduplicated."""


def _parquet_avro_schema(uri: str) -> dict[str, Any]:
    """The Avro schema a gobblin-py parquet writer recorded in the file's footer (`parquet.avro.schema`)."""
    import pyarrow.parquet as pq

    with filesystem_for(uri).open_read(Location(uri)) as f:
        metadata = pq.read_schema(f).metadata or {}
    found = metadata.get(b"parquet.avro.schema")
    if found is None:
        raise TaskError(f"{uri} has no Avro schema in its footer (parquet.avro.schema): it was not written by "
                        "gobblin-py's parquet writer, and the compaction merges only files it can rewrite as written")
    return json.loads(found)


def _conform(batch: Any, schema: Any) -> Any:
    """`batch` in the writer's Arrow `schema`, by field name: a field the older file lacks as nulls, a promoted type
    (int → long, float → double) cast."""
    import pyarrow as pa

    if batch.schema.equals(schema, check_metadata=False):
        return batch
    columns = []
    for f in schema:
        i = batch.schema.get_field_index(f.name)
        columns.append(batch.column(i).cast(f.type) if i >= 0 else pa.nulls(batch.num_rows, f.type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _comparable(column: Any) -> Any:
    """A key or order-by column as values that compare as it does, cheap to make Python values of: times as integers
    (a datetime object per row costs more than the dedup itself)."""
    import pyarrow as pa

    kind = column.type
    if pa.types.is_timestamp(kind) or pa.types.is_date64(kind) or pa.types.is_time(kind) or pa.types.is_duration(kind):
        return column.cast(pa.int64())
    if pa.types.is_date32(kind):
        return column.cast(pa.int32())
    return column


def _kept_rows(work: CompactionWork, result: PartitionResult) -> Any:
    """The partition's rows, one per key (`work.dedup`), chosen as for Avro records with only the key and order-by
    columns made Python values; `result.records_in` counts the rows read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    assert work.dedup is not None
    read = []
    for f in work.inputs:
        with filesystem_for(work.location(f)).open_read(Location(work.location(f))) as stream:
            read.append(pq.read_table(stream))
    whole = pa.concat_tables(read, promote_options="permissive")
    result.records_in = whole.num_rows
    columns = [c for c in dict.fromkeys([work.dedup.key, work.dedup.order_by]) if c is not None and c in whole.column_names]
    light = pa.table([_comparable(whole[c]) for c in columns], names=columns).to_pylist()
    for i, row in enumerate(light):
        row[_ROW] = i
    return whole.take(pa.array([row[_ROW] for row in _dedup(light, work.dedup)], type=pa.int64()))


def _input_records(work: CompactionWork) -> int:
    """The inputs' rows: as a table's manifests count them, else from the files' footers."""
    import pyarrow.parquet as pq

    if isinstance(work, TablePartitionWork):
        return work.records
    total = 0
    for f in work.inputs:
        with filesystem_for(work.location(f)).open_read(Location(work.location(f))) as stream:
            total += pq.read_metadata(stream).num_rows
    return total


def _merge_parquet(work: CompactionWork, target: WriterTarget, result: PartitionResult) -> ParquetWriter:
    """A partition's Parquet files (or the rows dedup keeps), rewritten by the parquet writer (the branch's compression
    and row groups, the newest file's schema) into ceil(bytes / target) files of as many rows each."""
    import pyarrow.parquet as pq

    assert work.parquet is not None
    schema = _parquet_avro_schema(work.location(work.inputs[-1]))
    kept = _kept_rows(work, result) if work.dedup is not None else None
    records = _input_records(work) if kept is None else kept.num_rows
    kept_bytes = work.input_bytes if kept is None else work.input_bytes * records / max(1, result.records_in)
    per_file = max(1, math.ceil(records / max(1, math.ceil(kept_bytes / work.target_bytes))))
    writer = ParquetWriter(ParquetWriterSettings.model_validate({**work.parquet, "roll": {"max_records": per_file}}))
    writer.open(schema, target)

    def put(batch: Any) -> None:
        if batch.num_rows and not writer.write_batch(_conform(batch, writer.arrow_schema)):
            raise TaskError(f"{work.rel}: a batch of its files does not fit the newest file's schema")

    if kept is not None:
        for batch in kept.to_batches():
            put(batch)
        return writer
    for f in work.inputs:
        with filesystem_for(work.location(f)).open_read(Location(work.location(f))) as stream:
            for batch in pq.ParquetFile(stream).iter_batches():
                result.records_in += batch.num_rows
                put(batch)
    return writer
