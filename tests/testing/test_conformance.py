"""The conformance suite: the built-in plugins pass it, and each check fails for a plugin that breaks its rule."""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import orjson
import pytest
from support.jobs import EVENT_SCHEMA

from gobblin_py.api import (
    CommitStep,
    Committer,
    Converter,
    DatasetCommit,
    DataWriter,
    Extractor,
    GlobalCommitter,
    OutputFile,
    Record,
    Schema,
    SourceState,
    TaskContext,
    WorkUnit,
    WriterTarget,
)
from gobblin_py.builtin.converters.json_to_avro import JsonToAvroConverter
from gobblin_py.builtin.publishers.fs import FsPublisher
from gobblin_py.builtin.sources.files.source import FilesSource
from gobblin_py.builtin.writers.avro import AvroWriter
from gobblin_py.builtin.writers.jsonl import JsonLinesWriter
from gobblin_py.builtin.writers.parquet import ParquetWriter
from gobblin_py.testing.conformance import check_committer, check_converter, check_source, check_writer

DAY0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
EVENTS = [{"id": i, "ts": DAY0 + (i % 3) * 86_400_000 + i, "user": f"u{i}", "kind": "click", "amount": i / 2, "country": "DE"}
          for i in range(1, 10)]
AVRO_SCHEMA = json.loads(EVENT_SCHEMA.read_text())


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    """Two datasets of JSON-lines files holding EVENTS (each once), and a bad line."""
    root = tmp_path / "in"
    for name, events in (("clicks/a.jsonl", EVENTS[:3]), ("clicks/b.jsonl", EVENTS[3:5]), ("views/c.jsonl", EVENTS[5:])):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events) + (b"not json\n" if name.startswith("views") else b""))
    return root


def _files(root: Path) -> dict[str, Any]:
    return {"path": str(root)}


def _fs(final: Path) -> FsPublisher:
    return FsPublisher(FsPublisher.Settings.model_validate({"final_dir": str(final)}))


# --- the built-in plugins pass ------------------------------------------------------------------------


def test_the_builtin_plugins_pass_the_suite_end_to_end(tmp_path: Path, inputs: Path) -> None:
    records = check_source(FilesSource, _files(inputs), expected_records=EVENTS, tmp_dir=tmp_path / "src")
    schema, converted = check_converter(JsonToAvroConverter, {"schema": str(EVENT_SCHEMA)}, {"type": "json"},
                                        [*records, {"id": "not a number", "ts": DAY0}])
    assert schema == AVRO_SCHEMA and len(converted) == len(EVENTS)
    files = check_writer(AvroWriter, {"partition": {"column": "ts"}}, schema, converted, tmp_path / "w")
    assert sorted(f.rel_path for f in files) == ["dataset/2026/01/01/conformance-wu-0001.avro",
                                                 "dataset/2026/01/02/conformance-wu-0001.avro",
                                                 "dataset/2026/01/03/conformance-wu-0001.avro"]
    steps = check_committer(_fs(tmp_path / "w" / "final"), files, tmp_path / "w")
    assert len(steps) == 3 and all((tmp_path / "w" / "final" / f.rel_path).is_file() for f in files)


def test_a_source_with_committed_watermarks_plans_only_what_is_new(tmp_path: Path, inputs: Path) -> None:
    size = (inputs / "clicks" / "a.jsonl").stat().st_size
    state = SourceState({"clicks": {"a.jsonl": size}})
    assert len(check_source(FilesSource, _files(inputs), state, expected_records=EVENTS[3:], tmp_dir=tmp_path)) == 6


@pytest.mark.parametrize("writer, settings", [
    (AvroWriter, {"codec": "null"}),
    (AvroWriter, {"codec": "deflate", "partition": {"column": "ts", "granularity": "HOUR"}}),
    (JsonLinesWriter, {}),
    (JsonLinesWriter, {"compression": "gzip", "partition": {"column": "ts"}}),
    (ParquetWriter, {}),
    (ParquetWriter, {"compression": "snappy", "row_group_records": 2, "batch_records": 3, "partition": {"column": "ts"}}),
])
def test_the_builtin_writers_pass(tmp_path: Path, writer: type[DataWriter], settings: dict[str, Any]) -> None:
    files = check_writer(writer, settings, AVRO_SCHEMA, EVENTS, tmp_path)
    assert sum(f.records for f in files) == len(EVENTS)
    check_committer(_fs(tmp_path / "final"), files, tmp_path)


def test_a_refused_record_is_not_counted(tmp_path: Path) -> None:
    files = check_writer(AvroWriter, {}, AVRO_SCHEMA, [*EVENTS, {"id": "x"}], tmp_path)
    assert sum(f.records for f in files) == len(EVENTS)


# --- a broken Source fails ----------------------------------------------------------------------------


