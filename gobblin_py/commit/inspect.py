"""What `inspect-commits` and `recover --abandon` show: pending sequences and the state of each step."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gobblin_py.api.commit_step import StepStatus
from gobblin_py.commit.store import CommitStepStore
from gobblin_py.errors import CorruptCommitRecordError


@dataclass
class StepView:
    index: int
    type: str
    status: str
    description: str


@dataclass
class PendingView:
    job: str
    dataset: str
    path: str
    run_id: str | None = None
    created: str | None = None
    attempts: int = 0
    last_error: str | None = None
    last_attempt: str | None = None  # when the last failed attempt ended
    fault: str | None = None         # what failed it: `environment` (retried after its backoff) or `refused`
    corrupt: str | None = None
    steps: list[StepView] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {**{k: v for k, v in vars(self).items() if k != "steps"}, "steps": [vars(s) for s in self.steps]}


def pending(store: CommitStepStore, jobs: list[str], datasets: list[str] | None = None) -> list[PendingView]:
    """Every pending sequence of `jobs` (optionally only `datasets`), steps checked against the filesystem."""
    out: list[PendingView] = []
    for job in jobs:
        for dataset in store.datasets(job):
            if datasets and dataset not in datasets:
                continue
            view = PendingView(job=job, dataset=dataset, path=store.where(job, dataset))
            try:
                seq = store.get(job, dataset)
            except CorruptCommitRecordError as exc:
                view.corrupt = str(exc)
                out.append(view)
                continue
            view.run_id, view.created, view.attempts, view.last_error = seq.run_id, seq.created, seq.attempts, seq.last_error
            view.last_attempt, view.fault = seq.last_attempt, seq.fault.value if seq.fault is not None else None
            for i, step in enumerate(seq.steps):
                description = step.describe()
                try:
                    status = step.status().value
                    if status == StepStatus.CONFLICT.value:  # the source is there, but a foreign file is in the way
                        description = f"{description}: a file this job did not write is at the destination"
                except Exception as exc:  # noqa: BLE001 - an unreadable target is shown, not raised
                    status = f"unknown ({exc})"
                view.steps.append(StepView(i + 1, type(step).type_name, status, description))
            out.append(view)
    return out
