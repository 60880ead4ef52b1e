"""When the runner replays pending commits on the executors, and starts them for it (threads stand for the executors)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.jobs import example_job, write_job

from gobblin_py.commit.recovery import Outcome
from gobblin_py.commit.store import CommitStepStore
from gobblin_py.commit.tasks import ThreadTasks
from gobblin_py.config import load_job
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import DatasetStatus, JobRunner
from gobblin_py.state.store import StateStore
from gobblin_py.testing.commits import dataset_name, publish_sequences, task_output


class _Executors(ThreadTasks):
    """Two threads standing for a cluster's executors; records how many groups each job ran."""

    def __init__(self, master: str) -> None:
        super().__init__(2, master)
        self.jobs: list[int] = []

    def flat_map(self, fn, groups):  # noqa: ANN001, ANN201
        self.jobs.append(len(groups))
        return super().flat_map(fn, groups)


def _job_with_pending(tmp: Path, datasets: int, master: str, **job_settings) -> Path:
    """A job with no new input and `datasets` pending sequences left by an earlier run."""
    work = tmp / "work"
    store = CommitStepStore(work)
    for seq in publish_sequences(work, "t", task_output(work, datasets, 2, job="t")):
        store.put(seq)
    (tmp / "input").mkdir()
    job = example_job(tmp, job={"name": "t", "work_dir": str(work), **job_settings}, source={"class": "files", "path": str(tmp / "input")},
                      spark={"master": master}, publisher={"final_dir": str(work / "output")})
    return write_job(tmp, job)


@pytest.mark.parametrize(("master", "settings", "pending", "on_executors"), [
    ("spark://fake:7077", {}, 64, True),                                # a cluster: from 64 datasets by default
    ("spark://fake:7077", {}, 63, False),
    ("local[2]", {}, 64, False),                                        # one machine: threads by default
    ("local[2]", {"commit_on_executors_from": 3}, 3, True),
    ("spark://fake:7077", {"commit_on_executors_from": 0}, 64, False),  # 0: never
])
def test_recovery_runs_on_the_executors_from_the_commit_threshold(tmp_path: Path, caplog, master: str, settings: dict,
                                                                  pending: int, on_executors: bool) -> None:
    spec = load_job(_job_with_pending(tmp_path, pending, master, **settings))
    executor = InProcessExecutor(cluster=_Executors(master))
    with caplog.at_level("INFO"):
        result = JobRunner(spec, executor).run()
    assert result.succeeded, result.error
    assert [(r.dataset, r.outcome) for r in result.recovery.datasets] == [(dataset_name(d), Outcome.RECOVERED) for d in range(pending)]
    # recovered from records whose input is not there: the empty input directory lists none of them
    assert {d.status for d in result.datasets} == {DatasetStatus.NOT_IN_SOURCE} and len(result.datasets) == pending
    assert CommitStepStore(spec.job.work_dir).datasets("t") == [] and len(StateStore(spec.job.work_dir, "t").watermarks()) == pending
    assert (f"recovering {pending} datasets on the executors" in caplog.text) is on_executors
    assert executor.started is on_executors, "the executors start for recovery only when they will be used"
    assert executor.cluster.jobs == ([min(4, pending)] if on_executors else [])  # up to two groups per core


def test_nothing_pending_starts_nothing(tmp_path: Path) -> None:
    spec = load_job(_job_with_pending(tmp_path, 0, "spark://fake:7077", commit_on_executors_from=1))
    executor = InProcessExecutor(cluster=_Executors("spark://fake:7077"))
    result = JobRunner(spec, executor).run()
    assert result.succeeded and result.recovery.datasets == [] and not executor.started