class RandomIds(FilesSource):
    def get_workunits(self, state: SourceState) -> list[WorkUnit]:
        return [dataclasses.replace(wu, id=f"{wu.id}-{uuid.uuid4().hex}") for wu in super().get_workunits(state)]


class RandomProps(FilesSource):
    def get_workunits(self, state: SourceState) -> list[WorkUnit]:
        return [dataclasses.replace(wu, props={**wu.props, "nonce": uuid.uuid4().hex}) for wu in super().get_workunits(state)]


class NoSplitType(FilesSource):
    split_type = None


class MisnamedSplitField(FilesSource):
    def get_workunits(self, state: SourceState) -> list[WorkUnit]:
        return [dataclasses.replace(wu, split={**wu.split, "fields": {"path" if k == "file" else k: v
                                                                      for k, v in wu.split["fields"].items()}})
                for wu in super().get_workunits(state)]


class OneId(FilesSource):
    def get_workunits(self, state: SourceState) -> list[WorkUnit]:
        return [dataclasses.replace(wu, id="the-only-id") for wu in super().get_workunits(state)]


class _Wrapped(Extractor):
    def __init__(self, inner: Extractor) -> None:
        self.inner = inner

    def get_schema(self) -> Schema:
        return self.inner.get_schema()

    def read_records(self) -> Iterator[Record]:
        yield from self.inner.read_records()

    def actual_high_watermark(self) -> Any:
        return self.inner.actual_high_watermark()

    def close(self) -> None:
        self.inner.close()


class ReadsTwice(_Wrapped):
    def read_records(self) -> Iterator[Record]:
        records = list(self.inner.read_records())
        yield from records + records[:1]


_reads = itertools.count()


class StampsReadTime(_Wrapped):
    def read_records(self) -> Iterator[Record]:
        read = next(_reads)
        for record in self.inner.read_records():
            yield {**record, "read": read}


class KeepsLowWatermark(_Wrapped):
    def actual_high_watermark(self) -> Any:
        return None  # for the files source: nothing of the file ingested yet


def _with_extractor(wrapper: type[_Wrapped]) -> type[FilesSource]:
    class Wrapping(FilesSource):
        def get_extractor(self, workunit: WorkUnit, context: TaskContext) -> Extractor:
            return wrapper(super().get_extractor(workunit, context))

    Wrapping.__name__ = wrapper.__name__
    return Wrapping


@pytest.mark.parametrize("source, rule", [
    (RandomIds, "the same state plans the same work units"),
    (RandomProps, "the same state plans the same work units"),
    (OneId, "work unit ids are unique in a plan"),
    (NoSplitType, "a source declares the typed split its work units carry"),
    (MisnamedSplitField, "every work unit carries a FileSplit"),
    (_with_extractor(ReadsTwice), "a plan reads each record exactly once"),
    (_with_extractor(StampsReadTime), "an extractor reads the same records of a work unit each time"),
    (_with_extractor(KeepsLowWatermark), "the next plan reads none of its records again"),
])
def test_a_broken_source_fails_naming_the_rule(tmp_path: Path, inputs: Path, source: type[FilesSource], rule: str) -> None:
    with pytest.raises(AssertionError, match=f"{source.__name__} breaks the rule '.*{re.escape(rule)}"):
        check_source(source, _files(inputs), expected_records=EVENTS, tmp_dir=tmp_path)


# --- a broken Converter fails -------------------------------------------------------------------------


class _Passing(Converter):
    def convert_schema(self, schema: Schema) -> Schema:
        return AVRO_SCHEMA

    def convert_record(self, record: Record) -> Iterable[Record]:
        return (record,)


class LiesAboutItsSchema(_Passing):
    def convert_record(self, record: Record) -> Iterable[Record]:
        return ({**record, "id": str(record["id"])},)


class NotAvro(_Passing):
    def convert_schema(self, schema: Schema) -> Schema:
        return {"type": "table", "columns": ["id"]}


class AddsAClock(_Passing):
    def convert_schema(self, schema: Schema) -> Schema:
        return {**AVRO_SCHEMA, "fields": [*AVRO_SCHEMA["fields"], {"name": "seen_ns", "type": "long"}]}

    def convert_record(self, record: Record) -> Iterable[Record]:
        return ({**record, "seen_ns": time.perf_counter_ns()},)


class NamesItsSchemaAtRandom(_Passing):
    def convert_schema(self, schema: Schema) -> Schema:
        return {**AVRO_SCHEMA, "name": f"Event_{uuid.uuid4().hex}"}


