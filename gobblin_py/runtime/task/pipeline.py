"""One attempt's record flow: Extractor → converters → row checks → fork → branches → writers (`Pipeline`).

Every record goes through one loop, `Pipeline.flow`, over stages composed once per task; whatever one record
raises at any stage goes through `Pipeline.fault` (the one bad-record path). Attempts and retries: `attempt.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gobblin_py.api import (
    BatchExtractor,
    BranchStats,
    Converter,
    DataWriter,
    OneToOneConverter,
    RowPolicyType,
    SourceMessage,
    TaskContext,
    TaskCounter,
    TaskPolicyType,
    TaskResources,
    WorkUnit,
    WriterTarget,
)
from gobblin_py.api.types import Record
from gobblin_py.config.model import BadRecordPolicy, BranchConfig, PluginConfig, RowPolicyConfig
from gobblin_py.errors import QualityError, is_record_fault
from gobblin_py.fs import Location
from gobblin_py.runtime.columnar import takes_columnar
from gobblin_py.runtime.interrupt import raise_if_interrupted
from gobblin_py.runtime.task.committables import commit_writer
from gobblin_py.runtime.task.error_file import ErrorFile, reason
from gobblin_py.runtime.task.gc_threshold import fewer_collections
from gobblin_py.runtime.task.results import BranchMetrics, TaskStatus, WorkUnitResult
from gobblin_py.runtime.task.spec import TaskSpec


def _stage(plugin: PluginConfig, branch: str | None = None, shared: bool = False) -> str:
    """Where a record failed, as the job file names it: `converters[1] (json_to_avro)`,
    `fork.copy.converters[0] (select_fields)`; a top-level plugin several branches share gets `fork.<branch>.`."""
    key = plugin.key
    if key.startswith("fork.branches["):
        key = f"fork.{branch}.{key.split('].', 1)[1]}"
    elif shared:
        key = f"fork.{branch}.{key}"
    return f"{key} ({plugin.name or plugin.path})"


def _interruptible(records: Iterable[Record], every: int = 4096) -> Iterator[Record]:
    """`records` of an extractor without batches, stopping with KeyboardInterrupt once Ctrl-C was seen (checked every
    `every` records): a task in a driver thread, which no signal reaches, stops as a batch extractor's does at its
    next batch."""
    for i, record in enumerate(records):
        if not i % every:
            raise_if_interrupted()
        yield record


class _Dropped(Exception):
    """Raised by a row check that sent its record to the error file: the record stops, already accounted for."""


class _Step:
    """One converter of a chain, with its stage name and branch; 1:1 converters are called without an iterable."""

    __slots__ = ("branch", "converter", "map", "stage")

    def __init__(self, converter: Converter, stage: str, branch: str | None = None) -> None:
        self.converter = converter
        self.map = converter.map_record if isinstance(converter, OneToOneConverter) else None
        self.stage = stage
        self.branch = branch


@dataclass(frozen=True)
class _Check:
    """One row policy as a 1:1 step; `counted`: a record reaching it has entered its branch (`records_in`)."""

    step: Callable[[Record], Record]
    stage: str
    branch: str | None
    counted: bool


@dataclass(frozen=True)
class _Fork:
    """The fork as the end of the task-level stages: each branch's own stages follow it."""

    route: Callable[[Record], Sequence[int]]
    stage: str
    branches: list[list[Any]]


