"""The parquet writer's compaction merge (`ParquetWriter.merge_files`): a partition's Parquet files (a directory's or a
table partition's) read as Arrow batches and rewritten by the parquet writer with the branch's compression and row
groups, in the newest file's schema, split into ceil(bytes / target) files of as many rows each."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from gobblin_py.api import MergedFiles, MergeSpec, WriterTarget
from gobblin_py.api.types import Schema
from gobblin_py.builtin.writers.dedup import kept_records
from gobblin_py.errors import TaskError
from gobblin_py.fs import Location, filesystem_for


class BatchFileWriter(Protocol):
    """What the merge needs of the parquet writer (which makes it: this module never imports that one): Arrow
    batches in the schema it opened with."""

    arrow_schema: Any

    def open(self, schema: Schema, target: WriterTarget) -> None: ...
    def write_batch(self, batch: Any) -> bool: ...
    def close(self) -> list[tuple[Path, int]]: ...
    def abort(self) -> None: ...

_ROW = "\0row"
"""The row number kept beside the key and order-by values while a partition is deduplicated."""


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


def newest_fields(inputs: tuple[str, ...]) -> list[str]:
    """The fields of the newest input's schema, in which a merge writes every input's batches."""
    return [f["name"] for f in _parquet_avro_schema(inputs[-1]).get("fields", [])]


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


def _kept_rows(spec: MergeSpec) -> tuple[Any, int]:
    """The partition's rows, one per key (`spec.dedup`), chosen as for Avro records with only the key and order-by
    columns made Python values, and how many rows were read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    assert spec.dedup is not None
    read = []
    for uri in spec.inputs:
        with filesystem_for(uri).open_read(Location(uri)) as stream:
            read.append(pq.read_table(stream))
    whole = pa.concat_tables(read, promote_options="permissive")
    columns = [c for c in dict.fromkeys([spec.dedup.key, spec.dedup.order_by]) if c is not None and c in whole.column_names]
    light = pa.table([_comparable(whole[c]) for c in columns], names=columns).to_pylist()
    for i, row in enumerate(light):
        row[_ROW] = i
    return whole.take(pa.array([row[_ROW] for row in kept_records(light, spec.dedup)], type=pa.int64())), whole.num_rows


def _input_records(spec: MergeSpec) -> int:
    """The inputs' rows: as the caller counted them (a table's manifests), else from the files' footers."""
    import pyarrow.parquet as pq

    if spec.records is not None:
        return spec.records
    total = 0
    for uri in spec.inputs:
        with filesystem_for(uri).open_read(Location(uri)) as stream:
            total += pq.read_metadata(stream).num_rows
    return total


def merge_parquet(new_writer: Callable[[int], BatchFileWriter], spec: MergeSpec, target: WriterTarget) -> MergedFiles:
    """`spec`'s Parquet files (or the rows dedup keeps) rewritten by a writer of the branch's settings rolling at
    the given row count (`new_writer`) into ceil(bytes / target) files of as many rows each."""
    import pyarrow.parquet as pq

    schema = _parquet_avro_schema(spec.inputs[-1])
    kept, records_in = _kept_rows(spec) if spec.dedup is not None else (None, 0)
    records = _input_records(spec) if kept is None else kept.num_rows
    kept_bytes = spec.input_bytes if kept is None else spec.input_bytes * records / max(1, records_in)
    per_file = max(1, math.ceil(records / max(1, math.ceil(kept_bytes / spec.target_bytes))))
    writer = new_writer(per_file)
    writer.open(schema, target)

    def put(batch: Any) -> None:
        if batch.num_rows and not writer.write_batch(_conform(batch, writer.arrow_schema)):
            raise TaskError(f"{spec.partition}: a batch of its files does not fit the newest file's schema")

    try:
        if kept is not None:
            for batch in kept.to_batches():
                put(batch)
        else:
            for uri in spec.inputs:
                with filesystem_for(uri).open_read(Location(uri)) as stream:
                    for batch in pq.ParquetFile(stream).iter_batches():
                        records_in += batch.num_rows
                        put(batch)
        return MergedFiles(writer.close(), records_in)
    except BaseException:
        writer.abort()
        raise
