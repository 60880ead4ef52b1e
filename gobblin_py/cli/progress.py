"""The run's progress for a person: a live rich display in a terminal, plain log lines otherwise."""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

log = logging.getLogger("gobblin_py.progress")


class LogProgress:
    """For cron, CI and pipes: one log line per change of the task counts (at most every 5 s) and per dataset."""

    def __init__(self, every_s: float = 5.0) -> None:
        self.every_s = every_s
        self._last = 0.0

    def tasks_progress(self, done: int, running: int, failed: int, total: int) -> None:
        now = time.monotonic()
        if done == total or now - self._last >= self.every_s:
            self._last = now
            log.info("tasks: %d/%d done, %d running, %d failed", done, total, running, failed)

    def task_finished(self, result: Any) -> None:
        if result.attempts > 1:
            log.info("task %s needed %d attempts", result.workunit.id, result.attempts)

    def dataset_committed(self, summary: Any) -> None:
        log.info("dataset %s: %s, %d records written, %d files", summary.dataset, summary.status.value,
                 summary.records_written, summary.files_published)


class RichProgress:
    """In a terminal: a live bar of tasks (done / running / failed) and a line per committed dataset."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.console = Console(stderr=True)
        self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[detail]}"), TimeElapsedColumn(), console=self.console, transient=True)
        self.task: Any = None

    def workunits_created(self, workunits: int, tasks: int, datasets: list[str]) -> None:
        self.console.print(f"planned {workunits} work units in {tasks} tasks over {len(datasets)} datasets")
        if tasks:
            self.progress.start()
            self.task = self.progress.add_task("tasks", total=tasks, detail="starting the executors…")  # Spark takes seconds

    def tasks_progress(self, done: int, running: int, failed: int, total: int) -> None:
        if self.task is not None:
            self.progress.update(self.task, completed=done, detail=f"{running} running, {failed} failed")

    def dataset_committed(self, summary: Any) -> None:
        self.stop()
        self.console.print(f"  {summary.dataset}: {summary.status.value} ({summary.records_written} records, "
                           f"{summary.files_published} files)")

    def job_finished(self, result: Any) -> None:
        self.stop()

    def stop(self) -> None:
        if self.task is not None:
            self.progress.stop()
            self.task = None


def progress_for(quiet: bool) -> list[Any]:
    """The observer that suits where the output goes: nothing, a live display, or log lines."""
    if quiet:
        return []
    return [RichProgress()] if sys.stderr.isatty() else [LogProgress()]
