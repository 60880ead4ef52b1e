"""The avro writer's compaction merge (`AvroWriter.merge_files`): a partition's Avro files into files rolled at the
target size, blocks copied without decoding when every input has the newest one's schema and no dedup is asked,
else records decoded into that schema (and deduplicated)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import fastavro

from gobblin_py.api import MergedFiles, MergeSpec, WriterTarget
from gobblin_py.api.types import Record, Schema
from gobblin_py.builtin.writers.dedup import kept_records
from gobblin_py.builtin.writers.partitioned_files import RollSettings


class BlockWriter(Protocol):
    """What the merge needs of the avro writer (which makes it: this module never imports that one): records, and
    whole encoded blocks copied as they are."""

    def open(self, schema: Schema, target: WriterTarget) -> None: ...
    def write(self, record: Record) -> None: ...
    def append_block(self, block: Any) -> None: ...
    def close(self) -> list[tuple[Path, int]]: ...
    def abort(self) -> None: ...


def _schema(path: Path) -> dict[str, Any]:
    with open(path, "rb") as f:
        return json.loads(fastavro.reader(f).metadata["avro.schema"])


def newest_fields(inputs: tuple[str, ...]) -> list[str]:
    """The fields of the newest input's writer schema, which a merge reads every input into."""
    schema = _schema(Path(inputs[-1]))
    return [f["name"] for f in schema.get("fields", [])] if isinstance(schema, dict) else []


def _records(paths: list[Path], schemas: list[dict[str, Any]], schema: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every record of `paths`, read into `schema` (resolved only for a file written with another one)."""
    parsed = fastavro.parse_schema(schema)
    for path, written in zip(paths, schemas):
        with open(path, "rb") as f:
            yield from fastavro.reader(f, reader_schema=None if written == schema else parsed)


def merge_avro(new_writer: Callable[[RollSettings], BlockWriter], spec: MergeSpec, target: WriterTarget) -> MergedFiles:
    """`spec`'s local Avro files merged by a writer of the branch's codec (`new_writer`), rolled at `spec.target_bytes`."""
    paths = [Path(p) for p in spec.inputs]
    writer = new_writer(RollSettings(max_bytes=spec.target_bytes))
    schemas = [_schema(p) for p in paths]
    schema = schemas[-1]  # the newest file's: older ones are read into it
    writer.open(schema, target)
    records_in = 0
    try:
        if spec.dedup is None and all(s == schema for s in schemas):
            for path in paths:
                with open(path, "rb") as f:
                    for block in fastavro.block_reader(f):
                        writer.append_block(block)
                        records_in += block.num_records
        elif spec.dedup is not None:
            records = list(_records(paths, schemas, schema))
            records_in = len(records)
            for rec in kept_records(records, spec.dedup):
                writer.write(rec)
        else:
            for rec in _records(paths, schemas, schema):
                writer.write(rec)
                records_in += 1
        return MergedFiles(writer.close(), records_in)
    except BaseException:
        writer.abort()
        raise
