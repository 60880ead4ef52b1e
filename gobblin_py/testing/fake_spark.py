"""A stand-in for a Spark cluster that runs "Spark tasks" in this process: for runner tests about when
the driver hands work to the executors, without starting Spark."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from gobblin_py.runtime.executors import InProcessExecutor


class _Rdd:
    def __init__(self, items: list[Any]) -> None:
        self.items = items

    def flatMap(self, fn: Callable[[Any], Iterable[Any]]) -> _Rdd:  # noqa: N802 - Spark's name
        return _Rdd([out for item in self.items for out in fn(item)])

    def collect(self) -> list[Any]:
        return list(self.items)


class FakeSparkContext:
    def __init__(self, master: str, parallelism: int = 2) -> None:
        self.master, self.defaultParallelism = master, parallelism
        self.jobs: list[int] = []  # the number of tasks of each Spark job run

    def parallelize(self, items: Iterable[Any], slices: int) -> _Rdd:
        self.jobs.append(slices)
        return _Rdd(list(items))


class FakeSession:
    def __init__(self, master: str) -> None:
        self.sparkContext = FakeSparkContext(master)


class FakeClusterExecutor(InProcessExecutor):
    """Runs tasks in-process, but has a Spark session on `master` that starts only when asked for, as SparkExecutor's does."""

    def __init__(self, master: str = "spark://fake:7077") -> None:
        self.master = master
        self._session: FakeSession | None = None
        self.paths_checked = False

    def session(self) -> FakeSession:
        if self._session is None:
            self._session = FakeSession(self.master)
        return self._session

    def running_session(self) -> FakeSession | None:
        return self._session

    def check_paths(self) -> None:
        self.paths_checked = True