class _Segment:
    """Stages composed once per task: 1:1 steps (converters, row checks), then an end (a branch's writer, the fork,
    or a converter chain that makes several records of one) that the one record loop, `Pipeline.flow`, runs."""

    __slots__ = ("branches", "end", "ended", "entered", "entry", "lost", "stages", "stats", "steps")
    end: Callable[[Record], Any]  # set by `close`

    def __init__(self) -> None:
        self.steps: list[Callable[[Record], Record]] = []
        self.stages: list[str | None] = []  # per step and the end; None: an end that accounts for its own records
        self.branches: list[str | None] = []
        self.entered = self.ended = 0  # records that entered the segment; that passed its end
        self.lost: list[int] = []  # records stopped at each step and at the end
        self.stats: BranchStats | None = None  # set when the end is this branch's writer
        self.entry: int | None = None  # the first step a record has entered the branch at

    def add(self, step: Callable[[Record], Record], stage: str, branch: str | None) -> None:
        self.steps.append(step)
        self.stages.append(stage)
        self.branches.append(branch)

    def close(self, end: Callable[[Record], Any], stage: str | None, branch: str | None) -> _Segment:
        self.end = end
        self.stages.append(stage)
        self.branches.append(branch)
        self.lost = [0] * len(self.stages)
        return self

    def settle(self) -> None:
        """A branch's counts, from what the record loop counted at its checks and writer."""
        stats = self.stats
        if stats is None:
            return
        checks = sum(self.lost[self.entry:-1])
        writer = self.lost[-1]
        stats.records_in += self.ended + checks + writer
        stats.records_written += self.ended
        if checks:
            stats.rejected["row checks"] = stats.rejected.get("row checks", 0) + checks
        if writer:
            stats.rejected["writer"] = stats.rejected.get("writer", 0) + writer


class _Branch:
    """One fork branch of one attempt: converters, checks and a writer."""

    def __init__(self, pipeline: Pipeline, config: BranchConfig, schema: Any) -> None:
        self.name = config.name
        self.config = config
        self.steps = [_Step(c.create(), pipeline.stage(c, config.name), config.name) for c in config.converters]
        for step in self.steps:
            step.converter.open(pipeline.context)
            schema = step.converter.convert_schema(schema)
        self.checks = pipeline.row_checks(config.row_policies, schema, config.name, counted=True)
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
        self.plain = not self.steps and not self.checks  # nothing between fork and writer

    def stages(self) -> list[Any]:
        """The branch's stages in order, its writer last."""
        return [*self.steps, *self.checks, self]


