"""Fault-injecting plugins for tests: a converter that fails its first attempts, plugins that fail on one
record (converter, row policy, fork), a writer of weaker delivery."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from gobblin_py.api import (
    Converter,
    DataWriter,
    Delivery,
    ForkOperator,
    OneToOneConverter,
    RowPolicy,
    Settings,
    TaskContext,
    WriterTarget,
)
from gobblin_py.api.types import Record, Schema
from gobblin_py.errors import ConfigError, RecordError


class FlakySettings(Settings):
    fail_attempts: int = Field(default=1, ge=0)
    only_workunit_containing: str = ""
    only_workunit_matching: str = Field(default="", description="a regular expression the work unit's id must match "
                                        "(re.search) besides holding `only_workunit_containing`")


class FlakyConverter(Converter):
    """Passes records through, but raises on the first `fail_attempts` attempts of a task."""

    Settings = FlakySettings

    def open(self, context: TaskContext) -> None:
        s = self.settings
        targeted = s.only_workunit_containing in context.workunit.id and re.search(s.only_workunit_matching,
                                                                                   context.workunit.id) is not None
        self.fail = targeted and context.attempt <= s.fail_attempts
        self.attempt = context.attempt

    def convert_schema(self, schema: Schema) -> Schema:
        return schema

    def convert_record(self, record: Record) -> Iterable[Record]:
        if self.fail:
            raise OSError(f"injected failure on attempt {self.attempt}")
        return (record,)


class AtLeastOnceWriter(DataWriter):
    """A writer that declares only at-least-once delivery (for the validation test)."""

    guarantee = Delivery.AT_LEAST_ONCE

    def open(self, schema: Schema, target: WriterTarget) -> None:
        self.path = target.staging_dir / target.rel_dir / f"{target.file_stem}.txt"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.f = open(self.path, "w")
        self.n = 0

    def write(self, record: Record) -> None:
        self.f.write(f"{record}\n")
        self.n += 1

    def close(self) -> list[tuple[Path, int]]:
        self.f.close()
        return [(self.path, self.n)]


class SlowSettings(Settings):
    seconds_per_record: float = Field(default=0.001, ge=0)


class SlowConverter(Converter):
    """Passes records through after sleeping: makes tasks long enough to be interrupted in tests."""

    Settings = SlowSettings

    def convert_schema(self, schema: Schema) -> Schema:
        return schema

    def convert_record(self, record: Record) -> Iterable[Record]:
        import time

        time.sleep(self.settings.seconds_per_record)
        return (record,)


Raised = Literal["ValueError", "KeyError", "TypeError", "RecordError", "ConfigError", "OSError", "MemoryError"]
_RAISED: dict[str, type[BaseException]] = {
    "ValueError": ValueError, "KeyError": KeyError, "TypeError": TypeError, "RecordError": RecordError,
    "ConfigError": ConfigError, "OSError": OSError, "MemoryError": MemoryError,
}


class OnRecordSettings(Settings):
    field: str
    equals: Any
    raise_: Raised | None = Field(default=None, alias="raise", description="the exception raised for the record")
    set_to: Any = Field(default=None, description="instead of raising, replace the field's value (e.g. one no writer can encode)")

    model_config = Settings.model_config | {"populate_by_name": True}


def _fault(settings: OnRecordSettings, record: Record) -> Record:
    """The record unchanged, or the fault `settings` ask for when the record's field equals `equals`."""
    if record.get(settings.field) != settings.equals:
        return record
    if settings.raise_ is not None:
        raise _RAISED[settings.raise_](f"injected {settings.raise_} on {settings.field}={settings.equals!r}")
    return {**record, settings.field: settings.set_to}


class FaultOnRecordConverter(OneToOneConverter):
    """Passes records through; the one whose `field` equals `equals` raises `raise` (or gets `set_to`)."""

    Settings = OnRecordSettings

    def convert_schema(self, schema: Schema) -> Schema:
        return schema

    def map_record(self, record: Record) -> Record:
        return _fault(self.settings, record)


class FaultOnRecordPolicy(RowPolicy):
    """A row policy that passes every record but raises `raise` on the one whose `field` equals `equals`."""

    Settings = OnRecordSettings

    def check(self, record: Record) -> str | None:
        _fault(self.settings, record)
        return None


class FaultOnRecordFork(ForkOperator):
    """Every branch gets every record, but routing the one whose `field` equals `equals` raises `raise`."""

    Settings = OnRecordSettings

    def open(self, branch_names: Sequence[str], schema: Schema) -> None:
        super().open(branch_names, schema)
        self._all = tuple(range(len(branch_names)))

    def route(self, record: Record) -> Sequence[int]:
        _fault(self.settings, record)
        return self._all
