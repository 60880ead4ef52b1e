"""The task flow of one WorkUnit: Extractor → converters → row checks → fork → branches → writers.

Pure and picklable: `run_task(spec)` is what a Spark executor (or the in-process executor) calls.
Each attempt writes under its own attempt directory; only the files listed in the returned
result are ever published, so a failed, retried or duplicated attempt never publishes twice.
"""

from __future__ import annotations

import logging
import shutil
import time
import traceback
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gobblin_py.api import (
    BranchStats,
    DataWriter,
    MultiWorkUnit,
    OneToOneConverter,
    RowPolicyType,
    TaskContext,
    TaskPolicyType,
    WorkUnit,
    WriterTarget,
)
from gobblin_py.api.types import Record
from gobblin_py.config.model import BadRecordPolicy, BranchConfig, JobSpec, RowPolicyConfig
from gobblin_py.errors import QualityError, RecordError
from gobblin_py.fs import Location, filesystem_for
from gobblin_py.fs import configure as configure_filesystems
from gobblin_py.runtime.bad_records import ErrorFile
from gobblin_py.runtime.results import BranchMetrics, TaskStatus, WorkUnitResult


@dataclass(frozen=True)
class TaskSpec:
    """Everything an executor needs to run one task (a WorkUnit or a MultiWorkUnit)."""

    job: JobSpec
    run_id: str
    unit: WorkUnit | MultiWorkUnit
    file_suffix: str = ""  # at_least_once runs add the run id, as Gobblin's writers name files

    @property
    def workunits(self) -> tuple[WorkUnit, ...]:
        return self.unit.workunits if isinstance(self.unit, MultiWorkUnit) else (self.unit,)


def run_task(spec: TaskSpec) -> list[WorkUnitResult]:
    """Run every WorkUnit of the task, each retried up to `job.max_task_retries` times."""
    _quiet_client_logs()
    configure_filesystems(spec.job.job.filesystems)
    return [_run_with_retries(spec, wu) for wu in spec.workunits]


def _quiet_client_logs() -> None:
    """On an executor nobody configured logging: keep client libraries' tracebacks out of the job's output
    (a failure reaches the driver in the task result, with its message)."""
    logging.getLogger("kafka").setLevel(logging.CRITICAL)


def attempt_dirs(job: JobSpec, run_id: str, wu: WorkUnit, attempt_id: str) -> tuple[Path, Location]:
    """(local staging, task output) directories private to one attempt of one WorkUnit of one run of one job."""
    return (job.job.job_staging / run_id / wu.id / attempt_id, job.job.job_task_output / run_id / wu.id / attempt_id)


def _run_with_retries(spec: TaskSpec, wu: WorkUnit) -> WorkUnitResult:
    job = spec.job
    errors: list[str] = []
    started = time.monotonic()
    for attempt in range(1, job.job.max_task_retries + 2):
        attempt_id = f"a{attempt}-{uuid.uuid4().hex[:8]}"
        staging, output = attempt_dirs(job, spec.run_id, wu, attempt_id)
        pipeline = _Pipeline(spec, wu, attempt, staging, output)
        try:
            result = pipeline.run()
            result.attempts = attempt
            result.warnings[:0] = [f"attempt {i + 1} failed: {e}" for i, e in enumerate(errors)]
            result.duration_s = time.monotonic() - started
            return result
        except Exception as exc:  # noqa: BLE001 - any failure of an attempt is retried or reported
            detail = str(exc) if isinstance(exc, (QualityError, RecordError)) else _short_trace(exc)
            errors.append(detail)
            pipeline.abort()
            filesystem_for(output).rmtree(output)
            if isinstance(exc, QualityError):  # a FAIL policy decides the same way on every attempt
                break
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return WorkUnitResult(workunit=wu, status=TaskStatus.FAILED, attempts=len(errors), error=errors[-1],
                          warnings=[f"attempt {i + 1} failed: {e}" for i, e in enumerate(errors[:-1])],
                          duration_s=time.monotonic() - started)


