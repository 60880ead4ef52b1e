"""Whether a job's tasks may take the columnar path (Arrow batches from extractor to writer), from the job file and
its plugins alone: the planner places a run by it without importing the task's record flow, which decides by it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gobblin_py.api import BatchConverter, BatchExtractor, BatchWriter, Converter, DataWriter
from gobblin_py.config.model import JobSpec


def columnar_shape(job: JobSpec) -> bool | None:
    """Whether the job file lets its tasks take the columnar path, as far as the plan can tell without opening its
    plugins (`takes_columnar` decides per task): one branch of nothing but a batch writer, no row checks, and no
    converter (False: the extractor must make Arrow) or one batch converter (True); None: the row path. For placing
    a run (`Source.native_share`), never for what a task does."""
    if not job.job.columnar or len(job.branches) != 1 or job.row_policies:
        return None
    branch = job.branches[0]
    if branch.converters or branch.row_policies or not issubclass(branch.writer.cls(), BatchWriter):
        return None
    if not job.converters:
        return False
    return True if len(job.converters) == 1 and issubclass(job.converters[0].cls(), BatchConverter) else None


def takes_columnar(job: JobSpec, extractor: Any, converters: Sequence[Converter], writer: DataWriter) -> bool:
    """Whether a straight task's opened plugins can take the columnar path: batches in, one converter that makes
    Arrow of them (or none, for an extractor that makes Arrow itself), a writer that takes Arrow (and `job.columnar`
    not turned off)."""
    if not (job.job.columnar and isinstance(extractor, BatchExtractor)
            and isinstance(writer, BatchWriter) and writer.takes_batches()):
        return False
    if not converters:
        return extractor.makes_arrow
    return len(converters) == 1 and isinstance(converters[0], BatchConverter)
