"""Where tasks run: the executor seam, and the in-process executor used by tests and dry runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from gobblin_py.builtin.byte_sizes import shown
from gobblin_py.commit.tasks import CommitTasks
from gobblin_py.runtime.interrupt import raise_if_interrupted
from gobblin_py.runtime.results import WorkUnitResult
from gobblin_py.runtime.task import TaskSpec, run_task


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


class InProcessExecutor:
    """Runs tasks one after another in this process (no Spark): `--in-process`, and runs under `spark.in_driver_below`.
    `cluster`: tasks for commits and recoveries, standing for the executors (e.g. `ThreadTasks(2, master="spark://h:7077")`),
    started when first asked for."""

    def __init__(self, cluster: CommitTasks | None = None) -> None:
        self.cluster = cluster
        self.master = cluster.master if cluster is not None else "in-process"
        self.startup_s = 0.0
        self.started = False

    def start(self) -> None:
        pass

    def run(self, tasks: list[TaskSpec], progress: ProgressCallback | None = None) -> list[WorkUnitResult]:
        out: list[WorkUnitResult] = []
        for i, t in enumerate(tasks):
            raise_if_interrupted()  # a scheduler cancelling its runs at shutdown: between tasks
            if progress:
                progress(i, 1, 0, len(tasks))
            out.extend(run_task(t))
        if progress:
            progress(len(tasks), 0, 0, len(tasks))
        return out

    def commit_tasks(self, start: bool = False) -> CommitTasks | None:
        self.started = self.started or (start and self.cluster is not None)
        return self.cluster if self.started else None

    def stop(self, exiting: bool = False) -> None:
        pass
