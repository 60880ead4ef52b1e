"""One compaction task (a Spark task, pure and picklable): merge a partition's Avro files into files near the target
size in task output, as the avro writer writes them (rolled by bytes); Avro blocks are copied without decoding
when every input has the same schema and no dedup is asked, else records are decoded (and deduplicated)."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fastavro

from gobblin_py.api import OutputFile, WriterTarget
from gobblin_py.builtin.avro_writer import AvroWriter, AvroWriterSettings
from gobblin_py.builtin.partitioned_files import RollSettings
from gobblin_py.errors import TaskError
from gobblin_py.runtime.committables import commit_writer
from gobblin_py.runtime.compaction_plan import DedupSpec, PartitionWork


@dataclass
class PartitionResult:
    """What a compaction task made of one partition; `error` when it failed (nothing of it is published)."""

    work: PartitionWork
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


def compact_partition(work: PartitionWork) -> list[PartitionResult]:
    """Merge `work`'s files into task output (a list of one result, for `flat_map`); any failure is the result's
    error, and the attempt's staging is removed either way."""
    t0 = time.monotonic()
    result = PartitionResult(work)
    cid = work.compaction_id[:16]
    staging = Path(work.staging_dir) / cid
    paths = [work.directory / f.name for f in work.inputs]
    writer = AvroWriter(AvroWriterSettings(codec=work.codec, codec_level=work.codec_level,  # type: ignore[arg-type]
                                           roll=RollSettings(max_bytes=work.target_bytes)))
    try:
        schemas = [_schema(p) for p in paths]
        schema = schemas[-1]  # the newest file's: older ones are read into it
        target = WriterTarget(staging_dir=staging, task_output_dir=f"{work.task_output_dir}/{cid}", rel_dir=work.rel,
                              file_stem=work.stem, dataset=work.dataset)
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
        result.files = commit_writer(writer, target)
        result.records_out = sum(f.records for f in result.files)
        if work.dedup is None and result.records_out != result.records_in:
            raise TaskError(f"merged {result.records_out} records of {result.records_in} read")
    except Exception as exc:  # noqa: BLE001 - one partition's failure is reported, the others go on
        writer.abort()
        result.files, result.error = [], f"{type(exc).__name__}: {exc}" if not isinstance(exc, TaskError) else str(exc)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    result.duration_s = time.monotonic() - t0
    return [result]
