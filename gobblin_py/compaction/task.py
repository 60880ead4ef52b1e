"""One compaction task (a Spark task, pure and picklable): merge a partition's files into files near the target size
in task output, as the branch's writer writes them. The format's merge is the writer class's (`FileMerger`: Avro
blocks copied or records decoded, Parquet rewritten as Arrow batches); the task checks that a merge without dedup
lost no record and moves the merged files into task output as committables."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from gobblin_py.api import FileMerger, MergeSpec, OutputFile, WriterTarget
from gobblin_py.compaction.plan import CompactionWork
from gobblin_py.errors import TaskError
from gobblin_py.runtime.task.committables import commit_closed


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


def merge_spec(work: CompactionWork) -> MergeSpec:
    """What the writer class is asked to merge: the partition's files, oldest first, and how."""
    return MergeSpec(partition=work.rel, inputs=tuple(work.location(f) for f in work.inputs), input_bytes=work.input_bytes,
                     target_bytes=work.target_bytes, dedup=work.dedup, records=work.known_records)


def compact_partition(work: CompactionWork) -> list[PartitionResult]:
    """Merge `work`'s files into task output (a list of one result, for `flat_map`); any failure is the result's
    error, and the attempt's staging is removed either way."""
    t0 = time.monotonic()
    result = PartitionResult(work)
    cid = work.compaction_id[:16]
    staging = Path(work.staging_dir) / cid
    target = WriterTarget(staging_dir=staging, task_output_dir=f"{work.task_output_dir}/{cid}", rel_dir=work.rel,
                          file_stem=work.stem, dataset=work.dataset)
    try:
        merger = work.writer.cls()
        if not issubclass(merger, FileMerger):
            raise TaskError(f"{work.writer.label}: this writer cannot merge its files (it is no FileMerger)")
        merged = merger.merge_files(work.writer.settings, merge_spec(work), target)
        result.records_in = merged.records_in
        result.files = commit_closed(merged.files, target)
        result.records_out = sum(f.records for f in result.files)
        if work.dedup is None and result.records_out != result.records_in:
            raise TaskError(f"merged {result.records_out} records of {result.records_in} read")
    except Exception as exc:  # noqa: BLE001 - one partition's failure is reported, the others go on
        result.files, result.error = [], f"{type(exc).__name__}: {exc}" if not isinstance(exc, TaskError) else str(exc)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    result.duration_s = time.monotonic() - t0
    return [result]
