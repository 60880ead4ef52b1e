"""Committing and recovering many datasets side by side (the scalability section of Gobblin's exactly-once
design): each task — a Spark task on the executors, or a driver thread (`commit.tasks`) — writes and executes,
or loads and replays, the sequences of a group of datasets against the shared store; the driver only coordinates."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from gobblin_py.commit.protocol import commit_batch, publish_without_log
from gobblin_py.commit.recovery import DatasetRecovery, Outcome, RecoveryReport, pending, recover_dataset
from gobblin_py.commit.sequence import CommitSequence
from gobblin_py.commit.store import CommitStepStore
from gobblin_py.commit.tasks import CommitTasks
from gobblin_py.errors import CommitError, spark_failure
from gobblin_py.fs import configure as configure_filesystems

log = logging.getLogger(__name__)

CLUSTER_THRESHOLD = 64
"""Datasets from which a cluster commits and recovers on the executors unless the job says otherwise."""

T = TypeVar("T")
R = TypeVar("R")


def use_executors(datasets: int, configured: int | None, master: str) -> bool:
    """Whether `datasets` commits (or recoveries) run as Spark tasks, per `job.commit_on_executors_from`.

    Unset: from 64 datasets on a cluster, never in local mode (one machine: driver threads are
    faster, scripts/bench_commit.py). 0: never.
    """
    threshold = configured if configured is not None else (0 if master.startswith("local") else CLUSTER_THRESHOLD)
    return threshold > 0 and datasets >= threshold


def default_groups(tasks: CommitTasks) -> int:
    """How many Spark tasks share the datasets: two per executor core, so a slow group does not hold the rest."""
    return max(1, tasks.slots) * 2


@dataclass(frozen=True)
class _Group:
    """What one executor task needs to reach the shared store (picklable: its directory, the step classes it may
    load, where steps may write) and the job's filesystems (`job.filesystems` options)."""

    shared: CommitStepStore
    filesystems: dict[str, dict[str, Any]]

    def store(self) -> CommitStepStore:
        configure_filesystems(self.filesystems)
        return self.shared


@dataclass(frozen=True)
class CommitGroup(_Group):
    """What one task commits: sequences of several datasets, written to the store by the task (`logged`;
    `at_least_once` runs publish without the log)."""

    sequences: tuple[CommitSequence, ...]
    logged: bool = True


@dataclass(frozen=True)
class RecoveryGroup(_Group):
    """What one executor task recovers: pending datasets of one job, whose sequences the task loads itself."""

    job: str
    datasets: tuple[str, ...]
    max_attempts: int
    force: bool
    backoff: float = 0.0


def commit_group(group: CommitGroup) -> list[tuple[str, str | None]]:
    """Log and execute the sequences of the group (their records written, and removed, in one batch:
    `protocol.commit_batch`); (dataset, error or None) for each."""
    store = group.store()
    if group.logged:
        return commit_batch(store, list(group.sequences))
    out: list[tuple[str, str | None]] = []
    for seq in group.sequences:
        try:
            publish_without_log(store.confinement, seq)
            out.append((seq.dataset, None))
        except (CommitError, OSError) as exc:
            out.append((seq.dataset, str(exc)))
    return out


def recover_group(group: RecoveryGroup) -> list[DatasetRecovery]:
    """Replay the pending sequence of each dataset of the group, as `recovery.recover` does in a thread."""
    store = group.store()
    return [recover_dataset(store, group.job, d, group.max_attempts, group.force, group.backoff) for d in group.datasets]


def _on_tasks(tasks: CommitTasks, items: Sequence[T], groups: int, make: Callable[[tuple[T, ...]], _Group],
              run: Callable[[Any], Iterable[R]]) -> list[R]:
    """Deal `items` round-robin into at most `groups` tasks, run `run` on each, collect every result."""
    groups = max(1, min(groups, len(items)))
    parts = [make(part) for part in (tuple(items[i::groups]) for i in range(groups)) if part]
    return tasks.flat_map(run, parts) if parts else []


def commit_many(tasks: CommitTasks, store: CommitStepStore, sequences: list[CommitSequence], groups: int,
                filesystems: dict[str, dict[str, Any]] | None = None, logged: bool = True) -> dict[str, str | None]:
    """Spread the sequences over `groups` tasks; the outcome of every dataset. `logged=False`: publish without
    the log (`at_least_once`).

    If the tasks are lost (a failed Spark job), each dataset's outcome is read back: committed when its state
    step holds, else an error (its record, if written, stays pending for the next run's recovery).
    """
    def make(part: tuple[CommitSequence, ...]) -> CommitGroup:
        return CommitGroup(store, filesystems or {}, part, logged)

    try:
        return dict(_on_tasks(tasks, sequences, groups, make, commit_group))
    except Exception as exc:  # noqa: BLE001 - Py4J's error for a failed Spark job
        reason = spark_failure(exc)
        log.error("commit on the %s failed: %s", _where(tasks), reason)
        return {seq.dataset: None if not store.exists(seq.job, seq.dataset) and seq.steps[-1].verify()
                else f"commit on the {_where(tasks)} failed ({reason}); a logged sequence is recovered by the next run"
                for seq in sequences}


def _where(tasks: CommitTasks) -> str:
    return "driver threads" if tasks.master == "threads" else "executors"


def recover_many(tasks: CommitTasks, store: CommitStepStore, job: str, max_attempts: int,
                 datasets: list[str] | None = None, force: bool = False, groups: int = 4,
                 filesystems: dict[str, dict[str, Any]] | None = None, backoff: float = 0.0) -> RecoveryReport:
    """`recovery.recover` as tasks: the driver lists the pending datasets and spreads them over `groups`
    tasks, each loading and replaying its datasets' sequences (those whose `backoff` has passed, see
    `recovery.recover_dataset`); the report lists them in the same order.

    If the Spark job fails (a worker dies, an executor is lost for good), a dataset whose record is gone was
    recovered; every other one is FAILED without an attempt counted, and the next run replays it.
    """
    todo = pending(store, job, datasets)
    try:
        results = _on_tasks(tasks, todo, groups,
                            lambda part: RecoveryGroup(store, filesystems or {}, job, part, max_attempts, force, backoff),
                            recover_group)
    except Exception as exc:  # noqa: BLE001 - Py4J's error for a failed Spark job; the records say what is done
        reason = spark_failure(exc)
        log.error("recovery on the %s failed: %s", _where(tasks), reason)
        results = [DatasetRecovery(d, Outcome.FAILED, f"recovery on the {_where(tasks)} failed ({reason}); the next run replays it")
                   if store.exists(job, d) else DatasetRecovery(d, Outcome.RECOVERED) for d in todo]
    by_dataset = {r.dataset: r for r in results}
    return RecoveryReport([by_dataset[d] for d in todo])
