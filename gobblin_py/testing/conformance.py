"""A conformance suite for a plugin author's own Source, Converter, DataWriter and Committer (publisher).

Each `check_*` runs the plugin the way the framework does and raises AssertionError naming the contract rule
it breaks; call them from your pytest tests (see the README, "Testing your own plugins"):

    def test_my_writer_conforms(tmp_path):
        files = check_writer(MyWriter, {"codec": "zstd"}, SCHEMA, RECORDS, tmp_path)
        check_committer(FsPublisher(FsPublisher.Settings.model_validate({"final_dir": str(tmp_path / "out")})), files, tmp_path)

Exactly-once publishing rests on these rules: a re-run after a crash must plan the same work units, read the
same records, write the same bytes under the same names, and replay commit steps without changing anything.
"""

from __future__ import annotations

import copy
import dataclasses
import gzip
import hashlib
import json
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import fastavro
from fastavro.validation import ValidationError, validate
from pydantic import BaseModel

from gobblin_py.api import (
    CommitStep,
    Committer,
    Converter,
    DatasetCommit,
    DataWriter,
    Delivery,
    GlobalCommitter,
    OutputFile,
    Plugin,
    Record,
    Schema,
    Source,
    SourceState,
    SplitMismatch,
    TaskContext,
    WatermarkValue,
    WorkUnit,
    WriterTarget,
    flatten,
)
from gobblin_py.commit.steps import BUILTIN_STEPS
from gobblin_py.errors import is_record_fault
from gobblin_py.runtime.task.committables import commit_staged

__all__ = ["check_committer", "check_converter", "check_source", "check_writer", "count_records"]

SettingsLike: TypeAlias = Mapping[str, Any] | BaseModel | None
"""A plugin's settings as the job file gives them (a mapping), or its already validated Settings model."""


def _broken(plugin: object, rule: str, detail: str) -> AssertionError:
    name = plugin.__name__ if isinstance(plugin, type) else type(plugin).__name__
    return AssertionError(f"{name} breaks the rule '{rule}': {detail}")


def _make(cls: type[Plugin], settings: SettingsLike) -> Any:
    """A fresh plugin instance, as each task (and each re-run) gets one."""
    if settings is None or isinstance(settings, BaseModel):
        return cls(settings)
    return cls(cls.Settings.model_validate(dict(settings)))


def _key(record: Any) -> str:
    """A record as a hashable, order-independent text (records are dicts)."""
    return json.dumps(record, sort_keys=True, default=repr)


@contextmanager
def _dir(tmp_dir: Path | None) -> Iterator[Path]:
    if tmp_dir is not None:
        yield Path(tmp_dir)
        return
    with tempfile.TemporaryDirectory(prefix="gobblin-conformance-") as made:
        yield Path(made)


# --- Source and Extractor ------------------------------------------------------------------------------


@dataclass
class _Read:
    """What one extractor read of one work unit."""

    records: list[Record] = field(default_factory=list)
    rejects: list[tuple[str, str]] = field(default_factory=list)  # (reason, location)
    high: WatermarkValue = None


def _context(workunit: WorkUnit, staging: Path, rejects: list[tuple[str, str]] | None = None) -> TaskContext:
    sink = rejects if rejects is not None else []
    return TaskContext(job_name="conformance", run_id="conformance-run", workunit=workunit, attempt=1,
                       staging_dir=staging, reject=lambda _record, reason, location: sink.append((reason, location)))


def _copy_state(state: SourceState, committed: Mapping[str, Mapping[str, WatermarkValue]] | None = None) -> SourceState:
    """A fresh SourceState holding `state`'s watermarks and key statistics, with `committed` on top."""
    marks = {ds: state.watermarks(ds) for ds in state.datasets()}
    for ds, keys in (committed or {}).items():
        marks.setdefault(ds, {}).update(keys)
    return SourceState(marks, {ds: state.key_stats(ds) for ds in state.datasets()})


def _plan(source_cls: type[Source], settings: SettingsLike, state: SourceState) -> list[WorkUnit]:
    return flatten(_make(source_cls, settings).get_workunits(state))