@pytest.mark.parametrize("converter, rule", [
    (LiesAboutItsSchema, "records validate against the schema convert_schema returned"),
    (NotAvro, "convert_schema returns an Avro schema"),
    (AddsAClock, "convert_record is deterministic"),
    (NamesItsSchemaAtRandom, "convert_schema is deterministic"),
])
def test_a_broken_converter_fails_naming_the_rule(converter: type[Converter], rule: str) -> None:
    check_converter(_Passing, None, {"type": "json"}, EVENTS)
    with pytest.raises(AssertionError, match=f"{converter.__name__} breaks the rule '{re.escape(rule)}'"):
        check_converter(converter, None, {"type": "json"}, EVENTS)


# --- a broken DataWriter fails ------------------------------------------------------------------------


class _Lines(DataWriter):
    """JSON lines in one file `<staging>/<rel_dir>/<name()>`; each subclass breaks one rule."""

    def name(self, target: WriterTarget) -> str:
        return f"{target.file_stem}.jsonl"

    def where(self, target: WriterTarget) -> Path:
        return target.staging_dir / target.rel_dir

    def open(self, schema: Schema, target: WriterTarget) -> None:
        self.path = self.where(target) / self.name(target)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.f = open(self.path, "wb")
        self.n = 0

    def write(self, record: Record) -> None:
        self.f.write(orjson.dumps(record) + b"\n")
        self.n += 1

    def close(self) -> list[tuple[Path, int]]:
        self.f.close()
        return [(self.path, self.n)]


class UuidNames(_Lines):
    def name(self, target: WriterTarget) -> str:
        return f"{target.file_stem}-{uuid.uuid4().hex}.jsonl"


class StampsWriteTime(_Lines):
    def write(self, record: Record) -> None:
        super().write({**record, "written_ns": time.perf_counter_ns()})


class IgnoresFileStem(_Lines):
    def name(self, target: WriterTarget) -> str:
        return "part-0.jsonl"


class MiscountsRecords(_Lines):
    def close(self) -> list[tuple[Path, int]]:
        return [(path, n + 1) for path, n in super().close()]


class MiscountsAnUnreadableFormat(MiscountsRecords):
    def name(self, target: WriterTarget) -> str:
        return f"{target.file_stem}.bin"  # no per-file count: the total is checked


class WritesOutsideStaging(_Lines):
    def where(self, target: WriterTarget) -> Path:
        return target.staging_dir.parent / "elsewhere"


def test_the_writer_the_broken_ones_derive_from_passes(tmp_path: Path) -> None:
    check_writer(_Lines, None, AVRO_SCHEMA, EVENTS, tmp_path)


@pytest.mark.parametrize("writer, rule", [
    (UuidNames, "the same records to the same target give the same file names"),
    (StampsWriteTime, "the same records to the same target give byte-identical files"),
    (IgnoresFileStem, "two targets never share a file name"),
    (MiscountsRecords, "close() returns each file's record count"),
    (MiscountsAnUnreadableFormat, "close() returns each file's record count"),
    (WritesOutsideStaging, "close() returns files it staged under target.staging_dir"),
])
def test_a_broken_writer_fails_naming_the_rule(tmp_path: Path, writer: type[DataWriter], rule: str) -> None:
    with pytest.raises(AssertionError, match=f"{writer.__name__} breaks the rule '{re.escape(rule)}"):
        check_writer(writer, None, AVRO_SCHEMA, EVENTS, tmp_path)


# --- a broken committer fails -------------------------------------------------------------------------


@dataclasses.dataclass
class CopyStep(CommitStep):
    """Copies src to dst: done when dst holds src's bytes (src stays, so a replay can compare)."""

    type_name: ClassVar[str] = "test_copy"
    src: str
    dst: str

    def verify(self) -> bool:
        return Path(self.dst).is_file() and Path(self.dst).read_bytes() == Path(self.src).read_bytes()

    def execute(self) -> None:
        Path(self.dst).parent.mkdir(parents=True, exist_ok=True)
        Path(self.dst).write_bytes(Path(self.src).read_bytes())

    def describe(self) -> str:
        return f"copy {self.src} to {self.dst}"


@dataclasses.dataclass
class AppendStep(CopyStep):
    type_name: ClassVar[str] = "test_append"

    def verify(self) -> bool:
        return Path(self.dst).is_file()

    def execute(self) -> None:
        Path(self.dst).parent.mkdir(parents=True, exist_ok=True)
        with open(self.dst, "ab") as f:
            f.write(Path(self.src).read_bytes())


@dataclasses.dataclass
class AlwaysDone(CopyStep):
    type_name: ClassVar[str] = "test_always_done"

    def verify(self) -> bool:
        return True


@dataclasses.dataclass
class NeverDone(CopyStep):
    type_name: ClassVar[str] = "test_never_done"

    def verify(self) -> bool:
        return Path(self.dst + ".done").exists()


@dataclasses.dataclass
class SetField(CopyStep):
    type_name: ClassVar[str] = "test_set_field"
    tags: set[str] = dataclasses.field(default_factory=lambda: {"a"})


