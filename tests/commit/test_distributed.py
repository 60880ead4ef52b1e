"""The driver's side of commits and recovery on the executors, without Spark: when, and what a failed Spark job leaves."""

from __future__ import annotations

from pathlib import Path

import pytest

from gobblin_py.commit.distributed import (
    commit_many,
    recover_many,
    use_executors,
)
from gobblin_py.commit.recovery import Outcome
from gobblin_py.commit.store import CommitStepStore
from gobblin_py.errors import spark_failure
from gobblin_py.testing.commits import dataset_name, publish_sequences, task_output

PY4J_CRASH = """An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 1 in stage 0.0 failed 1 times, most recent failure: Lost task 1.0 in stage 0.0 (TID 1) (10.0.0.2 executor driver): org.apache.spark.SparkException: Python worker exited unexpectedly (crashed). Consider setting 'spark.python.worker.faulthandler.enabled' to true
\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator$$anonfun$1.applyOrElse(PythonRunner.scala:621)
Caused by: java.io.EOFException"""

PY4J_PYTHON_ERROR = """An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 1 in stage 1.0 failed 1 times, most recent failure: Lost task 1.0 in stage 1.0 (TID 3) (10.0.0.2 executor driver): org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "worker.py", line 2044, in main
OSError: [Errno 28] No space left on device
\tat org.apache.spark.util.SparkErrorUtils.tryWithSafeFinally(SparkErrorUtils.scala:80)"""


@pytest.mark.parametrize(("datasets", "configured", "master", "expected"), [
    (64, None, "spark://h:7077", True), (63, None, "spark://h:7077", False), (10_000, None, "local[*]", False),
    (3, 3, "local[2]", True), (2, 3, "yarn", False), (10_000, 0, "spark://h:7077", False),
])
def test_the_executors_take_over_from_the_threshold(datasets: int, configured: int | None, master: str, expected: bool) -> None:
    assert use_executors(datasets, configured, master) is expected


def test_a_failed_spark_job_is_named_by_its_cause() -> None:
    assert spark_failure(RuntimeError(PY4J_CRASH)) == "Python worker exited unexpectedly (crashed)"
    assert spark_failure(RuntimeError(PY4J_PYTHON_ERROR)) == "OSError: [Errno 28] No space left on device"
    assert spark_failure(RuntimeError("")) == "RuntimeError"


class _LostAfterOneGroup:
    """Runs the first group's task, then the tasks are lost, as when an executor is lost for good."""

    master, slots = "spark://h:7077", 2

    def flat_map(self, fn, groups):  # noqa: ANN001, ANN201
        list(fn(groups[0]))
        raise RuntimeError(PY4J_CRASH)


def test_after_a_failed_spark_job_only_datasets_whose_record_is_gone_count_as_recovered(tmp_path: Path) -> None:
    store = CommitStepStore(tmp_path)
    for seq in publish_sequences(tmp_path, "j", task_output(tmp_path, 6, 2)):
        store.put(seq)
    report = recover_many(_LostAfterOneGroup(), CommitStepStore(tmp_path), "j", 3, groups=3)
    outcomes = {r.dataset: r.outcome for r in report.datasets}
    assert list(outcomes) == [dataset_name(d) for d in range(6)]
    # round-robin: the first group held datasets 0 and 3
    assert {d for d, o in outcomes.items() if o is Outcome.RECOVERED} == {dataset_name(0), dataset_name(3)}
    for d in (1, 2, 4, 5):
        failed = report.blocked[dataset_name(d)]
        assert failed.message == "recovery on the executors failed (Python worker exited unexpectedly (crashed)); the next run replays it"
        assert store.get("j", dataset_name(d)).attempts == 0, "no attempt is counted for a lost executor"


def test_after_a_failed_commit_job_only_datasets_whose_state_holds_count_as_committed(tmp_path: Path) -> None:
    seqs = publish_sequences(tmp_path, "j", task_output(tmp_path, 4, 2))
    outcome = commit_many(_LostAfterOneGroup(), CommitStepStore(tmp_path), seqs, groups=2)
    assert [d for d, err in outcome.items() if err is None] == [dataset_name(0), dataset_name(2)]
    for d in (1, 3):
        assert outcome[dataset_name(d)].startswith("commit on the executors failed (Python worker exited unexpectedly (crashed))")
    assert CommitStepStore(tmp_path).datasets("j") == [], "the lost group never logged its sequences: nothing to recover"
