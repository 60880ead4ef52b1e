"""How far each dataset of a job is behind its source (placeholder: replaced at merge by the real measurement)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from gobblin_py.config.model import JobSpec


@dataclass(frozen=True)
class PartitionLag:
    name: str
    records: int | None
    seconds: float | None


@dataclass(frozen=True)
class DatasetLag:
    dataset: str
    records: int | None
    seconds: float | None
    bytes: int | None
    files: int | None
    unit: str
    partitions: tuple[PartitionLag, ...]
    error: str | None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "partitions": [asdict(p) for p in self.partitions]}


def measure_lag(job: JobSpec, timeout_s: float = 10.0) -> list[DatasetLag]:
    """Each dataset of `job` with its lag; this placeholder measures nothing."""
    from gobblin_py.state.store import StateStore

    datasets = StateStore(job.job.work_dir, job.name).dataset_names()
    return [DatasetLag(dataset=d, records=None, seconds=None, bytes=None, files=None, unit="records", partitions=(),
                       error="lag not measured") for d in datasets]