def _read(source_cls: type[Source], settings: SettingsLike, workunit: WorkUnit, staging: Path) -> _Read:
    out = _Read()
    extractor = _make(source_cls, settings).get_extractor(workunit, _context(workunit, staging, out.rejects))
    try:
        extractor.get_schema()
        out.records = [copy.deepcopy(r) for r in extractor.read_records()]
        out.high = extractor.actual_high_watermark()
    finally:
        extractor.close()
    return out


def check_source(source_cls: type[Source], settings: SettingsLike = None, state: SourceState | None = None, *,
                 expected_records: Sequence[Record] | None = None, tmp_dir: Path | None = None) -> list[Record]:
    """Plan twice, read every work unit twice, commit the watermarks reached and plan again; the records read.

    Rules: the source declares a split type and every work unit carries a split of it; work unit ids are unique in a
    plan; the same state gives the same work units (ids, ranges, splits, props);
    an extractor reads the same records each time; with `expected_records`, the plan reads each of them exactly
    once; once the run's watermarks are committed, the next plan reads none of those records again (give the
    source input with no two equal records for this one).
    """
    state = state if state is not None else SourceState({})
    first = _plan(source_cls, settings, _copy_state(state))
    ids = Counter(wu.id for wu in first)
    twice = sorted(i for i, n in ids.items() if n > 1)
    if twice:
        raise _broken(source_cls, "work unit ids are unique in a plan", f"{len(twice)} id(s) planned more than once, such as {twice[0]!r}")
    _check_splits(source_cls, first)
    again = {wu.id: wu for wu in _plan(source_cls, settings, _copy_state(state))}
    for wu in first:
        if wu.id not in again:
            raise _broken(source_cls, "the same state plans the same work units",
                          f"{wu.id!r} was planned once but not the second time (ids must come from dataset, key and range, never a clock or a random value)")
        if again[wu.id] != wu:
            raise _broken(source_cls, "the same state plans the same work units", f"{wu.id!r} was planned as {wu} and then as {again[wu.id]}")
    if len(again) != len(first):
        extra = sorted(set(again) - set(ids))
        raise _broken(source_cls, "the same state plans the same work units", f"the second plan added {extra[0]!r}")

    records: list[Record] = []
    reached: dict[str, dict[str, WatermarkValue]] = {}
    with _dir(tmp_dir) as tmp:
        for wu in first:
            read = _read(source_cls, settings, wu, tmp / "staging" / wu.id)
            reread = _read(source_cls, settings, wu, tmp / "staging" / wu.id)
            if [_key(r) for r in read.records] != [_key(r) for r in reread.records] or read.rejects != reread.rejects:
                raise _broken(source_cls, "an extractor reads the same records of a work unit each time",
                              f"work unit {wu.id!r} gave {len(read.records)} record(s) and {len(read.rejects)} reject(s), "
                              f"then {len(reread.records)} and {len(reread.rejects)}, or others in another order")
            records += read.records
            reached.setdefault(wu.dataset, {}).update(wu.reached(read.high))

        if expected_records is not None:
            got, want = Counter(map(_key, records)), Counter(map(_key, expected_records))
            if got != want:
                extra, missing = got - want, want - got
                detail = (f"read more than once or not expected: {next(iter(extra))}" if extra
                          else f"never read: {next(iter(missing))}")
                raise _broken(source_cls, "a plan reads each record exactly once",
                              f"{sum(extra.values())} extra and {sum(missing.values())} missing record(s); {detail}")

        done = Counter(map(_key, records))
        for wu in _plan(source_cls, settings, _copy_state(state, reached)):
            for record in _read(source_cls, settings, wu, tmp / "staging" / wu.id).records:
                if _key(record) in done:
                    raise _broken(source_cls, "after the watermarks a run reached are committed, the next plan reads none of its records again",
                                  f"work unit {wu.id!r} ({wu.dataset}, {wu.watermark_key} from {wu.low_watermark!r}) reads {_key(record)} again")
    return records


