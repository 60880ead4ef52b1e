"""What a task sends back to the driver: per WorkUnit, its status, committables and metrics."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from gobblin_py.api import OutputFile, TaskCounter, WorkUnit
from gobblin_py.api.types import WatermarkValue


class TaskStatus(str, enum.Enum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"  # the run was interrupted before the task ended (or before its result reached the driver)


@dataclass
class BranchMetrics:
    records_in: int = 0
    records_written: int = 0
    bytes_written: int = 0
    files: int = 0


@dataclass
class WorkUnitResult:
    """One WorkUnit's outcome; only `files` listed here are ever published."""

    workunit: WorkUnit
    status: TaskStatus
    attempts: int
    error: str | None = None
    files: list[OutputFile] = field(default_factory=list)
    actual_high_watermark: WatermarkValue = None
    records_extracted: int = 0
    records_columnar: int = 0  # of those, how many took the columnar path (api.batches) rather than one by one
    rejected: dict[str, int] = field(default_factory=dict)
    branches: dict[str, BranchMetrics] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    attempt_dir: str = ""
    counters: dict[str, TaskCounter] = field(default_factory=dict)  # what plugins counted (unknown_fields_dropped …)

    @property
    def watermarks(self) -> dict[str, WatermarkValue]:
        """Each watermark key this unit read and the watermark it reached (several for a packed unit)."""
        return self.workunit.reached(self.actual_high_watermark)

    @property
    def records_written(self) -> int:
        return sum(b.records_written for b in self.branches.values())

    @property
    def records_rejected(self) -> int:
        return sum(self.rejected.values())

    def to_json(self) -> dict:
        return {
            "workunit": self.workunit.id, "dataset": self.workunit.dataset,
            "watermark_key": self.workunit.watermark_key,
            "low_watermark": self.workunit.low_watermark,
            "expected_high_watermark": self.workunit.expected_high_watermark,
            "actual_high_watermark": self.actual_high_watermark,
            **({"packed_keys": len(self.workunit.packed_keys)} if self.workunit.packed_keys else {}),
            "status": self.status.value, "attempts": self.attempts, "error": self.error,
            "records_extracted": self.records_extracted, "records_columnar": self.records_columnar,
            "records_written": self.records_written,
            "rejected": self.rejected, "warnings": self.warnings, "duration_s": round(self.duration_s, 3),
            "branches": {k: vars(v) for k, v in self.branches.items()},
            "files": [f.rel_path for f in self.files],
            "counters": {name: c.to_json() for name, c in self.counters.items()},
        }


class TasksCancelled(KeyboardInterrupt):
    """Ctrl-C during the tasks, with the results of those that had finished (the runner adds the others as
    CANCELLED), so the run's record lists every task as it really ended."""

    def __init__(self, results: list[WorkUnitResult]) -> None:
        super().__init__()
        self.results = results