def _short_trace(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"


class _RowChecks:
    """A list of row policies; `passes` routes a failed record per the policy's type."""

    def __init__(self, configs: Iterable[RowPolicyConfig], schema: Any, rejected: dict[str, int],
                 errors: ErrorFile, location: Any, branch: str | None) -> None:
        self.policies = []
        for cfg in configs:
            policy = cfg.plugin.create()
            policy.open(schema)
            self.policies.append((policy.check, cfg.type, cfg.plugin.label))
        self.rejected = rejected
        self.errors = errors
        self.location = location
        self.branch = branch

    def passes(self, record: Record) -> bool:
        ok = True
        for check, ptype, name in self.policies:
            reason = check(record)
            if reason is None:
                continue
            self.rejected[name] = self.rejected.get(name, 0) + 1
            if ptype is RowPolicyType.FAIL:
                raise QualityError(f"row policy {name} (FAIL) rejected the record at {self.location()}: {reason}")
            if ptype is RowPolicyType.ERR_FILE:
                self.errors.write(record, reason, self.location(), name, self.branch)
                ok = False
                break
        return ok


def _convert(records: list[Record], converters: list[Any]) -> list[Record]:
    for conv in converters:
        records = [out for r in records for out in conv.convert_record(r)]
    return records


class _Branch:
    """One fork branch of one attempt: converters, checks and a writer."""

    def __init__(self, pipeline: _Pipeline, config: BranchConfig, schema: Any) -> None:
        self.name = config.name
        self.config = config
        self.converters = [c.create() for c in config.converters]
        for conv in self.converters:
            conv.open(pipeline.context)
            schema = conv.convert_schema(schema)
        self.checks = _RowChecks(config.row_policies, schema, pipeline.rejected, pipeline.errors,
                                 pipeline.location, config.name)
        self.writer: DataWriter = config.writer.create()
        job = pipeline.spec.job
        self.target = WriterTarget(
            staging_dir=pipeline.staging, task_output_dir=pipeline.output,
            rel_dir=job.branch_dir(pipeline.wu.dataset, config.name),
            file_stem=pipeline.wu.id + pipeline.spec.file_suffix,
        )
        self.writer.open(schema, self.target)
        self.stats = BranchStats(branch=config.name, rejected={})
        self.pipeline = pipeline
        self.plain = not self.converters and not self.checks.policies  # nothing between fork and writer

    def process(self, record: Record) -> None:
        records = _convert([record], self.converters) if self.converters else (record,)
        stats = self.stats
        for rec in records:
            stats.records_in += 1
            if self.checks.policies and not self.checks.passes(rec):
                stats.rejected["row checks"] = stats.rejected.get("row checks", 0) + 1
                continue
            try:
                self.writer.write(rec)
            except RecordError as exc:
                stats.rejected["writer"] = stats.rejected.get("writer", 0) + 1
                self.pipeline.bad_record(rec, str(exc), self.pipeline.location(), f"fork.{self.name}.writer", self.name)
                continue
            stats.records_written += 1


class _Pipeline:
    """One attempt of one WorkUnit."""

    def __init__(self, spec: TaskSpec, wu: WorkUnit, attempt: int, staging: Path, output: Location) -> None:
        self.spec = spec
        self.wu = wu
        self.staging = staging
        self.output = output
        self.rejected: dict[str, int] = {}
        self.errors = ErrorFile(staging, wu.dataset, wu.id + spec.file_suffix)
        self.context = TaskContext(job_name=spec.job.name, run_id=spec.run_id, workunit=wu, attempt=attempt,
                                   staging_dir=staging, reject=self._reject_from_extractor)
        self.extractor: Any = None
        self.branches: list[_Branch] = []

    def abort(self) -> None:
        """Close what a failed attempt left open; its directories are deleted by the caller."""
        self.errors.close()
        for branch in self.branches:
            try:
                branch.writer.close()
            except Exception:  # noqa: BLE001 - the attempt already failed; keep its first error
                pass
            branch.writer.abort()

    def location(self) -> str:
        where = self.extractor.location() if self.extractor is not None else ""
        return where or f"workunit {self.wu.id}"

    def bad_record(self, record: Any, reason: str, location: str, check: str, branch: str | None = None) -> None:
        """A record that cannot be read, converted or written: error file or task failure."""
        self.rejected[check] = self.rejected.get(check, 0) + 1
        if self.spec.job.bad_records is BadRecordPolicy.FAIL:
            raise QualityError(f"bad record at {location} ({check}): {reason}")
        self.errors.write(record, reason, location, check, branch)

    def _reject_from_extractor(self, record: Any, reason: str, location: str) -> None:
        self.bad_record(record, reason, location, "extractor")

    def _straight(self, extractor: Any, mappers: list[Any], branch: _Branch) -> int:
        """The hot loop of the common job (1:1 converters, no row checks, one branch): no per-record
        lists, routing or bookkeeping beyond two counters."""
        write = branch.writer.write
        bad = self.bad_record
        extracted = written = writer_rejects = 0
        for record in extractor.read_records():
            extracted += 1
            out = record
            try:
                for m in mappers:
                    out = m(out)
            except RecordError as exc:
                bad(record, str(exc), self.location(), "converters")
                continue
            try:
                write(out)
            except RecordError as exc:
                writer_rejects += 1
                bad(out, str(exc), self.location(), f"fork.{branch.name}.writer", branch.name)
                continue
            written += 1
        stats = branch.stats
        stats.records_in += written + writer_rejects
        stats.records_written += written
        if writer_rejects:
            stats.rejected["writer"] = stats.rejected.get("writer", 0) + writer_rejects
        return extracted

    def _general(self, extractor: Any, converters: list[Any], checks: _RowChecks, route: Any,
                 branches: list[_Branch], single: _Branch | None) -> int:
        extracted = 0
        for record in extractor.read_records():
            extracted += 1
            if converters:
                try:
                    outs = _convert([record], converters)
                except RecordError as exc:
                    self.bad_record(record, str(exc), self.location(), "converters")
                    continue
            else:
                outs = (record,)
            for out in outs:
                if checks.policies and not checks.passes(out):
                    continue
                if single is not None:
                    single.process(out)
                    continue
                for n, index in enumerate(route(out)):
                    branches[index].process(out if n == 0 else dict(out))
        return extracted

    def run(self) -> WorkUnitResult:
        job = self.spec.job
        self.staging.mkdir(parents=True, exist_ok=True)
        source = job.source.create()
        self.extractor = extractor = source.get_extractor(self.wu, self.context)
        try:
            schema = extractor.get_schema()
            converters = [c.create() for c in job.converters]
            for conv in converters:
                conv.open(self.context)
                schema = conv.convert_schema(schema)
            checks = _RowChecks(job.row_policies, schema, self.rejected, self.errors, self.location, None)
            fork = job.fork.create()
            fork.open([b.name for b in job.branches], schema)
            branches = [_Branch(self, b, schema) for b in job.branches]
            self.branches = branches
            single = branches[0] if len(branches) == 1 and fork.broadcast else None
            mappers = [c.map_record for c in converters] if all(isinstance(c, OneToOneConverter) for c in converters) else None
            if single is not None and mappers is not None and not checks.policies and single.plain:
                extracted = self._straight(extractor, mappers, single)
            else:
                extracted = self._general(extractor, converters, checks, fork.route, branches, single)
            high = extractor.actual_high_watermark()
        finally:
            extractor.close()

        files = []
        metrics: dict[str, BranchMetrics] = {}
        warnings: list[str] = []
        for branch in branches:
            committed = branch.writer.commit(branch.target)
            files.extend(committed)
            branch.stats.bytes_written = sum(f.size for f in committed)
            written = sum(f.records for f in committed)
            if written != branch.stats.records_written:
                branch.stats.records_written = written  # the writer's own count is the truth
            for cfg in branch.config.task_policies:
                reason = cfg.plugin.create().check(branch.stats, extracted)
                if reason is None:
                    continue
                if cfg.type is TaskPolicyType.FAIL:
                    raise QualityError(f"task policy {cfg.plugin.label} (FAIL): {reason}")
                warnings.append(f"task policy {cfg.plugin.label} (OPTIONAL): {reason}")
            metrics[branch.name] = BranchMetrics(branch.stats.records_in, branch.stats.records_written,
                                                 branch.stats.bytes_written, len(committed))
        files.extend(self.errors.commit(self.output))
        return WorkUnitResult(workunit=self.wu, status=TaskStatus.SUCCEEDED, attempts=1, files=files,
                              actual_high_watermark=high, records_extracted=extracted, rejected=dict(self.rejected),
                              branches=metrics, warnings=warnings, attempt_dir=str(self.output))
