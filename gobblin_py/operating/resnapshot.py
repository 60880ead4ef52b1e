"""Marks a dataset's committed state for its source to act on at the next plan (`gobblin-py snapshot` asks a
postgres_cdc table for a fresh chunked snapshot this way): under the job's lock, never while a commit is pending for
the dataset, and only for a dataset that has a committed position."""

from __future__ import annotations

from typing import Any

from gobblin_py.config.model import JobSpec
from gobblin_py.errors import ConfigError


def mark_kept(job: JobSpec, dataset: str, name: str, value: Any, run_id: str, position_key: str) -> None:
    """Sets `name` in what the dataset's state keeps for its source (`SourceState.kept`). ConfigError naming the
    dataset when a commit is pending for it or it has no committed `position_key` watermark."""
    from gobblin_py.commit.guard import JobGuard
    from gobblin_py.commit.store import CommitStepStore
    from gobblin_py.state.events import EventLog
    from gobblin_py.state.store import DatasetStateFile, StateStore, WatermarkFile

    store = StateStore(job.job.records_root, job.name)
    with JobGuard(job, run_id):
        if CommitStepStore(job.job.records_root).exists(job.name, dataset):
            raise ConfigError(f"a commit sequence is pending for {dataset}: finish it first with `gobblin-py recover "
                              f"JOB.yaml --dataset {dataset}`")
        if WatermarkFile(store.dir, dataset).read().get(position_key) is None:
            known = ", ".join(store.dataset_names()) or "none"
            raise ConfigError(f"{dataset} has no committed position in job {job.name} (known: {known}); one never "
                              "committed is read whole by its first run anyway")
        file = DatasetStateFile(store.dir, dataset)
        state = file.read() or {}
        kept = state.get("source") if isinstance(state.get("source"), dict) else {}
        file.write({**state, "source": {**kept, name: value}})
        EventLog(job.job.records_root, job.name).emit("StateMarked", dataset=dataset, entry=name)
