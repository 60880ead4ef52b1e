"""Fault-injecting plugins for tests: a converter that fails its first attempts, a failing writer."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pydantic import Field

from gobblin_py.api import Converter, DataWriter, Delivery, Settings, TaskContext, WriterTarget
from gobblin_py.api.types import Record, Schema


class FlakySettings(Settings):
    fail_attempts: int = Field(default=1, ge=0)
    only_workunit_containing: str = ""


class FlakyConverter(Converter):
    """Passes records through, but raises on the first `fail_attempts` attempts of a task."""

    Settings = FlakySettings

    def open(self, context: TaskContext) -> None:
        s = self.settings
        targeted = s.only_workunit_containing in context.workunit.id
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
