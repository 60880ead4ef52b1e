"""Where tasks run: the executor seam every executor implements, and the rule that keeps a small run in the driver."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from gobblin_py.units import shown
from gobblin_py.commit.tasks import CommitTasks
from gobblin_py.runtime.task.results import WorkUnitResult
from gobblin_py.runtime.task.pipeline import TaskSpec


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


def small_plan_bytes(estimates: Sequence[float | None], limit: int | None) -> float | None:
    """The tasks' estimated bytes when every task has one and together they stay under `limit` (no limit: None).
    A run that small takes less time in the driver, one task after another, than Spark takes to start."""
    if limit is None or not estimates or any(e is None for e in estimates):
        return None
    total = sum(e or 0.0 for e in estimates)
    return total if total < limit else None


def in_driver_why(total: float, limit: int) -> str:
    """Why a run's tasks stay in the driver, as the run's log and `gobblin-py plan` say it."""
    return f"about {shown(total)}, under spark.in_driver_below ({shown(limit)})"
