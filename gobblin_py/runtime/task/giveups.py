"""One retry budget per run for one unreachable service: the services a run's tasks gave up on.

When a task's attempts at a service (a Kafka broker, named by `UnreachableError.endpoint`) are spent, it
writes a marker under the run's own directory, `<work_dir>/staging/<job>/<run>/.gave-up/`; every task of
the run (on any executor sharing the work directory) looks there before each attempt and fails at once,
without spending its own retries, when a service it needs is marked. The runner deletes the run's staging
directory at the end of the run, so the next run tries the service afresh.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path

import orjson

from gobblin_py.durable import atomic_replace, fsync_dir
from gobblin_py.errors import UnreachableError

MARKERS = ".gave-up"
"""The markers' directory under the run's staging directory (a work unit id never starts with a dot)."""


@dataclass(frozen=True)
class GaveUp:
    """A task of this run gave up on `endpoint` after `attempts` attempts; `cause` is its last error."""

    endpoint: str
    workunit: str
    attempts: int
    cause: str
    remedy: str

    def message(self, attempted: int) -> str:
        """The error of a task that did not try (again) because a task of its run gave up on the service."""
        again = f" again after {attempted} failed attempt{'s' if attempted != 1 else ''}" if attempted else ""
        return f"{self.endpoint} unreachable (task {self.workunit} gave up {self._after()}); not attempted{again}. {self.remedy}"

    def own_message(self) -> str:
        """The error of the task that gave up."""
        return (f"{self.endpoint} unreachable (this task gave up {self._after()}); the other tasks of this run "
                f"that need it are not attempted again. {self.remedy}")

    def _after(self) -> str:
        return f"after {self.attempts} attempt{'s' if self.attempts != 1 else ''}: {self.cause}"


class GiveUps:
    """The markers of one run, in `run_dir` (the run's staging directory, shared by every executor)."""

    def __init__(self, run_dir: Path) -> None:
        self.dir = run_dir / MARKERS

    def _path(self, endpoint: str) -> Path:
        return self.dir / f"{hashlib.sha256(endpoint.encode()).hexdigest()[:32]}.json"

    def give_up(self, exc: UnreachableError, workunit: str, attempts: int) -> GaveUp:
        """Mark `exc.endpoint` given up by `workunit`; the first task to give up is the one every message names."""
        gave_up = GaveUp(exc.endpoint, workunit, attempts, str(exc), exc.remedy)
        path = self._path(exc.endpoint)
        try:
            atomic_replace(path, lambda f: f.write(orjson.dumps(asdict(gave_up))), replace=False)
            fsync_dir(path.parent)
        except FileExistsError:
            return self.find(exc.endpoint) or gave_up
        except OSError:
            pass  # the task fails all the same; the run's other tasks find out for themselves
        return gave_up

    def find(self, endpoint: str) -> GaveUp | None:
        """The marker of `endpoint`, or None (also for a marker that cannot be read: the task then tries itself)."""
        try:
            return GaveUp(**orjson.loads(self._path(endpoint).read_bytes()))
        except (OSError, ValueError, TypeError):
            return None
