"""Where tasks run: the executor seam every executor implements, and the rule that keeps a small run in the driver."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from gobblin_py.commit.tasks import CommitTasks
from gobblin_py.runtime.task.results import WorkUnitResult
from gobblin_py.runtime.task.spec import TaskSpec
from gobblin_py.units import shown

ProgressCallback = Callable[[int, int, int, int], None]
"""(tasks done, running, failed, total), called as tasks progress."""


class TaskExecutor(Protocol):
    """Runs tasks and returns every WorkUnit's result; `start` may warm up in the background.

    What the publish path needs of it is declared here too: where commits and recoveries of many datasets
    can run as tasks (`commit_tasks`), and how long the driver waited for the executors to come up."""

    master: str
    """Where tasks run: a Spark master URL, or `in-process`."""

    startup_s: float
    """Seconds the driver has waited so far for the executors to start (reported as its own phase)."""

    def start(self) -> None: ...

    def run(self, tasks: list[TaskSpec], progress: ProgressCallback | None = None) -> list[WorkUnitResult]: ...

    def commit_tasks(self, start: bool = False) -> CommitTasks | None:
        """The executors, to run commit and recovery groups on: None when they are not running (and `start` is
        False), when this executor has none, or when they cannot start or see the job's paths (logged)."""
        ...

    def stop(self, exiting: bool = False) -> None:
        """Stop the executors. `exiting`: this process ends next, so an executor may leave its teardown to that
        (Spark's JVM stops its context by itself when its parent exits) rather than wait for it."""
        ...


class SessionSource(Protocol):
    """A SparkSession that outlives one run (the scheduler's warm one, `session.WarmSession`): the session when it is
    up, and the session started on demand with the seconds that took."""

    def running(self) -> Any: ...

    def get(self, job: Any) -> tuple[Any, float]: ...


def local_cores(master: str, cpus: int) -> int:
    """The task slots of a local Spark master (`local` 1, `local[4]` 4, `local[*]` every core of `cpus`); 1 otherwise."""
    found = re.fullmatch(r"local\[(\d+|\*)(?:,\s*\d+)?\]", master.strip())
    if found is None:
        return 1
    return max(1, cpus if found.group(1) == "*" else int(found.group(1)))


def held_bytes(estimate: float | None, native_share: float, slots: int) -> float | None:
    """What of a task's `estimate` weighs against `spark.in_driver_below` when the driver runs tasks on `slots` threads.

    A run of W seconds of work, `native_share` s of it outside Python's lock, takes about max(W·(1−s), W/slots)
    in the driver's threads and F + W/slots on a local Spark of as many slots (F: Spark's start). The limit stands
    for F·slots/(slots−1) of work that all holds the lock; the same comparison for any s weighs the estimate by
    (1 − s − 1/slots)·slots/(slots−1): nothing once s ≥ 1 − 1/slots (the threads are then as fast as Spark)."""
    if estimate is None:
        return None
    if slots <= 1 or native_share <= 0:
        return estimate
    return estimate * max(0.0, 1.0 - native_share - 1.0 / slots) * slots / (slots - 1)


def plan_held_bytes(estimates: Sequence[float | None], shares: Sequence[float], slots: int) -> float | None:
    """What of a plan's estimated work weighs against `spark.in_driver_below`: its tasks' `held_bytes`, less what
    Spark's slots cannot gain while its largest task runs (Spark runs no task faster than one of the driver's
    threads), so a plan of one task, a continuous stream's checkpoint of one table, weighs nothing on a local master
    of several slots and never starts Spark mid-stream. None when a task has no estimate.

    On `slots` slots Spark takes F + max(W/slots, largest) for W in all, the threads about max(Σ held share of each
    task's work, W/slots, largest): the held bytes Spark's idle slots leave, (largest − W/slots)·slots/(slots−1) at
    the limit's scale, come off."""
    held = [held_bytes(e, s, slots) for e, s in zip(estimates, shares, strict=True)]
    if not held or any(h is None for h in held):
        return None
    total = sum(h or 0.0 for h in held)
    if slots <= 1:
        return total
    work = [e or 0.0 for e in estimates]
    idle = max(0.0, max(work) - sum(work) / slots) * slots / (slots - 1)
    return max(0.0, total - idle)


def small_plan_bytes(estimates: Sequence[float | None], limit: int | None) -> float | None:
    """The tasks' estimated bytes when every task has one and together they stay under `limit` (no limit: None).
    A run that small takes less time in the driver than Spark takes to start; a run's tasks are weighed first by
    what of their work holds Python's lock and what Spark's slots could gain on them (`plan_held_bytes`)."""
    if limit is None or not estimates or any(e is None for e in estimates):
        return None
    total = sum(e or 0.0 for e in estimates)
    return total if total < limit else None


def in_driver_why(held: float, limit: int, total: float | None = None) -> str:
    """Why a run's tasks stay in the driver, as the run's log and `gobblin-py plan` say it: of the `total` estimated
    bytes, `held` weigh (see `held_bytes`)."""
    if total is None or total - held < 1:
        return f"about {shown(held)}, under spark.in_driver_below ({shown(limit)})"
    return (f"about {shown(total)}, read natively or in tasks too few for Spark's slots, so that about {shown(held)} "
            f"count against spark.in_driver_below ({shown(limit)})")
