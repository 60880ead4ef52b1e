"""How far a dataset is behind its source: what a Source's `backlog` hook measures (in the api, so a plugin can make
one without importing the runtime); `gobblin_py.operating.lag` measures a whole job with it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class PartitionLag:
    """One part of a dataset: a Kafka partition (`topic-0`), a file directory, a table."""

    name: str
    records: int | None
    seconds: float | None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "records": self.records, "seconds": _finite(self.seconds)}


@dataclass(frozen=True)
class DatasetLag:
    """What of one dataset is not yet committed. `records` counts `unit`s (records, rows, changes, or the watermark
    column's own units); `seconds` is the age of the oldest uncommitted record (None: unknown, or nothing pending);
    `bytes` and `files` where the source knows them; `error` says why it could not be measured (never raised)."""

    dataset: str
    records: int | None = None
    seconds: float | None = None
    bytes: int | None = None
    files: int | None = None
    unit: str = "records"
    partitions: tuple[PartitionLag, ...] = field(default_factory=tuple)
    error: str | None = None

    @property
    def pending(self) -> bool | None:
        """Whether something waits (None: cannot tell)."""
        known = [v for v in (self.records, self.bytes, self.files) if v is not None]
        return any(v > 0 for v in known) if known else None

    def to_json(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "records": self.records, "seconds": _finite(self.seconds), "bytes": self.bytes,
                "files": self.files, "unit": self.unit, "partitions": [p.to_json() for p in self.partitions],
                "error": self.error}


def unmeasured(dataset: str, error: str, unit: str = "records") -> DatasetLag:
    """A dataset whose lag could not be measured, and why."""
    return DatasetLag(dataset, unit=unit, error=error)


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, 3)