def _publisher(step: type[CopyStep], final: Path, registered: bool = True) -> Committer:
    class StepsPublisher(Committer):
        step_types = (step,) if registered else ()

        def commit_steps(self, dataset: str, files: list[OutputFile]) -> list[CommitStep]:
            return [step(src=f.path, dst=str(final / f.rel_path)) for f in files]

    StepsPublisher.__name__ = f"{step.__name__}Publisher"
    return StepsPublisher()


def test_the_step_the_broken_ones_derive_from_passes(tmp_path: Path) -> None:
    files = check_writer(_Lines, None, AVRO_SCHEMA, EVENTS, tmp_path)
    check_committer(_publisher(CopyStep, tmp_path / "final"), files, tmp_path)


@pytest.mark.parametrize("step, registered, rule", [
    (AppendStep, True, "execute() is idempotent: executing a done step again changes nothing"),
    (AlwaysDone, True, "verify() is False before execute()"),
    (NeverDone, True, "verify() is True after execute()"),
    (CopyStep, False, "every step type is one the commit store can load"),
    (SetField, True, "a step's fields survive the commit store (JSON)"),
])
def test_a_broken_committer_fails_naming_the_rule(tmp_path: Path, step: type[CopyStep], registered: bool, rule: str) -> None:
    files = check_writer(_Lines, None, AVRO_SCHEMA, EVENTS, tmp_path)
    with pytest.raises(AssertionError, match=f"breaks the rule '{re.escape(rule)}'"):
        check_committer(_publisher(step, tmp_path / "final", registered), files, tmp_path)


def test_a_publisher_that_makes_no_step_for_its_files_fails(tmp_path: Path) -> None:
    class PublishesNothing(Committer):
        def commit_steps(self, dataset: str, files: list[OutputFile]) -> list[CommitStep]:
            return []

    files = check_writer(_Lines, None, AVRO_SCHEMA, EVENTS, tmp_path)
    with pytest.raises(AssertionError, match="PublishesNothing breaks the rule 'commit_steps publishes the files it is given'"):
        check_committer(PublishesNothing(), files, tmp_path)


# --- a broken GlobalCommitter fails -------------------------------------------------------------------


class ManifestCommitter(FsPublisher, GlobalCommitter):
    """Publishes as `fs` does, then lists the files in `<final_dir>/_manifests/<commit id>.json`."""

    def _manifest(self, commit_id: str) -> Path:
        return Path(self.settings.final_dir) / "_manifests" / f"{commit_id}.json"

    def commit(self, commit: DatasetCommit) -> None:
        path = self._manifest(commit.commit_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"dataset": commit.dataset, "files": sorted(f.rel_path for f in commit.files)}))

    def is_committed(self, commit: DatasetCommit) -> bool:
        return self._manifest(commit.commit_id).is_file()


class AppendsToOneLog(ManifestCommitter):
    def commit(self, commit: DatasetCommit) -> None:
        path = self._manifest("log")
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as f:
            f.write(f"{commit.commit_id} {len(commit.files)}\n")

    def is_committed(self, commit: DatasetCommit) -> bool:
        path = self._manifest("log")
        return path.is_file() and commit.commit_id in path.read_text()


class AlwaysCommitted(ManifestCommitter):
    def is_committed(self, commit: DatasetCommit) -> bool:
        return True


class NeverCommitted(ManifestCommitter):
    def is_committed(self, commit: DatasetCommit) -> bool:
        return False


class AnyCommitWillDo(ManifestCommitter):
    def is_committed(self, commit: DatasetCommit) -> bool:
        return any(self._manifest("x").parent.glob("*.json"))


@pytest.mark.parametrize("committer, rule", [
    (ManifestCommitter, None),
    (AppendsToOneLog, "a global commit replayed after it is done changes nothing"),
    (AlwaysCommitted, "is_committed() is False before commit()"),
    (NeverCommitted, "is_committed() is True after commit()"),
    (AnyCommitWillDo, "is_committed() finds only the commit of that id"),
])
def test_a_broken_global_committer_fails_naming_the_rule(tmp_path: Path, committer: type[ManifestCommitter], rule: str | None) -> None:
    files = check_writer(AvroWriter, {}, AVRO_SCHEMA, EVENTS, tmp_path)
    publisher = committer(committer.Settings.model_validate({"final_dir": str(tmp_path / "final")}))
    if rule is None:
        check_committer(publisher, files, tmp_path)
        assert json.loads((tmp_path / "final" / "_manifests" / "conformance-commit-1.json").read_text())["dataset"] == "dataset"
        return
    with pytest.raises(AssertionError, match=f"{committer.__name__} breaks the rule '{re.escape(rule)}'"):
        check_committer(publisher, files, tmp_path)
