"""`maintenance.schedule`: a continuous run maintains the job between checkpoints when its cron comes due (under the
lock it holds; a maintenance that fails is logged and the run goes on), and `gobblin-py schedule` runs it as
`<job>:maintain`; the section refuses a schedule with nothing to run and a too young orphan age."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from compaction.test_scheduled_compaction import _until
from maintenance.upkeep_jobs import FIRST_ID, add_records, read_ids, small_lake, table

from gobblin_py.config import load_job
from gobblin_py.errors import ConfigError
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import JobRunner
from gobblin_py.scheduling.continuous import run_continuous

pytest.importorskip("pyiceberg")
EVERY_SECOND = "* * * * * ?"


def _with(tmp: Path, **sections: dict[str, Any]) -> Path:
    """The job file of `tmp` with `sections` merged in."""
    path = tmp / "job.yaml"
    job = yaml.safe_load(path.read_text())
    for key, value in sections.items():
        job.setdefault(key, {}).update(value)
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    return path


def _continuous(path: Path, done: Any, seconds: float = 60) -> Any:
    """A continuous run of the job file in this process until `done()` holds after a checkpoint (or `seconds` pass)."""
    stop = threading.Event()
    timer = threading.Timer(seconds, stop.set)
    timer.start()
    try:
        return run_continuous(JobRunner(load_job(path), InProcessExecutor()), stop,
                              lambda result: stop.set() if done(result) else None)
    finally:
        timer.cancel()


def test_a_continuous_run_expires_snapshots_between_checkpoints_on_maintenance_schedule(tmp_path: Path) -> None:
    tmp = small_lake(tmp_path)
    first = table(tmp, "clicks").current_snapshot().snapshot_id
    path = _with(tmp, job={"mode": "continuous", "checkpoint_interval": "300ms"},
                 maintenance={"schedule": EVERY_SECOND, "expire_snapshots_older_than": "0s", "datasets": ["clicks"]})

    def expired(result: Any) -> bool:
        if result.checkpoints_total == 1:  # the next checkpoint commits a second snapshot, a maintenance expires the first
            add_records(tmp, "clicks", "more", range(700, 720))
        ids = [s.snapshot_id for s in table(tmp, "clicks").snapshots()]
        return result.checkpoints_total > 1 and len(ids) == 1 and ids[0] != first

    result = _continuous(path, expired)
    assert result.succeeded, result.error
    clicks = table(tmp, "clicks")
    assert [s.snapshot_id for s in clicks.snapshots()] != [first] and len(clicks.snapshots()) == 1, "expired by the run"
    assert read_ids(clicks) == Counter(range(FIRST_ID["clicks"], FIRST_ID["clicks"] + 30)) + Counter(range(700, 720))
    events = (tmp / "work" / "events" / "t.jsonl").read_text()
    assert '"MaintenanceFinished"' in events and f"snapshot {first}" in events


def test_a_failing_maintenance_is_logged_and_the_continuous_run_goes_on(tmp_path: Path, caplog) -> None:
    tmp = small_lake(tmp_path)
    path = _with(tmp, job={"mode": "continuous", "checkpoint_interval": "300ms"},
                 maintenance={"schedule": EVERY_SECOND, "retention": "30d", "datasets": ["nosuch"]})
    failed = lambda: [r for r in caplog.records if r.levelno >= logging.ERROR and "maintenance" in r.getMessage()]  # noqa: E731
    with caplog.at_level(logging.INFO):
        result = _continuous(path, lambda r: len(failed()) >= 2 and r.checkpoints_total >= 4)
    assert result.succeeded and result.checkpoints_total >= 4, result.error
    assert "dataset 'nosuch' has no committed output" in failed()[0].getMessage()


@pytest.mark.parametrize("mode", [["--isolated"], []], ids=["child", "in-thread"])
def test_the_scheduler_runs_a_jobs_maintenance_on_maintenance_schedule(tmp_path: Path, mode: list[str]) -> None:
    tmp = small_lake(tmp_path)
    add_records(tmp, "orders", "more", range(900, 910))
    JobRunner(load_job(tmp / "job.yaml"), InProcessExecutor()).run()
    assert len(table(tmp, "orders").snapshots()) == 2
    _with(tmp, maintenance={"schedule": EVERY_SECOND, "expire_snapshots_older_than": "0s"})  # no job.schedule
    code, err = _until(["schedule", str(tmp / "job.yaml"), *mode, "--in-process"], tmp,
                       lambda: len(table(tmp, "orders").snapshots()) == 1)
    assert code == 0, err
    assert f"scheduled t:maintain ({EVERY_SECOND})" in err and "scheduled t (" not in err
    assert "t:maintain run 1 finished with exit code 0" in err, err
    assert read_ids(table(tmp, "orders")) == Counter(range(10_000, 10_030)) + Counter(range(900, 910))


@pytest.mark.parametrize("section, said", [
    ({"schedule": EVERY_SECOND}, "nothing to run on it"),
    ({"schedule": "61 * * * *", "retention": "30d"}, "schedule"),
    ({"remove_orphans_older_than": "10m"}, "younger than the 3600s"),
], ids=["nothing-to-run", "bad-cron", "young-orphan-age"])
def test_the_section_refuses_a_schedule_with_nothing_to_run_and_a_young_orphan_age(tmp_path: Path, section: dict, said: str) -> None:
    from builtin.test_iceberg_publisher import iceberg_job
    from support.jobs import write_job

    job = iceberg_job(tmp_path)
    job["maintenance"] = section
    with pytest.raises(ConfigError, match=said):
        load_job(write_job(tmp_path, job))