class Pipeline:
    """One attempt of one WorkUnit."""

    def __init__(self, spec: TaskSpec, wu: WorkUnit, attempt: int, staging: Path, output: Location,
                 resources: TaskResources | None = None) -> None:
        self.spec = spec
        self.wu = wu
        self.staging = staging
        self.output = output
        self.rejected: dict[str, int] = {}
        self.errors = ErrorFile(staging, wu.dataset, wu.id + spec.file_suffix)
        self.context = TaskContext(job_name=spec.job.name, run_id=spec.run_id, workunit=wu, attempt=attempt,
                                   staging_dir=staging, reject=self._reject_from_extractor, resources=resources)
        self.extractor: Any = None
        self.branches: list[_Branch] = []
        self.writer_ends: list[_Segment] = []  # each branch's last segment, whose end is its writer
        self.columnar = 0  # records that took the columnar path
        self.unsynced: list[Path] = []  # its committables' fsyncs, done by the task before its results leave it
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

    def bad_record(self, record: Any, why: str, location: str, stage: str, branch: str | None = None,
                   original: SourceMessage | None = None) -> None:
        """A record that cannot be read, converted, checked, routed or written: error file, or the task fails."""
        self._count_rejected(stage)
        if self.spec.job.bad_records is BadRecordPolicy.FAIL:
            raise QualityError(f"bad record at {location} ({stage}): {why}")
        if original is None and self.spec.job.dead_letter is not None:
            original = self._current_message()
        self.errors.write(record, why, location, stage, branch, original)

    def _current_message(self) -> SourceMessage | None:
        """The message the record a later stage rejects came from (the extractor's current one), for dead letters."""
        current = getattr(self.extractor, "current_message", None)  # an extractor not derived from api.Extractor lacks it
        return current() if current is not None else None

    def _count_rejected(self, stage: str) -> None:
        self.rejected[stage] = self.rejected.get(stage, 0) + 1

    def _reject_from_extractor(self, record: Any, why: str, location: str, original: SourceMessage | None = None) -> None:
        self.bad_record(record, why, location, "extractor", None, original)

    def row_checks(self, configs: Iterable[RowPolicyConfig], schema: Any, branch: str | None,
                   counted: bool) -> list[_Check]:
        """Row policies opened on `schema`, each a step that passes its record on or stops it per the policy's type."""
        checks = []
        for cfg in configs:
            policy = cfg.plugin.create()
            policy.open(schema)
            stage = self.stage(cfg.plugin, branch)
            checks.append(_Check(self._row_check(policy.check, cfg.type, stage, branch), stage, branch, counted))
        return checks

    def _row_check(self, check: Callable[[Record], str | None], ptype: RowPolicyType, stage: str,
                   branch: str | None) -> Callable[[Record], Record]:
        """A policy's check as a step; a rejected record is counted at `stage`, then fails the task, goes to the
        error file (`_Dropped`) or, OPTIONAL, goes on."""
        def step(record: Record) -> Record:
            why = check(record)
            if why is None:
                return record
            self._count_rejected(stage)
            if ptype is RowPolicyType.FAIL:
                raise QualityError(f"row policy {stage} (FAIL) rejected the record at {self.location()}: {why}")
            if ptype is RowPolicyType.ERR_FILE:
                original = self._current_message() if self.spec.job.dead_letter is not None else None
                self.errors.write(record, why, self.location(), stage, branch, original)
                raise _Dropped
            return record
        return step

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

    def compose(self, stages: list[Any]) -> _Segment:
        """The stages from here to the writers (`_Step`, `_Check`, then a `_Fork` or a `_Branch`) as segments
        for `flow`: 1:1 steps run in line; a 1:N converter converts each record's outputs through the rest of its
        chain at once (as `convert` does), then hands each to the next segment."""
        seg = _Segment()
        for i, stage in enumerate(stages):
            if isinstance(stage, _Step) and stage.map is not None:
                seg.add(stage.map, stage.stage, stage.branch)
            elif isinstance(stage, _Check):
                if stage.counted and seg.entry is None:
                    seg.entry = len(seg.steps)
                seg.add(stage.step, stage.stage, stage.branch)
            elif isinstance(stage, _Step):
                j = i + 1
                while j < len(stages) and isinstance(stages[j], _Step) and stages[j].branch == stage.branch:
                    j += 1  # the rest of this converter chain
                return seg.close(self._expand(stages[i:j], stage.branch, self.compose(stages[j:])), None, None)
            elif isinstance(stage, _Fork):
                return seg.close(self._fork(stage.route, stage.stage, [self.compose(b) for b in stage.branches]), None, None)
            else:
                if seg.entry is None:
                    seg.entry = len(seg.steps)
                seg.stats = stage.stats
                self.writer_ends.append(seg)
                return seg.close(stage.writer.write, stage.writer_stage, stage.name)
        raise ValueError("the task's stages end in no writer")

    def _expand(self, chain: list[_Step], branch: str | None, rest: _Segment) -> Callable[[Record], None]:
        convert, flow = self.convert, self.flow

        def expand(record: Record) -> None:
            flow(convert([record], chain, branch), rest)
        return expand

    def _fork(self, route: Callable[[Record], Sequence[int]], stage: str,
              branches: list[_Segment]) -> Callable[[Record], None]:
        fault, flow = self.fault, self.flow

        def fork(record: Record) -> None:
            try:
                targets = route(record)
            except Exception as exc:  # noqa: BLE001 - the one bad-record path decides
                fault(exc, record, stage)
                return
            copies = [record if n == 0 else dict(record) for n in range(len(targets))]  # before any branch changes it
            for index, copy in zip(targets, copies):
                flow((copy,), branches[index])
        return fork

    def flow(self, records: Iterable[Record], seg: _Segment) -> None:
        """The one record loop: each record through the segment's steps into its end, one `try` per record, with
        the index of the step reached for a fault; a record that stops is counted there (see `_Segment.settle`)."""
        steps, end, stages, branches, lost = seg.steps, seg.end, seg.stages, seg.branches, seg.lost
        fault = self.fault
        entered = ended = 0
        for record in records:
            entered += 1
            out = record
            reached = 0
            try:
                for step in steps:
                    out = step(out)
                    reached += 1
                end(out)
            except Exception as exc:  # the one bad-record path decides
                if not isinstance(exc, _Dropped):
                    stage = stages[reached]
                    if stage is None:  # from an end that handles its records' faults itself: the task fails
                        raise
                    fault(exc, out, stage, branches[reached])
                lost[reached] += 1
                continue
            ended += 1
        seg.entered += entered
        seg.ended += ended

    def _columnar(self, extractor: BatchExtractor, steps: list[_Step], branch: _Branch, seg: _Segment) -> None:
        """The columnar path (see `api.batches`): each raw batch made Arrow (by the one converter, or by the
        extractor itself) and written whole, or, where that or the writer hands it back, through `flow`
        record by record."""
        convert = steps[0].converter.convert_batch if steps else extractor.to_arrow  # type: ignore[attr-defined]
        written = steps[0].converter.batch_written if steps else None  # type: ignore[attr-defined]
        write_batch = branch.writer.write_batch  # type: ignore[attr-defined]
        extractor.columnar_path()
        for batch in extractor.read_batches():
            raise_if_interrupted()
            arrow = convert(batch)
            if arrow is not None and write_batch(arrow):
                if written is not None:
                    written()
                n = arrow.num_rows  # the batch's records (a CSV block's are only counted as Arrow reads them)
                seg.entered += n
                seg.ended += n
                self.columnar += n
                continue
            self.flow(extractor.records_of(batch), seg)

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
            checks = self.row_checks(job.row_policies, schema, None, counted=False)
            fork = job.fork.create()
            fork.open([b.name for b in job.branches], schema)
            branches = [_Branch(self, b, schema) for b in job.branches]
            self.branches = branches
            single = branches[0] if len(branches) == 1 and fork.broadcast else None
            tail = single.stages() if single is not None else [
                _Fork(fork.route, self.stage(job.fork), [b.stages() for b in branches])]
            top = self.compose([*steps, *checks, *tail])
            straight = single is not None and single.plain and not checks and all(s.map is not None for s in steps)
            with fewer_collections():
                if straight and single is not None and takes_columnar(
                        job, extractor, [s.converter for s in steps], single.writer):
                    self._columnar(extractor, steps, single, top)  # type: ignore[arg-type]
                elif isinstance(extractor, BatchExtractor):  # its read_records, checked for Ctrl-C a batch at a time
                    for batch in extractor.read_batches():
                        raise_if_interrupted()
                        self.flow(extractor.records_of(batch), top)
                else:
                    self.flow(_interruptible(extractor.read_records()), top)
            extracted = top.entered
            high = extractor.actual_high_watermark()
        finally:
            extractor.close()

        files = []
        metrics: dict[str, BranchMetrics] = {}
        warnings: list[str] = []
        for seg in self.writer_ends:
            seg.settle()
        for branch in branches:
            committed = commit_writer(branch.writer, branch.target, self.unsynced)
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
        files.extend(self.errors.commit(self.output, self.unsynced))
        return WorkUnitResult(workunit=self.wu, status=TaskStatus.SUCCEEDED, attempts=1, files=files,
                              actual_high_watermark=high, records_extracted=extracted, records_columnar=self.columnar, rejected=dict(self.rejected),
                              branches=metrics, warnings=warnings, attempt_dir=str(self.output),
                              counters=TaskCounter.sum(s.converter.counters() for s in [*steps, *(t for b in branches for t in b.steps)]))
