"""Where tasks run: the executor seam, and the in-process executor used by tests and dry runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from gobblin_py.runtime.results import WorkUnitResult
from gobblin_py.runtime.task import TaskSpec, run_task


ProgressCallback = Callable[[int, int, int, int], None]
"""(tasks done, running, failed, total), called as tasks progress."""


class TaskExecutor(Protocol):
    """Runs tasks and returns every WorkUnit's result; `start` may warm up in the background."""

    def start(self) -> None: ...

    def run(self, tasks: list[TaskSpec], progress: ProgressCallback | None = None) -> list[WorkUnitResult]: ...

    def stop(self) -> None: ...


class InProcessExecutor:
    """Runs tasks one after another in this process (no Spark)."""

    def start(self) -> None:
        pass

    def run(self, tasks: list[TaskSpec], progress: ProgressCallback | None = None) -> list[WorkUnitResult]:
        out: list[WorkUnitResult] = []
        for i, t in enumerate(tasks):
            if progress:
                progress(i, 1, 0, len(tasks))
            out.extend(run_task(t))
        if progress:
            progress(len(tasks), 0, 0, len(tasks))
        return out

    def stop(self) -> None:
        pass
