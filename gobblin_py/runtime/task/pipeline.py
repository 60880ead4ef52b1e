"""The task flow of one WorkUnit: Extractor → converters → row checks → fork → branches → writers.

Pure and picklable: `run_task(spec)` is what a Spark executor (or the in-process executor) calls.
Each attempt writes under its own attempt directory; only the files listed in the returned
result are ever published, so a failed, retried or duplicated attempt never publishes twice.
Whatever one record raises at any stage goes through `_Pipeline.fault` (the one bad-record path).
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
    BatchConverter,
    BatchExtractor,
    BatchWriter,
    BranchStats,
    Converter,
    DataWriter,
    MultiWorkUnit,
    OneToOneConverter,
    RowPolicyType,
    TaskContext,
    TaskCounter,
    TaskPolicyType,
    WorkUnit,
    WriterTarget,
)
from gobblin_py.api.types import Record
from gobblin_py.config.model import BadRecordPolicy, BranchConfig, JobSpec, PluginConfig, RowPolicyConfig
from gobblin_py.errors import QualityError, UnreachableError, describe, is_record_fault, is_retriable
from gobblin_py.fs import Location, filesystem_for
from gobblin_py.fs import configure as configure_filesystems
from gobblin_py.runtime.task.error_file import ErrorFile, reason
from gobblin_py.runtime.task.committables import commit_writer
from gobblin_py.runtime.task.giveups import GiveUps
from gobblin_py.runtime.task.gc_threshold import fewer_collections
from gobblin_py.runtime.task.results import BranchMetrics, TaskStatus, WorkUnitResult


@dataclass(frozen=True)
class TaskSpec:
    """Everything an executor needs to run one task (a WorkUnit or a MultiWorkUnit)."""

    job: JobSpec
    run_id: str
    unit: WorkUnit | MultiWorkUnit
    file_suffix: str = ""  # at_least_once runs add the run id, as Gobblin's writers name files
    estimated_bytes: float | None = None  # the Source's estimate (None: unknown), to run a small plan in the driver

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
    """Attempts of one WorkUnit until one succeeds; a failure that would repeat (see `is_retriable`) ends them at once,
    and so does a service this task needs that a task of this run already gave up on (see `giveups`)."""
    job = spec.job
    errors: list[str] = []
    started = time.monotonic()
    giveups = GiveUps(job.job.job_staging / spec.run_id)
    needs = _endpoints(job, wu)
    last = job.job.max_task_retries + 1
    for attempt in range(1, last + 1):
        gave_up = next((g for g in map(giveups.find, sorted(needs)) if g is not None), None)
        if gave_up is not None:
            return _failed(wu, errors, gave_up.message(len(errors)), started)
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
            retriable = is_retriable(exc)
            errors.append(_short_trace(exc) if retriable else str(exc))
            pipeline.abort()
            filesystem_for(output).rmtree(output)
            if isinstance(exc, UnreachableError):
                needs.add(exc.endpoint)
                if attempt == last:  # this task's budget for the service is spent: the run's is too
                    return _failed(wu, errors, giveups.give_up(exc, wu.id, attempt).own_message(), started)
            if not retriable:
                break
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return _failed(wu, errors, errors[-1], started)


def _failed(wu: WorkUnit, errors: list[str], error: str, started: float) -> WorkUnitResult:
    """The result of a WorkUnit whose attempts (`errors`, one per attempt, possibly none) all failed."""
    shown = errors[:-1] if errors and errors[-1] == error else errors
    return WorkUnitResult(workunit=wu, status=TaskStatus.FAILED, attempts=len(errors), error=error,
                          warnings=[f"attempt {i + 1} failed: {e}" for i, e in enumerate(shown)],
                          duration_s=time.monotonic() - started)


def _endpoints(job: JobSpec, wu: WorkUnit) -> set[str]:
    """The services `wu` is known to need before its first attempt, as its Source names them (the Kafka source
    names its brokers); a service an attempt fails to reach is added then."""
    return set(job.source.create().endpoints(wu))


def _short_trace(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{describe(exc)}{where}"


def _stage(plugin: PluginConfig, branch: str | None = None, shared: bool = False) -> str:
    """Where a record failed, as the job file names it: `converters[1] (json_to_avro)`,
    `fork.copy.converters[0] (select_fields)`; a top-level plugin several branches share gets `fork.<branch>.`."""
    key = plugin.key
    if key.startswith("fork.branches["):
        key = f"fork.{branch}.{key.split('].', 1)[1]}"
    elif shared:
        key = f"fork.{branch}.{key}"
    return f"{key} ({plugin.name or plugin.path})"


def _takes_columnar(job: JobSpec, extractor: Any, steps: list[_Step], branch: _Branch | None) -> bool:
    """Whether a straight task can take the columnar path: batches in, one converter that makes Arrow of them (or
    none, for an extractor that makes Arrow itself), a writer that takes Arrow (and `job.columnar` not turned off)."""
    if not (job.job.columnar and branch is not None and isinstance(extractor, BatchExtractor)
            and isinstance(branch.writer, BatchWriter) and branch.writer.takes_batches()):
        return False
    if not steps:
        return extractor.makes_arrow
    return len(steps) == 1 and isinstance(steps[0].converter, BatchConverter)


class _Step:
    """One converter of a chain, with its stage name; 1:1 converters are called without an iterable."""

    __slots__ = ("converter", "map", "stage")

    def __init__(self, converter: Converter, stage: str) -> None:
        self.converter = converter
        self.map = converter.map_record if isinstance(converter, OneToOneConverter) else None
        self.stage = stage


class _RowChecks:
    """A list of row policies; `passes` routes a failed record per the policy's type."""

    def __init__(self, pipeline: _Pipeline, configs: Iterable[RowPolicyConfig], schema: Any, branch: str | None) -> None:
        self.policies = []
        for cfg in configs:
            policy = cfg.plugin.create()
            policy.open(schema)
            self.policies.append((policy.check, cfg.type, pipeline.stage(cfg.plugin, branch)))
        self.pipeline = pipeline
        self.branch = branch

    def passes(self, record: Record) -> bool:
        pipeline = self.pipeline
        for check, ptype, stage in self.policies:
            try:
                why = check(record)
            except Exception as exc:  # noqa: BLE001 - the one bad-record path decides
                pipeline.fault(exc, record, stage, self.branch)
                return False
            if why is None:
                continue
            pipeline.rejected[stage] = pipeline.rejected.get(stage, 0) + 1
            if ptype is RowPolicyType.FAIL:
                raise QualityError(f"row policy {stage} (FAIL) rejected the record at {pipeline.location()}: {why}")
            if ptype is RowPolicyType.ERR_FILE:
                pipeline.errors.write(record, why, pipeline.location(), stage, self.branch)
                return False
        return True


