"""Exactly-once under SIGKILL: the real CLI killed at every named commit point and at random times.

Every test compares the whole output (each record, its partition, each error entry, counted) and the
committed watermarks with those of one clean run of the same job.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from pathlib import Path

import orjson
import pytest
from support.jobs import example_job, write_job

from gobblin_py.state.store import StateStore
from gobblin_py.testing.crash import (
    SIGKILLED,
    cli,
    commit_points,
    duplicates,
    each_point,
    kill_at_random,
    random_delay,
    recovery_points,
    snapshot,
    time_to_point,
)

pytestmark = pytest.mark.crash

RUN = ["run", "job.yaml", "--in-process"]
RANDOM_KILLS = int(os.environ.get("GOBBLIN_PY_RANDOM_KILLS", "12"))  # kills that must land in a running job


def _serial(tmp: Path, **job) -> dict:
    """The example job with datasets committed one at a time (one commit thread: one batch), so `after_step:N` names
    one step."""
    return example_job(tmp, job={"name": "t", "work_dir": str(tmp / "work"), "commit_parallelism": 1, **job})


def _setup(tmp: Path, reference: dict, parallel: bool = False) -> Path:
    shutil.copytree(reference["data"], tmp / "data")
    write_job(tmp, example_job(tmp) if parallel else _serial(tmp))
    return tmp


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    """One clean run: the output and watermarks every crashed run must end up with."""
    tmp = tmp_path_factory.mktemp("reference")
    write_job(tmp, _serial(tmp))
    t0 = time.monotonic()
    done = cli(RUN, tmp)
    took = time.monotonic() - t0
    assert done.returncode == 0, done.stdout + done.stderr
    return {"data": tmp / "data", "snapshot": snapshot(tmp / "output"), "watermarks": StateStore(tmp / "work", "t").watermarks(),
            "steps": _total_steps(tmp_path_factory, tmp), "duration": took}


def _total_steps(factory, ref_tmp: Path) -> int:
    """Steps of every dataset's sequence, read from the records left by runs killed before each removal (one commit
    thread: its datasets' records are one batch, removed together, so the first kill leaves them all)."""
    total, seen = 0, set()
    for nth in (1, 2):
        if seen == {"clicks", "orders"}:
            break
        tmp = factory.mktemp("probe")
        shutil.copytree(ref_tmp / "data", tmp / "data")
        write_job(tmp, _serial(tmp))
        assert cli(RUN, tmp, crash_at=f"commit.before_record_removal:{nth}").returncode == SIGKILLED
        listed = cli(["inspect-commits", "job.yaml", "--json"], tmp)
        assert listed.returncode == 3, listed.stdout + listed.stderr
        views = [v for v in json.loads(listed.stdout) if v["dataset"] not in seen]
        assert views, listed.stdout
        for view in views:
            seen.add(view["dataset"])
            total += len(view["steps"])
    assert seen == {"clicks", "orders"}
    return total


def _assert_exactly_once(tmp: Path, reference: dict) -> None:
    snap = snapshot(tmp / "output")
    assert duplicates(snap) == 0
    assert snap == reference["snapshot"]
    assert StateStore(tmp / "work", "t").watermarks() == reference["watermarks"]
    assert cli(["inspect-commits", "job.yaml"], tmp).returncode == 0  # nothing left pending


def test_points_are_enumerated_from_the_code(reference: dict) -> None:
    points = commit_points(reference["steps"])
    assert reference["steps"] == 17  # clicks: 5 files + 1 error file + watermarks + state; orders: 5 + 2 + 2
    assert "commit.after_step:17" in points and "commit.store_write_midway" in points


