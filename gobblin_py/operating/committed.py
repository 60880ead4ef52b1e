"""A job's committed state as an operator reads it: each dataset's watermarks and last committed state, and, for a
table publisher, what the table itself records of the job's last commit. `state show` prints it; the status page
and its API serve it."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from gobblin_py.api import GlobalCommitter
from gobblin_py.commit.store import CommitStepStore
from gobblin_py.config.model import JobSpec
from gobblin_py.state.store import StateStore


@dataclass
class CommittedState:
    """dataset → {"watermarks", "state", and "table" for a table publisher} (what `state show --json` prints); the
    datasets whose state files are unreadable (their error), those with a pending commit, and warnings (a catalog down)."""

    view: dict[str, dict[str, Any]] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)
    pending: set[str] = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)


def committed_state(job: JobSpec, dataset: str | None = None) -> CommittedState:
    """The committed state of `job` (only `dataset` when given: its name must be checked by the caller against
    `StateStore.dataset_names()`); raises StateStoreError only when the state directory cannot be listed."""
    store = StateStore(job.job.records_root, job.name)
    read_marks, read_states = store.read_watermarks(), store.read_dataset_states()
    marks, states = read_marks.values, read_states.values
    unreadable = {d: str(e) for d, e in {**read_states.errors, **read_marks.errors}.items() if dataset in (None, d)}
    names = [dataset] if dataset is not None else sorted(set(marks) | set(states) | set(unreadable))
    out = CommittedState(unreadable=unreadable)
    out.view = {d: {"watermarks": marks.get(d, {}), "state": states.get(d, {})} for d in names}
    tables, out.pending, out.warnings = _table_marks(job, dataset, names)
    for d, mark in sorted(tables.items()):
        entry = out.view.setdefault(d, {"watermarks": {}, "state": {}})
        entry["table"] = {"table": mark.table, "run_id": mark.run_id, "snapshot_id": mark.snapshot_id, "watermarks": mark.watermarks,
                          "committed_at": _ms_iso(mark.committed_at_ms), "matches_state": all(entry["watermarks"].get(k) == v for k, v in mark.watermarks.items())}
    out.view = dict(sorted(out.view.items()))
    return out


def _table_marks(job: JobSpec, dataset: str | None, names: list[str]) -> tuple[dict[str, Any], set[str], list[str]]:
    """For a job whose publisher is a GlobalCommitter (a table): dataset → what the target records of the job's
    last commit of it (a table's newest snapshot's watermarks), over the datasets with state or a pending commit;
    the datasets with a pending commit; and a warning for each publisher that could not be read."""
    publishers = [b.publisher.create() for b in job.branches if issubclass(b.publisher.cls(), GlobalCommitter)]
    if not publishers:
        return {}, set(), []
    pending = set(CommitStepStore(job.job.records_root).datasets(job.name))
    wanted = [dataset] if dataset is not None else sorted(set(names) | pending)
    found: dict[str, Any] = {}
    warnings = []
    for publisher in publishers:
        try:
            found.update(publisher.committed_watermarks(job.name, wanted))
        except Exception as exc:  # noqa: BLE001 - a catalog down must not hide the state store's view
            warnings.append(f"cannot read what publisher {type(publisher).__name__} committed: {exc}")
    return found, pending, warnings


def _ms_iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="seconds")
