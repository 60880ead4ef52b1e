"""The in-process executor: tasks in the driver, no Spark (`--in-process`, tests, runs kept out of Spark).

With `threads` > 1 up to that many tasks run at once in threads: a task whose heavy lifting is native (Arrow's
readers and writers, a database driver's COPY) releases Python's lock there, so on one machine the driver's threads
do what a local Spark does, without Spark's start.
"""

from __future__ import annotations

import queue
from concurrent.futures import Future, ThreadPoolExecutor

from gobblin_py.commit.tasks import CommitTasks
from gobblin_py.runtime.executors.base import ProgressCallback
from gobblin_py.runtime.interrupt import raise_if_interrupted
from gobblin_py.runtime.task.attempt import run_task
from gobblin_py.runtime.task.results import TasksCancelled, WorkUnitResult
from gobblin_py.runtime.task.spec import TaskSpec

_POLL_S = 0.2  # how often the driver looks up from waiting on task threads (Ctrl-C, progress)


class InProcessExecutor:
    """Runs tasks in this process (no Spark): `--in-process`, and runs kept in the driver (see `base.small_plan_bytes`).
    `threads`: how many tasks at once (1: one after another, in this thread).
    `cluster`: tasks for commits and recoveries, standing for the executors (e.g. `ThreadTasks(2, master="spark://h:7077")`),
    started when first asked for."""

    def __init__(self, cluster: CommitTasks | None = None, threads: int = 1) -> None:
        self.cluster = cluster
        self.threads = max(1, threads)
        self.master = cluster.master if cluster is not None else "in-process"
        self.startup_s = 0.0
        self.started = False

    def start(self) -> None:
        pass

    def run(self, tasks: list[TaskSpec], progress: ProgressCallback | None = None) -> list[WorkUnitResult]:
        if self.threads > 1 and len(tasks) > 1:
            return self._run_threads(tasks, progress)
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

    def _run_threads(self, tasks: list[TaskSpec], progress: ProgressCallback | None) -> list[WorkUnitResult]:
        """The tasks on a pool of threads, results in the tasks' order. Ctrl-C cancels the tasks not started and
        waits for the running ones, which stop at their next batch (see `attempt.run_task`)."""
        total = len(tasks)
        pool = ThreadPoolExecutor(max_workers=min(self.threads, total), thread_name_prefix="gobblin-task")
        done: queue.SimpleQueue[Future[list[WorkUnitResult]]] = queue.SimpleQueue()
        futures: list[Future[list[WorkUnitResult]]] = []
        for t in tasks:
            futures.append(pool.submit(run_task, t))
            futures[-1].add_done_callback(done.put)
        try:  # finished futures come from a queue: `wait` would walk every pending future each time (10,000 tasks)
            left = total
            while left:
                try:
                    finished = [done.get(timeout=_POLL_S)]
                    while not done.empty():
                        finished.append(done.get_nowait())
                except queue.Empty:
                    finished = []
                for f in finished:
                    left -= 1
                    f.result()  # a task that raised (an interrupt, a bug) raises here, as it would in this thread
                raise_if_interrupted()
                if progress:
                    progress(total - left, min(self.threads, left), 0, total)
        except KeyboardInterrupt:
            for f in futures:
                f.cancel()
            pool.shutdown(wait=True)
            raise TasksCancelled([r for f in futures if f.done() and not f.cancelled() and f.exception() is None
                                  for r in f.result()]) from None
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        return [r for f in futures for r in f.result()]

    def commit_tasks(self, start: bool = False) -> CommitTasks | None:
        self.started = self.started or (start and self.cluster is not None)
        return self.cluster if self.started else None

    def stop(self, exiting: bool = False) -> None:
        pass