def _check_splits(source_cls: type[Source], units: list[WorkUnit]) -> None:
    """The source declares its split type, and every planned work unit's split fits it (see `gobblin_py.api.split`)."""
    if source_cls.split_type is None:
        raise _broken(source_cls, "a source declares the typed split its work units carry",
                      "split_type is not set (declare a `Split` subclass, and pass `split=YourSplit(…).packed()` to each "
                      "WorkUnit)")
    for wu in units:
        try:
            source_cls.split_type.of(wu)
        except SplitMismatch as exc:
            raise _broken(source_cls, f"every work unit carries a {source_cls.split_type.__name__}", str(exc)) from None


# --- Converter -----------------------------------------------------------------------------------------


def _convert(converter_cls: type[Converter], settings: SettingsLike, schema: Schema, records: Sequence[Record],
             staging: Path) -> tuple[Schema, list[tuple[str, Any]]]:
    """The output schema and, per input record, ("ok", its outputs) or ("bad", the exception type it raised)."""
    converter = _make(converter_cls, settings)
    unit = WorkUnit(id="conformance-0", dataset="dataset", watermark_key="key", low_watermark=None, expected_high_watermark=None)
    converter.open(_context(unit, staging))
    out_schema = converter.convert_schema(copy.deepcopy(schema))
    outcomes: list[tuple[str, Any]] = []
    for record in records:
        try:
            outcomes.append(("ok", [copy.deepcopy(r) for r in converter.convert_record(copy.deepcopy(record))]))
        except Exception as exc:  # noqa: BLE001 - a record fault is the record's outcome; anything else fails the task
            if not is_record_fault(exc):
                raise
            outcomes.append(("bad", type(exc).__name__))
    return out_schema, outcomes


def check_converter(converter_cls: type[Converter], settings: SettingsLike, input_schema: Schema,
                    records: Sequence[Record], *, tmp_dir: Path | None = None) -> tuple[Schema, list[Record]]:
    """Convert `records` twice with fresh converters; the output schema and the records it yielded.

    Rules: `convert_schema` returns an Avro schema (fastavro parses it); every record `convert_record` yields
    validates against it; the same input gives the same schema, the same records and the same bad records.
    """
    with _dir(tmp_dir) as tmp:
        schema, outcomes = _convert(converter_cls, settings, input_schema, records, tmp / "staging")
        schema2, outcomes2 = _convert(converter_cls, settings, input_schema, records, tmp / "staging")
    try:
        parsed = fastavro.parse_schema(copy.deepcopy(schema), named_schemas={})
    except Exception as exc:  # noqa: BLE001 - whatever fastavro raises, the schema is not Avro
        raise _broken(converter_cls, "convert_schema returns an Avro schema", f"fastavro cannot parse {schema!r}: {exc}") from None
    out: list[Record] = []
    for i, (status, produced) in enumerate(outcomes):
        for record in produced if status == "ok" else ():
            try:
                validate(record, parsed, raise_errors=True)
            except ValidationError as exc:
                raise _broken(converter_cls, "records validate against the schema convert_schema returned",
                              f"input record {i} became {record!r}: {exc}") from None
            out.append(record)
    if _key(schema) != _key(schema2):
        raise _broken(converter_cls, "convert_schema is deterministic", f"{schema!r} then {schema2!r}")
    for i, (a, b) in enumerate(zip(outcomes, outcomes2)):
        if _key(a) != _key(b):
            raise _broken(converter_cls, "convert_record is deterministic", f"input record {i} gave {a!r}, then {b!r}")
    return schema, out


# --- DataWriter ----------------------------------------------------------------------------------------


def count_records(path: Path) -> int | None:
    """The records in an .avro, .jsonl or .jsonl.gz file; None for a format this suite cannot read."""
    name = path.name
    if name.endswith(".avro"):
        with open(path, "rb") as f:
            return sum(block.num_records for block in fastavro.block_reader(f))
    if name.endswith(".jsonl.gz"):
        with gzip.open(path, "rb") as g:
            return sum(1 for line in g if line.strip())
    if name.endswith(".jsonl"):
        return sum(1 for line in path.read_bytes().splitlines() if line.strip())
    return None


@dataclass
class _Written:
    staged: list[tuple[Path, int]]
    accepted: int


