"""Where tasks run: the executor seam, and the in-process executor used by tests and dry runs."""

from __future__ import annotations

from typing import Protocol

from gobblin_py.runtime.results import WorkUnitResult
from gobblin_py.runtime.task import TaskSpec, run_task


class TaskExecutor(Protocol):
    """Runs tasks and returns every WorkUnit's result; `start` may warm up in the background."""

    def start(self) -> None: ...

    def run(self, tasks: list[TaskSpec]) -> list[WorkUnitResult]: ...

    def stop(self) -> None: ...


class InProcessExecutor:
    """Runs tasks one after another in this process (no Spark)."""

    def start(self) -> None:
        pass

    def run(self, tasks: list[TaskSpec]) -> list[WorkUnitResult]:
        return [r for t in tasks for r in run_task(t)]

    def stop(self) -> None:
        pass
