"""Recovering pending sequences as Spark tasks gives what recovery in driver threads gives: every file once,
watermarks set, the store empty; a corrupt record blocks only its dataset; failures count and quarantine."""

from __future__ import annotations

from pathlib import Path

import pytest

from gobblin_py.commit.distributed import recover_many
from gobblin_py.commit.recovery import Outcome, RecoveryReport, recover
from gobblin_py.commit.store import CommitStepStore
from gobblin_py.runtime.executors.spark import SparkTasks
from gobblin_py.state.store import StateStore
from gobblin_py.testing.commits import dataset_name, publish_sequences, published_path, task_output

pytestmark = pytest.mark.spark

JOB = "j"
DATASETS = 24
FILES = 4


def _recover(how: str, spark, root: Path, max_attempts: int = 3, force: bool = False) -> RecoveryReport:
    if how == "executors":
        return recover_many(SparkTasks(spark.sparkContext), CommitStepStore(root), JOB, max_attempts, force=force, groups=4)
    return recover(CommitStepStore(root), JOB, max_attempts, force=force)


def _pending(root: Path, datasets: int = DATASETS) -> tuple[CommitStepStore, list[list[Path]]]:
    """Sequences of `datasets` datasets in the store, left as a crash would leave them at various points."""
    files = task_output(root, datasets, FILES)
    store = CommitStepStore(root)
    for d, seq in enumerate(publish_sequences(root, JOB, files)):
        store.put(seq)
        done = d % 4 * (FILES + 2) // 3  # 0: nothing run; 2 files; 4 files; every step run, record not removed
        for step in seq.steps[:done]:
            step.execute()
    return store, files


def _published(root: Path) -> dict[str, bytes]:
    out = root / "output"
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()} if out.is_dir() else {}


def _assert_published_once(root: Path, files: list[list[Path]], datasets: list[int]) -> None:
    """Exactly the files of `datasets` are at their destinations, once each, with their own content."""
    published = _published(root)
    expected = {published_path(root, p).relative_to(root / "output").as_posix(): f"{dataset_name(d)}/{f}\n"
                for d in datasets for f, p in enumerate(files[d])}
    assert sorted(published) == sorted(expected)
    for name, head in expected.items():
        assert published[name].startswith(head.encode()) and len(published[name]) == 4096
    for d in datasets:
        assert not any(p.exists() for p in files[d]), "task output is moved, not copied"


@pytest.mark.parametrize("how", ["threads", "executors"])
def test_every_pending_dataset_is_recovered_once_with_its_watermarks(tmp_path: Path, spark, how: str) -> None:
    store, files = _pending(tmp_path)
    report = _recover(how, spark, tmp_path)
    assert [r.dataset for r in report.datasets] == [dataset_name(d) for d in range(DATASETS)]
    assert {r.outcome for r in report.datasets} == {Outcome.RECOVERED} and not report.blocked
    assert {r.run_id for r in report.datasets} == {"run"}
    _assert_published_once(tmp_path, files, list(range(DATASETS)))
    state = StateStore(tmp_path, JOB)
    watermarks = state.watermarks()
    assert sorted(watermarks) == [dataset_name(d) for d in range(DATASETS)]
    assert all(wm == {f"f{f}.avro": 100 for f in range(FILES)} for wm in watermarks.values())
    assert all(state.dataset_state(dataset_name(d))["run_id"] == "run" for d in range(DATASETS))
    assert store.datasets(JOB) == []
    assert _recover(how, spark, tmp_path).datasets == []  # nothing left to do


@pytest.mark.parametrize("how", ["threads", "executors"])
def test_a_corrupt_record_stays_corrupt_and_blocks_only_its_dataset(tmp_path: Path, spark, how: str) -> None:
    store, files = _pending(tmp_path, datasets=8)
    torn = store.path(JOB, dataset_name(4))  # nothing of it was run
    torn.write_bytes(torn.read_bytes()[:200])
    for _attempt in range(2):
        report = _recover(how, spark, tmp_path)
        assert list(report.blocked) == [dataset_name(4)]
        corrupt = report.blocked[dataset_name(4)]
        assert corrupt.outcome is Outcome.CORRUPT and f"commit record {torn} is corrupt" in corrupt.message
        assert store.datasets(JOB) == [dataset_name(4)] and torn.read_bytes()  # left for an operator, untouched
    _assert_published_once(tmp_path, files, [d for d in range(8) if d != 4])
    assert all(p.exists() for p in files[4])
    assert dataset_name(4) not in StateStore(tmp_path, JOB).watermarks()


@pytest.mark.parametrize("how", ["threads", "executors"])
def test_a_failing_step_counts_attempts_then_quarantines_until_forced(tmp_path: Path, spark, how: str) -> None:
    store, files = _pending(tmp_path, datasets=8)
    lost = files[4][2]  # dataset 4 ran no step; its third file's task output is gone
    content = lost.read_bytes()
    lost.unlink()

    first = _recover(how, spark, tmp_path, max_attempts=2)
    assert list(first.blocked) == [dataset_name(4)]
    failed = first.blocked[dataset_name(4)]
    assert failed.outcome is Outcome.FAILED
    assert failed.message.startswith("attempt 1/2: ") and f"step 3/{FILES + 2} (publish " in failed.message and "is gone" in failed.message
    assert store.get(JOB, dataset_name(4)).attempts == 1
    assert dataset_name(4) not in StateStore(tmp_path, JOB).watermarks()

    second = _recover(how, spark, tmp_path, max_attempts=2).blocked[dataset_name(4)]
    assert second.outcome is Outcome.QUARANTINED and second.message.startswith("attempt 2/2: ")
    third = _recover(how, spark, tmp_path, max_attempts=2).blocked[dataset_name(4)]
    assert third.outcome is Outcome.QUARANTINED and third.message.startswith("quarantined after 2 failed attempts; last error: step 3/")
    assert store.get(JOB, dataset_name(4)).attempts == 2, "a quarantined dataset is not retried, so not counted"

    lost.write_bytes(content)  # the operator fixes the cause, then `recover` forces it
    forced = _recover(how, spark, tmp_path, max_attempts=2, force=True)
    assert [(r.dataset, r.outcome) for r in forced.datasets] == [(dataset_name(4), Outcome.RECOVERED)]
    _assert_published_once(tmp_path, files, list(range(8)))
    assert store.datasets(JOB) == [] and len(StateStore(tmp_path, JOB).watermarks()) == 8