@pytest.mark.parametrize("then", ["run", "recover"])
def test_kill_at_every_commit_point_then_run_again(tmp_path_factory, reference: dict, then: str) -> None:
    points = commit_points(reference["steps"])
    dirs = [tmp_path_factory.mktemp("p") for _ in points]

    def check(n: int, point: str) -> None:
        tmp = _setup(dirs[n], reference)
        crashed = cli(RUN, tmp, crash_at=point)
        assert crashed.returncode == SIGKILLED, f"{point} was never reached: {crashed.stdout}{crashed.stderr}"
        if then == "recover":
            recovered = cli(["recover", "job.yaml", "--all"], tmp)
            assert recovered.returncode == 0, f"{point}: {recovered.stdout}{recovered.stderr}"
        again = cli(RUN, tmp)
        assert again.returncode == 0, f"{point}: {again.stdout}{again.stderr}"
        _assert_exactly_once(tmp, reference)

    each_point(points, check)


def test_kill_during_recovery_itself(tmp_path_factory, reference: dict) -> None:
    for point in recovery_points():
        # one commit thread writes both datasets' records as one batch: after it, none of their steps has run
        for first in ("commit.after_store_write", "commit.after_step:3", "commit.before_record_removal"):
            tmp = _setup(tmp_path_factory.mktemp("r"), reference)
            assert cli(RUN, tmp, crash_at=first).returncode == SIGKILLED
            assert cli(RUN, tmp, crash_at=point).returncode == SIGKILLED
            assert cli(RUN, tmp, crash_at="commit.after_step:2").returncode == SIGKILLED  # killed while replaying
            again = cli(RUN, tmp)
            assert again.returncode == 0, f"{first} → {point}: {again.stdout}{again.stderr}"
            _assert_exactly_once(tmp, reference)