class _Branch:
    """One fork branch of one attempt: converters, checks and a writer."""

    def __init__(self, pipeline: _Pipeline, config: BranchConfig, schema: Any) -> None:
        self.name = config.name
        self.config = config
        self.steps = [_Step(c.create(), pipeline.stage(c, config.name)) for c in config.converters]
        for step in self.steps:
            step.converter.open(pipeline.context)
            schema = step.converter.convert_schema(schema)
        self.checks = _RowChecks(pipeline, config.row_policies, schema, config.name)
        self.writer: DataWriter = config.writer.create()
        self.writer_stage = pipeline.stage(config.writer, config.name)
        job = pipeline.spec.job
        self.target = WriterTarget(
            staging_dir=pipeline.staging, task_output_dir=pipeline.output,
            rel_dir=job.branch_dir(pipeline.wu.dataset, config.name),
            file_stem=pipeline.wu.id + pipeline.spec.file_suffix, dataset=pipeline.wu.dataset, branch=config.name,
        )
        self.writer.open(schema, self.target)
        self.stats = BranchStats(branch=config.name, rejected={})
        self.pipeline = pipeline
        self.plain = not self.steps and not self.checks.policies  # nothing between fork and writer

    def process(self, record: Record) -> None:
        records = self.pipeline.convert([record], self.steps, self.name) if self.steps else (record,)
        stats = self.stats
        for rec in records:
            stats.records_in += 1
            if self.checks.policies and not self.checks.passes(rec):
                stats.rejected["row checks"] = stats.rejected.get("row checks", 0) + 1
                continue
            try:
                self.writer.write(rec)
            except Exception as exc:  # noqa: BLE001 - the one bad-record path decides
                self.pipeline.fault(exc, rec, self.writer_stage, self.name)
                stats.rejected["writer"] = stats.rejected.get("writer", 0) + 1
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
        self.columnar = 0  # records that took the columnar path
        self._shared = len(spec.job.branches) > 1  # top-level writer and publisher named per branch

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

    def stage(self, plugin: PluginConfig, branch: str | None = None) -> str:
        return _stage(plugin, branch, self._shared and branch is not None)

    def fault(self, exc: Exception, record: Any, stage: str, branch: str | None = None) -> None:
        """`record` raised `exc` at `stage`: a bad record (see `is_record_fault`), or `exc` fails the task."""
        if not is_record_fault(exc):
            raise exc
        self.bad_record(record, reason(exc), self.location(), stage, branch)

    def bad_record(self, record: Any, why: str, location: str, stage: str, branch: str | None = None) -> None:
        """A record that cannot be read, converted, checked, routed or written: error file, or the task fails."""
        self.rejected[stage] = self.rejected.get(stage, 0) + 1
        if self.spec.job.bad_records is BadRecordPolicy.FAIL:
            raise QualityError(f"bad record at {location} ({stage}): {why}")
        self.errors.write(record, why, location, stage, branch)

    def _reject_from_extractor(self, record: Any, why: str, location: str) -> None:
        self.bad_record(record, why, location, "extractor")

    def convert(self, records: list[Record], steps: list[_Step], branch: str | None) -> list[Record]:
        """`records` through a chain of converters; a record one of them raises on is a fault of that step."""
        fault = self.fault
        for step in steps:
            out: list[Record] = []
            one = step.map
            for r in records:
                try:
                    if one is not None:
                        out.append(one(r))
                        continue
                    produced = list(step.converter.convert_record(r))  # all of a record's outputs, or none
                except Exception as exc:  # noqa: BLE001 - the one bad-record path decides
                    fault(exc, r, step.stage, branch)
                    continue
                out += produced
            records = out
        return records

    def _columnar(self, extractor: BatchExtractor, steps: list[_Step], branch: _Branch) -> int:
        """The columnar path (see `api.batches`): each raw batch made Arrow (by the one converter, or by the
        extractor itself) and written whole, or, where that or the writer hands it back, through `_straight`
        record by record."""
        convert = steps[0].converter.convert_batch if steps else extractor.to_arrow  # type: ignore[attr-defined]
        write_batch = branch.writer.write_batch  # type: ignore[attr-defined]
        stats = branch.stats
        extracted = 0
        for batch in extractor.read_batches():
            arrow = convert(batch)
            if arrow is not None and write_batch(arrow):
                n = len(batch.values)
                extracted += n
                self.columnar += n
                stats.records_in += n
                stats.records_written += n
                continue
            extracted += self._straight(extractor.records_of(batch), steps, branch)
        return extracted

    def _straight(self, records: Iterable[Record], steps: list[_Step], branch: _Branch) -> int:
        """The hot loop of the common job (1:1 converters, no row checks, one branch): no per-record
        lists or routing; one `try` per record, with the index of the step reached for a fault."""
        write = branch.writer.write
        mappers = [s.map for s in steps]
        stages = [s.stage for s in steps] + [branch.writer_stage]
        last = len(mappers)
        fault = self.fault
        extracted = written = writer_refused = 0
        for record in records:
            extracted += 1
            out = record
            reached = 0
            try:
                for m in mappers:
                    out = m(out)
                    reached += 1
                write(out)
            except Exception as exc:  # noqa: BLE001 - the one bad-record path decides
                fault(exc, out, stages[reached], branch.name if reached == last else None)
                writer_refused += reached == last
                continue
            written += 1
        stats = branch.stats
        stats.records_in += written + writer_refused
        stats.records_written += written
        if writer_refused:
            stats.rejected["writer"] = stats.rejected.get("writer", 0) + writer_refused
        return extracted

    def _general(self, extractor: Any, steps: list[_Step], checks: _RowChecks, route: Any, fork_stage: str,
                 branches: list[_Branch], single: _Branch | None) -> int:
        extracted = 0
        for record in extractor.read_records():
            extracted += 1
            for out in self.convert([record], steps, None) if steps else (record,):
                if checks.policies and not checks.passes(out):
                    continue
                if single is not None:
                    single.process(out)
                    continue
                try:
                    targets = route(out)
                except Exception as exc:  # noqa: BLE001 - the one bad-record path decides
                    self.fault(exc, out, fork_stage)
                    continue
                copies = [out if n == 0 else dict(out) for n in range(len(targets))]  # before any branch changes it
                for index, copy in zip(targets, copies):
                    branches[index].process(copy)
        return extracted

    def run(self) -> WorkUnitResult:
        job = self.spec.job
        self.staging.mkdir(parents=True, exist_ok=True)
        source = job.source.create()
        self.extractor = extractor = source.get_extractor(self.wu, self.context)
        try:
            schema = extractor.get_schema()
            steps = [_Step(c.create(), self.stage(c)) for c in job.converters]
            for step in steps:
                step.converter.open(self.context)
                schema = step.converter.convert_schema(schema)
            checks = _RowChecks(self, job.row_policies, schema, None)
            fork = job.fork.create()
            fork.open([b.name for b in job.branches], schema)
            branches = [_Branch(self, b, schema) for b in job.branches]
            self.branches = branches
            single = branches[0] if len(branches) == 1 and fork.broadcast else None
            one_to_one = all(s.map is not None for s in steps)
            straight = single is not None and one_to_one and not checks.policies and single.plain
            with fewer_collections():
                if straight and _takes_columnar(job, extractor, steps, single):
                    extracted = self._columnar(extractor, steps, single)
                elif straight:
                    extracted = self._straight(extractor.read_records(), steps, single)
                else:
                    extracted = self._general(extractor, steps, checks, fork.route, self.stage(job.fork), branches, single)
            high = extractor.actual_high_watermark()
        finally:
            extractor.close()

        files = []
        metrics: dict[str, BranchMetrics] = {}
        warnings: list[str] = []
        for branch in branches:
            committed = commit_writer(branch.writer, branch.target)
            files.extend(committed)
            branch.stats.bytes_written = sum(f.size for f in committed)
            written = sum(f.records for f in committed)
            if written != branch.stats.records_written:
                branch.stats.records_written = written  # the writer's own count is the truth
            for cfg in branch.config.task_policies:
                why = cfg.plugin.create().check(branch.stats, extracted)
                if why is None:
                    continue
                if cfg.type is TaskPolicyType.FAIL:
                    raise QualityError(f"task policy {cfg.plugin.label} (FAIL): {why}")
                warnings.append(f"task policy {cfg.plugin.label} (OPTIONAL): {why}")
            metrics[branch.name] = BranchMetrics(branch.stats.records_in, branch.stats.records_written,
                                                 branch.stats.bytes_written, len(committed))
        files.extend(self.errors.commit(self.output))
        return WorkUnitResult(workunit=self.wu, status=TaskStatus.SUCCEEDED, attempts=1, files=files,
                              actual_high_watermark=high, records_extracted=extracted, records_columnar=self.columnar, rejected=dict(self.rejected),
                              branches=metrics, warnings=warnings, attempt_dir=str(self.output),
                              counters=TaskCounter.sum(s.converter.counters() for s in [*steps, *(t for b in branches for t in b.steps)]))
