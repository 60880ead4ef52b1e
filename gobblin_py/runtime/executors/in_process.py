"""The in-process executor: tasks one after another in the driver, no Spark (`--in-process`, tests, small runs)."""

from __future__ import annotations

from gobblin_py.commit.tasks import CommitTasks
from gobblin_py.runtime.executors.base import ProgressCallback
from gobblin_py.runtime.executors.interrupt import raise_if_interrupted
from gobblin_py.runtime.task.pipeline import TaskSpec, run_task
from gobblin_py.runtime.task.results import TasksCancelled, WorkUnitResult


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
        try:
            for i, t in enumerate(tasks):
                raise_if_interrupted()  # a scheduler cancelling its runs at shutdown: between tasks
                if progress:
                    progress(i, 1, 0, len(tasks))
                out.extend(run_task(t))
        except KeyboardInterrupt:
            raise TasksCancelled(out) from None
        if progress:
            progress(len(tasks), 0, 0, len(tasks))
        return out

    def commit_tasks(self, start: bool = False) -> CommitTasks | None:
        self.started = self.started or (start and self.cluster is not None)
        return self.cluster if self.started else None

    def stop(self, exiting: bool = False) -> None:
        pass
