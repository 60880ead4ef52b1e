"""CommitTasks: where commits and recoveries of many datasets run side by side — Spark tasks on the executors
(`runtime.spark_executor.SparkTasks`) or threads of this process (`ThreadTasks`); `commit.distributed` deals the
datasets into groups and hands them to one of these."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class CommitTasks(Protocol):
    """Runs a function over groups as parallel tasks and collects every result; raises when the tasks are lost."""

    master: str
    """Where the tasks run (Spark's master URL, or `threads`): commits go to a cluster's executors only from a threshold."""

    slots: int
    """How many tasks run at once."""

    def flat_map(self, fn: Callable[[T], Iterable[R]], groups: list[T]) -> list[R]: ...


class ThreadTasks:
    """Groups run in a pool of `slots` threads of this process (one machine: faster than Spark tasks,
    scripts/bench_commit.py)."""

    def __init__(self, slots: int, master: str = "threads") -> None:
        self.slots, self.master = max(1, slots), master

    def flat_map(self, fn: Callable[[T], Iterable[R]], groups: list[T]) -> list[R]:
        with ThreadPoolExecutor(max_workers=min(self.slots, len(groups) or 1)) as pool:
            return [out for part in pool.map(lambda g: list(fn(g)), groups) for out in part]
