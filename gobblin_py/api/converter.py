"""Converter: transforms the schema once, then each record into zero, one or many records."""

from __future__ import annotations

import abc
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gobblin_py.api.context import TaskContext
from gobblin_py.api.plugin import Plugin
from gobblin_py.api.types import Record, Schema, SchemaKind


@dataclass
class TaskCounter:
    """Something a plugin counted over one task (summed over the run by the runner), with a few examples."""

    count: int = 0
    examples: list[str] = field(default_factory=list)

    MAX_EXAMPLES: typing.ClassVar[int] = 20

    def add(self, n: int = 1, example: str | None = None) -> None:
        self.count += n
        if example is not None and example not in self.examples and len(self.examples) < self.MAX_EXAMPLES:
            self.examples.append(example)

    def merge(self, other: TaskCounter) -> TaskCounter:
        """The sum of both counts, with the examples of both (up to MAX_EXAMPLES)."""
        out = TaskCounter(self.count, list(self.examples))
        for example in other.examples:
            out.add(0, example)
        out.count += other.count
        return out

    def to_json(self) -> dict[str, typing.Any]:
        return {"count": self.count, "examples": list(self.examples)}

    @staticmethod
    def sum(counters: typing.Iterable[typing.Mapping[str, TaskCounter]]) -> dict[str, TaskCounter]:
        """Several plugins' (or tasks') counters summed by name: the one place counters are merged."""
        out: dict[str, TaskCounter] = {}
        for named in counters:
            for name, counter in named.items():
                out[name] = out.get(name, TaskCounter()).merge(counter)
        return out


class Converter(Plugin, abc.ABC):
    """One link of a converter chain; raise `RecordError` (gobblin_py.api) for a record that cannot convert.

    Any other exception `convert_record` raises for one record (ValueError, KeyError …) makes that
    record a bad record too; OSError, MemoryError and TaskError fail the task (see `RecordError`).
    """

    @classmethod
    def schema_kind(cls, settings: typing.Any) -> SchemaKind:
        """Hook: the schema `convert_schema` gives (AVRO, or KEPT: the one it is given), so validation can tell
        whether a writer needing an Avro schema gets one. Default: cannot tell."""
        return SchemaKind.UNKNOWN

    def open(self, context: TaskContext) -> None:
        """Hook: called once per task before `convert_schema`."""

    def counters(self) -> Mapping[str, TaskCounter]:
        """Hook: what this converter counted in its task, by name (e.g. `unknown_fields_dropped`); reported
        per task and summed per dataset and run."""
        return {}

    @abc.abstractmethod
    def convert_schema(self, schema: Schema) -> Schema:
        """The output schema, given the previous link's output schema."""

    @abc.abstractmethod
    def convert_record(self, record: Record) -> Iterable[Record]:
        """The records `record` becomes: an empty iterable drops it (1:0), several fan out (1:N)."""


class OneToOneConverter(Converter):
    """A converter that turns each record into exactly one record: implement `map_record`.

    The task calls `map_record` directly, with no per-record iterable (the cheapest path).
    """

    @abc.abstractmethod
    def map_record(self, record: Record) -> Record:
        """The converted record; raise `RecordError` for one that cannot convert."""

    @typing.final
    def convert_record(self, record: Record) -> Iterable[Record]:
        return (self.map_record(record),)
