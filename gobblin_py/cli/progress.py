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
        self.detail = logging.INFO  # a continuous run: DEBUG, its checkpoint line says it

    def continuous_started(self) -> None:
        self.detail = logging.DEBUG

    def tasks_progress(self, done: int, running: int, failed: int, total: int) -> None:
        now = time.monotonic()
        if done == total or now - self._last >= self.every_s:
            self._last = now
            log.log(self.detail, "tasks: %d/%d done, %d running, %d failed", done, total, running, failed)

    def task_finished(self, result: Any) -> None:
        if result.attempts > 1:
            log.info("task %s needed %d attempts", result.workunit.id, result.attempts)

    def dataset_committed(self, summary: Any) -> None:
        ok = summary.status.value.startswith("committed")
        log.log(self.detail if ok else logging.WARNING, "dataset %s: %s, %d records written, %d files", summary.dataset,
                summary.status.value, summary.records_written, summary.files_published)

    def checkpoint_finished(self, result: Any, row: dict[str, Any]) -> None:
        idle = row["status"] == "succeeded" and not row["records_written"] and not row["lag"]
        log.log(logging.DEBUG if idle else logging.INFO, "%s", checkpoint_line(row))


class RichProgress:
    """In a terminal: a live bar of tasks (done / running / failed) and a line per committed dataset."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        from gobblin_py.cli.output import err

        self.console = err  # the console the log prints through too: log lines go above the bar, never into it
        self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[detail]}"), TimeElapsedColumn(), console=self.console, transient=True)
        self.task: Any = None
        self.continuous = False  # one line per checkpoint: no bar, no line per dataset

    def continuous_started(self) -> None:
        self.continuous = True

    def workunits_created(self, workunits: int, tasks: int, datasets: list[str]) -> None:
        if tasks and not self.continuous:  # the runner's log line says what was planned; where the tasks run, the executor's
            self.progress.start()
            self.task = self.progress.add_task("tasks", total=tasks, detail="waiting for the first task")

    def tasks_progress(self, done: int, running: int, failed: int, total: int) -> None:
        if self.task is not None:
            self.progress.update(self.task, completed=done, detail=f"{running} running, {failed} failed")

    def dataset_committed(self, summary: Any) -> None:
        self.stop()
        if self.continuous and summary.status.value.startswith("committed"):
            return
        self.console.print(f"  {summary.dataset}: {summary.status.value} ({summary.records_written} records, "
                           f"{summary.files_published} files)")

    def checkpoint_finished(self, result: Any, row: dict[str, Any]) -> None:
        self.stop()
        self.console.print(checkpoint_line(row))

    def job_finished(self, result: Any) -> None:
        self.stop()

    def stop(self) -> None:
        if self.task is not None:
            self.progress.stop()
            self.task = None


def checkpoint_line(row: dict[str, Any]) -> str:
    """`checkpoint 12 committed at 10:15:02: 20000 records in 1.2s (16667/s), lag clicks 20000 events 180`."""
    rate = row["records_written"] / row["duration_s"] if row["duration_s"] else 0
    lag = " ".join(f"{d} {n}" for d, n in sorted(row["lag"].items())) or "none"
    when = f"committed at {row['committed_at'][11:19]}" if row["committed_at"] else f"failed: {row['error']}"
    return (f"checkpoint {row['checkpoint']} {when}: {row['records_written']} records in {row['duration_s']:.1f}s "
            f"({rate:.0f}/s), lag at its start: {lag}")


def progress_for(quiet: bool) -> list[Any]:
    """The observer that suits where the output goes: nothing, a live display, or log lines."""
    if quiet:
        return []
    return [RichProgress()] if sys.stderr.isatty() else [LogProgress()]
