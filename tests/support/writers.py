"""Driving a DataWriter as a task does, for writer tests."""

from __future__ import annotations

from typing import Any

from gobblin_py.api import OutputFile, WriterTarget
from gobblin_py.errors import RecordError
from gobblin_py.runtime.task.committables import commit_writer


def write_all(writer: Any, schema: Any, records: list[dict[str, Any]], target: WriterTarget) -> tuple[list[OutputFile], list[RecordError]]:
    """Write every record (keeping the RecordErrors of those refused), then close and commit as the framework does."""
    writer.open(schema, target)
    refused = []
    for record in records:
        try:
            writer.write(record)
        except RecordError as exc:
            refused.append(exc)
    return commit_writer(writer, target), refused