def _write(writer_cls: type[DataWriter], settings: SettingsLike, schema: Schema, records: Sequence[Record],
           target: WriterTarget) -> _Written:
    writer = _make(writer_cls, settings)
    writer.open(copy.deepcopy(schema), target)
    accepted = 0
    for record in records:
        try:
            writer.write(copy.deepcopy(record))
        except Exception as exc:  # noqa: BLE001 - a refused record is not counted; anything else fails the task
            if not is_record_fault(exc):
                raise
            continue
        accepted += 1
    return _Written([(Path(p), n) for p, n in writer.close()], accepted)


def _staged_files(writer_cls: type[DataWriter], written: _Written, target: WriterTarget) -> dict[str, bytes]:
    """Check what `close()` returned; each staged file's bytes by its path relative to the staging directory."""
    staging = target.staging_dir.resolve()
    files: dict[str, bytes] = {}
    for path, n in written.staged:
        where = path.resolve()
        if not where.is_relative_to(staging) or not where.is_file():
            raise _broken(writer_cls, "close() returns files it staged under target.staging_dir",
                          f"{path} is not a file under {target.staging_dir}")
        counted = count_records(where)
        if counted is not None and counted != n:
            raise _broken(writer_cls, "close() returns each file's record count", f"{path} holds {counted} record(s), close() said {n}")
        files[where.relative_to(staging).as_posix()] = where.read_bytes()
    total = sum(n for _, n in written.staged)
    if total != written.accepted:
        raise _broken(writer_cls, "close() returns each file's record count",
                      f"the counts add up to {total}, but write() accepted {written.accepted} record(s)")
    return files


def check_writer(writer_cls: type[DataWriter], settings: SettingsLike, schema: Schema, records: Sequence[Record],
                 tmp_dir: Path) -> list[OutputFile]:
    """Write `records` with fresh writers several times; the last run's files moved into task output as
    committables (`tmp_dir/task-output`), for `check_committer`.

    Rules: `close()` returns every file under `target.staging_dir` with its record count (a refused record not
    counted); for an exactly-once writer, the same records written to the same target again give the same names
    with byte-identical content, and another target's `file_stem` gives none of those names.
    """
    tmp_dir = Path(tmp_dir)

    def target(stem: str) -> WriterTarget:
        return WriterTarget(staging_dir=tmp_dir / "staging", task_output_dir=tmp_dir / "task-output",
                            rel_dir="dataset", file_stem=stem)

    def write_and_clear(t: WriterTarget) -> dict[str, bytes]:
        files = _staged_files(writer_cls, _write(writer_cls, settings, schema, records, t), t)
        shutil.rmtree(t.staging_dir, ignore_errors=True)  # the framework deletes staging after each attempt
        return files

    main = target("conformance-wu-0001")
    first = write_and_clear(main)
    if writer_cls.guarantee is Delivery.EXACTLY_ONCE:
        second = write_and_clear(main)
        if sorted(first) != sorted(second):
            raise _broken(writer_cls, "the same records to the same target give the same file names (exactly-once rests on it)",
                          f"first {sorted(first)}, then {sorted(second)}; names must come from the target, never a clock or a random value")
        for name, data in first.items():
            if second[name] != data:
                raise _broken(writer_cls, "the same records to the same target give byte-identical files",
                              f"{name} differs between two writes ({len(data)} and {len(second[name])} bytes; "
                              f"sha256 {hashlib.sha256(data).hexdigest()[:12]} and {hashlib.sha256(second[name]).hexdigest()[:12]})")
        shared = sorted(set(first) & set(write_and_clear(target("conformance-wu-0002"))))
        if shared:
            raise _broken(writer_cls, "two targets never share a file name",
                          f"file stems conformance-wu-0001 and conformance-wu-0002 both wrote {shared[0]}; put target.file_stem in every name")
    last = _write(writer_cls, settings, schema, records, main)
    _staged_files(writer_cls, last, main)
    out = []
    for path, n in last.staged:  # as the framework does after close(): into task output, as committables
        rel = path.resolve().relative_to(main.staging_dir.resolve()).as_posix()
        out.append(commit_staged(path, Path(main.task_output_dir) / rel, rel, n))
    return out


# --- Committer (the publisher) and GlobalCommitter ------------------------------------------------------


