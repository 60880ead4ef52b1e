"""Converter: transforms the schema once, then each record into zero, one or many records."""

from __future__ import annotations

import abc
import typing
from collections.abc import Iterable

from gobblin_py.api.context import TaskContext
from gobblin_py.api.plugin import Plugin
from gobblin_py.api.types import Record, Schema


class Converter(Plugin, abc.ABC):
    """One link of a converter chain; raise `RecordError` for a record that cannot convert."""

    def open(self, context: TaskContext) -> None:
        """Hook: called once per task before `convert_schema`."""

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
