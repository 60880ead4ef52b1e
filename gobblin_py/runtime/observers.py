"""What a run tells the outside while it goes: the seam for the event log and the progress display."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from gobblin_py.runtime.job_result import DatasetSummary, JobResult
    from gobblin_py.runtime.task.results import WorkUnitResult


class RunObserver(Protocol):
    """Callbacks of one run, in this order; every method is optional to act on."""

    def job_started(self, job: str, run_id: str) -> None: ...

    def workunits_created(self, workunits: int, tasks: int, datasets: list[str]) -> None: ...

    def tasks_progress(self, done: int, running: int, failed: int, total: int) -> None: ...

    def task_finished(self, result: WorkUnitResult) -> None: ...

    def dataset_committed(self, summary: DatasetSummary) -> None: ...

    def continuous_started(self) -> None:
        """The run is continuous: one line per checkpoint (`checkpoint_finished`); the rest of each is detail."""

    def checkpoint_finished(self, result: JobResult, row: dict[str, Any]) -> None:
        """A continuous run's checkpoint ended (`row`: what history keeps of it); the run goes on."""

    def job_finished(self, result: JobResult) -> None: ...


class Observers:
    """Fans each callback out to several observers; an observer that fails never fails the run."""

    def __init__(self, observers: list[Any]) -> None:
        self.observers = observers

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any) -> None:
            for obs in self.observers:
                method = getattr(obs, name, None)
                if method is not None:
                    try:
                        method(*args)
                    except Exception:  # noqa: BLE001 - reporting must not break ingestion
                        import logging

                        logging.getLogger(__name__).exception("run observer %s.%s failed", type(obs).__name__, name)
        return call