def _tree(root: Path) -> dict[str, str]:
    """Every file under `root` (its path relative to `root`) with its content's sha256."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _changes(before: dict[str, str], after: dict[str, str]) -> str:
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    return f"{len(changed)} file(s) changed, such as {changed[0]}" if changed else "nothing changed"


def check_committer(publisher: Committer, files: Sequence[OutputFile], tmp_dir: Path, dataset: str = "dataset") -> list[CommitStep]:
    """Build `publisher`'s commit steps for `files` and execute them twice, the second time from their stored
    form as recovery replays them; then, for a GlobalCommitter, commit them as one commit twice. The steps.
    Every file they read or write must lie under `tmp_dir`.

    Rules: every step's type is one the store can load (built in, or in `publisher.step_types`) and its fields
    survive JSON; `verify()` is False before `execute()` and True after it; executing again (a crash replay)
    raises nothing and changes no file under `tmp_dir`. A GlobalCommitter's `is_committed` is False before
    `commit`, True after it and for that commit id only, and committing again changes no file.
    """
    tmp_dir = Path(tmp_dir)
    steps = publisher.commit_steps(dataset, list(files))
    if files and not steps:
        raise _broken(publisher, "commit_steps publishes the files it is given", f"{len(files)} file(s) but no step")
    loadable = {*BUILTIN_STEPS, *publisher.step_types}
    stored: list[CommitStep] = []
    for step in steps:
        if type(step) not in loadable:
            raise _broken(publisher, "every step type is one the commit store can load",
                          f"{type(step).__name__} is neither built in nor listed in {type(publisher).__name__}.step_types")
        try:
            data = json.loads(json.dumps(step.to_dict()))
        except (TypeError, ValueError) as exc:
            raise _broken(publisher, "a step's fields survive the commit store (JSON)", f"{step.describe()}: {exc}") from None
        stored.append(type(step).from_dict(data))
        if _key(stored[-1].to_dict()) != _key(step.to_dict()):
            raise _broken(publisher, "a step's fields survive the commit store (JSON)", f"{step.describe()}: {step.to_dict()} came back as {data}")
    for step in steps:
        if step.verify():
            raise _broken(type(step), "verify() is False before execute()",
                          f"{step.describe()}: a verify() that holds before the step ran would skip it on recovery and lose its data")
    for step in steps:
        step.execute()
        if not step.verify():
            raise _broken(type(step), "verify() is True after execute()", f"{step.describe()}: recovery would run it again for ever")
    done = _tree(tmp_dir)
    for replay in (steps, stored):
        for step in replay:
            step.execute()
            after = _tree(tmp_dir)
            if after != done:
                raise _broken(type(step), "execute() is idempotent: executing a done step again changes nothing",
                              f"{step.describe()}: {_changes(done, after)}")
            if not step.verify():
                raise _broken(type(step), "verify() is True after execute()", f"{step.describe()}, executed again")
    if isinstance(publisher, GlobalCommitter):
        _check_global_commit(publisher, dataset, list(files), tmp_dir)
    return steps


def _check_global_commit(publisher: GlobalCommitter, dataset: str, files: list[OutputFile], tmp_dir: Path) -> None:
    """One commit of `files` as the framework's global commit step runs it (and replays it after a crash)."""
    one = DatasetCommit(job="conformance", run_id="run-1", dataset=dataset, commit_id="conformance-commit-1",
                        files=tuple(files), watermarks={"0": 1})
    other = dataclasses.replace(one, run_id="run-2", commit_id="conformance-commit-2")

    def commit() -> None:
        publisher.commit(publisher.filter_recovered(one))

    if publisher.is_committed(one):
        raise _broken(publisher, "is_committed() is False before commit()",
                      f"{one.commit_id} of dataset {dataset!r} was never committed; recovery would skip it and the commit would be lost")
    commit()
    if not publisher.is_committed(one):
        raise _broken(publisher, "is_committed() is True after commit()", f"{one.commit_id}: recovery would commit it again")
    if publisher.is_committed(other):
        raise _broken(publisher, "is_committed() finds only the commit of that id", f"{other.commit_id} was never committed")
    done = _tree(tmp_dir)
    commit()
    after = _tree(tmp_dir)
    if after != done:
        raise _broken(publisher, "a global commit replayed after it is done changes nothing", _changes(done, after))