def test_kill_at_random_times(tmp_path_factory, reference: dict) -> None:
    """Kills at random times; every commit point is killed deterministically above, so CI lands 12 kills (5 inside a
    commit) and a soak raises `GOBBLIN_PY_RANDOM_KILLS` (e.g. 200) for many more."""
    rng = random.Random(20261121)
    window = 0.02  # every crash point pauses 20 ms: the commit path takes ~0.5 s instead of ~20 ms
    start = time_to_point(RUN, _setup(tmp_path_factory.mktemp("t0"), reference, parallel=True), "commit.before_store_write")
    kills, in_commit = RANDOM_KILLS, max(1, RANDOM_KILLS * 2 // 5)
    killed = mid_commit = i = 0
    while (killed < kills or mid_commit < in_commit) and i < kills * 5:  # kills land by timing: go on until enough did
        i += 1
        if i % 20 == 0:  # the machine's pace changes (a shared CI box): measure again
            start = time_to_point(RUN, _setup(tmp_path_factory.mktemp(f"t{i}"), reference, parallel=True), "commit.before_store_write")
        tmp = _setup(tmp_path_factory.mktemp(f"rand{i}"), reference, parallel=True)
        # half the kills anywhere in the run, half around the commit path
        delay = random_delay(rng, start + 0.8) if i % 2 else start + rng.uniform(-0.2, 0.8)
        killed += kill_at_random(RUN, tmp, delay, window) == SIGKILLED
        mid_commit += any((tmp / "work" / "commits" / "t").glob("*.json"))
        if i % 3 == 0:  # sometimes kill the recovering run too
            kill_at_random(RUN, tmp, random_delay(rng, start + 0.8), window)
        again = cli(RUN, tmp)
        assert again.returncode == 0, f"iteration {i}: {again.stdout}{again.stderr}"
        _assert_exactly_once(tmp, reference)
    print(f"random kills: {killed}/{i} killed a running job, {mid_commit} of them inside a commit")
    assert killed >= kills and mid_commit >= in_commit, f"after {i} runs only {killed} kills landed in a running job, {mid_commit} in a commit"


def test_at_least_once_duplicates_in_the_window_between_publish_and_persist(tmp_path: Path, reference: dict) -> None:
    """Why exactly_once is the default: the classic publish-then-persist order re-publishes after this crash."""
    shutil.copytree(reference["data"] / "clicks", tmp_path / "data" / "clicks")
    job = _serial(tmp_path, delivery="at_least_once")
    write_job(tmp_path, job)
    crashed = cli(RUN, tmp_path, crash_at="commit.after_step:6")  # 5 data files + 1 error file published, no watermark
    assert crashed.returncode == SIGKILLED
    assert cli(RUN, tmp_path).returncode == 0
    snap = snapshot(tmp_path / "output")
    assert duplicates(snap) == 2000  # every click published twice
    assert set(snap["records"].values()) == {2}


@pytest.mark.spark
def test_kill_mid_commit_on_spark_then_recover(tmp_path: Path, reference: dict) -> None:
    tmp = _setup(tmp_path, reference)
    crashed = cli(["run", "job.yaml"], tmp, crash_at="commit.after_step:4")
    assert crashed.returncode == SIGKILLED
    listed = orjson.loads(cli(["inspect-commits", "job.yaml", "--json"], tmp).stdout)
    assert listed and any(s["status"] == "done" for v in listed for s in v["steps"])
    again = cli(["run", "job.yaml"], tmp)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "no new data" in again.stdout  # recovery published what the killed run had logged
    _assert_exactly_once(tmp, reference)


@pytest.mark.spark
def test_kill_recovery_on_spark_executors_then_run_again(tmp_path: Path, reference: dict) -> None:
    """Recovery as Spark tasks (commit_on_executors_from: 1): the worker replaying a dataset is killed at
    recovery.before_commit; the run blocks that dataset, the next run replays it on the executors."""
    tmp = _setup(tmp_path, reference)
    write_job(tmp, _serial(tmp, commit_on_executors_from=1))
    assert cli(RUN, tmp, crash_at="commit.after_step:4").returncode == SIGKILLED  # in the driver: one dataset half published
    pending = [v["dataset"] for v in orjson.loads(cli(["inspect-commits", "job.yaml", "--json"], tmp).stdout)]
    assert pending  # both records: one commit thread writes, and removes, its datasets' records as one batch
    killed = cli(["run", "job.yaml"], tmp, crash_at="recovery.before_commit")
    assert killed.returncode == 1, killed.stdout + killed.stderr
    assert "recovery on the executors failed (Python worker exited unexpectedly (crashed)); the next run replays it" in killed.stdout
    assert all(f"{dataset}   blocked" in killed.stdout for dataset in pending), killed.stdout
    again = cli(["run", "job.yaml"], tmp)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "no new data" in again.stdout  # recovery published what the killed run had logged
    _assert_exactly_once(tmp, reference)


@pytest.mark.spark
@pytest.mark.parametrize("point", ["commit.after_store_write", "commit.after_step:3"])
def test_kill_commits_on_spark_executors_then_run_again(tmp_path: Path, reference: dict, point: str) -> None:
    """Commits as Spark tasks (commit_on_executors_from: 1 on local[2]): the crash variable reaches the Python
    workers, which die at `point` while the driver lives on; the next run, whose recovery of the records left
    also runs on the executors and is killed after its first replayed step, then a last run, publish every
    record once."""
    tmp = _setup(tmp_path, reference)
    job = _serial(tmp, commit_on_executors_from=1)
    job.setdefault("spark", {})["in_driver_below"] = 0  # Spark runs (a run this small would stay in the driver)
    write_job(tmp, job)
    killed = cli(["run", "job.yaml"], tmp, crash_at=point)
    assert killed.returncode == 1, killed.stdout + killed.stderr  # only the worker died
    assert "commit on the executors failed (Python worker exited unexpectedly (crashed))" in killed.stdout
    assert orjson.loads(cli(["inspect-commits", "job.yaml", "--json"], tmp).stdout), "the worker's record stays pending"
    replaying = cli(["run", "job.yaml"], tmp, crash_at="commit.after_step:1")
    assert replaying.returncode == 1, replaying.stdout + replaying.stderr
    assert "recovery on the executors failed (Python worker exited unexpectedly (crashed))" in replaying.stdout
    again = cli(["run", "job.yaml"], tmp)
    assert again.returncode == 0, again.stdout + again.stderr
    _assert_exactly_once(tmp, reference)
