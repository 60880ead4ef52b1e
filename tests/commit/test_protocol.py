"""The one commit protocol: the driver, the executors and recovery pass the same crash points in the same order,
and the at-least-once path runs every step with no record (no Spark needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gobblin_py.commit import protocol, recovery
from gobblin_py.commit import store as store_module
from gobblin_py.commit.distributed import commit_many, recover_many
from gobblin_py.commit.recovery import Outcome, recover
from gobblin_py.commit.store import CommitStepStore
from gobblin_py.commit.tasks import ThreadTasks
from gobblin_py.crashpoints import POINTS
from gobblin_py.errors import CommitError
from gobblin_py.testing.commits import publish_sequences, task_output

STEPS = 4  # two files, the watermarks, the state
NEW_COMMIT = ["commit.before_store_write", "commit.store_write_midway", "commit.after_store_write",
              *["commit.after_step"] * STEPS, "commit.before_record_removal", "commit.after_record_removal"]
REPLAY = ["recovery.before_commit", *["commit.after_step"] * STEPS, "commit.before_record_removal", "commit.after_record_removal"]


@pytest.fixture
def hits(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The crash points passed, in order (none kills)."""
    passed: list[str] = []
    for module in (protocol, store_module, recovery):
        monkeypatch.setattr(module, "crash_point", passed.append)
    return passed


def test_a_new_commit_passes_every_commit_point_in_the_driver_and_on_the_executors(tmp_path: Path, hits: list[str]) -> None:
    driver, executors = tmp_path / "driver", tmp_path / "executors"
    [seq] = publish_sequences(driver, "j", task_output(driver, 1, 2))
    protocol.commit_sequence(CommitStepStore(driver), seq)  # what the runner's _commit_local does
    assert hits == NEW_COMMIT
    hits.clear()
    outcome = commit_many(ThreadTasks(2, master="spark://h:7077"), CommitStepStore(executors),
                                  publish_sequences(executors, "j", task_output(executors, 1, 2)), groups=1)
    assert list(outcome.values()) == [None] and hits == NEW_COMMIT
    assert set(NEW_COMMIT) | {"recovery.before_commit"} == set(POINTS), "every named point is on the commit path"


@pytest.mark.parametrize("how", ["threads", "executors"])
def test_recovery_replays_through_the_same_protocol(tmp_path: Path, hits: list[str], how: str) -> None:
    store = CommitStepStore(tmp_path)
    [seq] = publish_sequences(tmp_path, "j", task_output(tmp_path, 1, 2))
    store.put(seq)
    hits.clear()
    if how == "threads":
        report = recover(store, "j", max_attempts=3)
    else:
        report = recover_many(ThreadTasks(2, master="spark://h:7077"), CommitStepStore(tmp_path), "j", 3, groups=1)
    assert [r.outcome for r in report.datasets] == [Outcome.RECOVERED] and hits == REPLAY
    assert store.datasets("j") == []


def test_without_the_log_every_step_runs_and_a_failure_names_the_step_cause(tmp_path: Path, hits: list[str]) -> None:
    store = CommitStepStore(tmp_path)
    [seq] = publish_sequences(tmp_path, "j", task_output(tmp_path, 1, 2))
    protocol.publish_without_log(store.confinement, seq)
    assert hits == ["commit.after_step"] * STEPS and store.datasets("j") == []
    [lost] = publish_sequences(tmp_path / "b", "j", task_output(tmp_path / "b", 1, 2))
    Path(lost.steps[0].src).unlink()
    with pytest.raises(CommitError, match="is gone") as failed:
        protocol.publish_without_log(CommitStepStore(tmp_path / "b").confinement, lost)
    assert not str(failed.value).startswith("commit of dataset"), "the step's own message, as before"
    assert store.datasets("j") == []
