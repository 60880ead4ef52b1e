"""What a task hands to the plugins it runs: who it is, and where bad records go."""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from gobblin_py.api.workunit import WorkUnit


class SourceMessage(NamedTuple):
    """A message as a source read it, before decoding: what a dead-letter topic receives for a record the extractor
    rejects (its original key, value and headers, and where it came from)."""

    topic: str
    partition: int
    offset: int
    timestamp: int | None  # ms since the epoch; None when the message has none
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]]

    def to_json(self) -> dict[str, Any]:
        """As the error file keeps it (under `message`): its bytes in base64, to come back unchanged."""
        return {"topic": self.topic, "partition": self.partition, "offset": self.offset, "timestamp": self.timestamp,
                "key": _b64(self.key), "value": _b64(self.value), "headers": [[k, _b64(v)] for k, v in self.headers]}

    @classmethod
    def from_json(cls, m: dict[str, Any]) -> SourceMessage:
        """The message `to_json` gave."""
        return cls(m["topic"], int(m["partition"]), int(m["offset"]), m.get("timestamp"), _bytes(m.get("key")),
                   _bytes(m.get("value")), [(k, _bytes(v)) for k, v in m.get("headers") or []])


def _b64(value: bytes | None) -> str | None:
    return None if value is None else base64.b64encode(value).decode("ascii")


def _bytes(value: str | None) -> bytes | None:
    return None if value is None else base64.b64decode(value)


class TaskResources:
    """What the WorkUnits of one task (a MultiWorkUnit's, run one after another) may share: a connection an extractor
    opened and left clean is given back under a key, and the next extractor of the task borrows it instead of opening
    its own. The task closes whatever is left when it ends; a resource is never shared by two extractors at once."""

    def __init__(self) -> None:
        self._idle: dict[str, list[tuple[Any, Callable[[Any], None]]]] = {}

    def borrow(self, key: str) -> Any | None:
        """A resource given back under `key`, now the caller's (None: none; open one and give it back when done)."""
        idle = self._idle.get(key)
        return idle.pop()[0] if idle else None

    def give_back(self, key: str, resource: Any, close: Callable[[Any], None]) -> None:
        """Keep `resource` for the task's next borrower of `key`; `close` closes it when the task ends. Give back only
        what is as a fresh one would be (no transaction open, its session settings as opened)."""
        self._idle.setdefault(key, []).append((resource, close))

    def close(self) -> None:
        """Close every resource given back (a failure to close one does not stop the others)."""
        idle, self._idle = self._idle, {}
        for resource, close in (r for rs in idle.values() for r in rs):
            try:
                close(resource)
            except Exception:  # noqa: BLE001 - the task's outcome is its WorkUnits'; a connection that will not close is dropped
                pass


@dataclass
class TaskContext:
    """The running task: job, run, work unit, attempt and its private staging directory.

    `reject(record, reason, location, original=None)` routes a record that cannot be read or converted
    to the task's bad-record handling (error file, task failure or count) instead of dropping it; `original`, the
    message as the source read it, is kept with it for a dead-letter topic.
    """

    job_name: str
    run_id: str
    workunit: WorkUnit
    attempt: int
    staging_dir: Path
    reject: Callable[..., None]  # (record, reason, location, original: SourceMessage | None = None)
    resources: TaskResources | None = None  # what the task's extractors share (None: nothing, open your own)
