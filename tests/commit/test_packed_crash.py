"""Exactly-once under SIGKILL over packed work units: many small files of two datasets, several files to a task,
the real CLI killed at every commit point and at random times, then run again; the output and every file's
watermark must equal one clean run's, and a re-plan after a crash names the same units."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

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
    snapshot,
)

pytestmark = pytest.mark.crash

RUN = ["run", "job.yaml", "--in-process"]
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
FILES = 24  # per dataset; 5 a task: 5 packed units each


def _data(root: Path) -> None:
    """Two datasets of FILES small JSON-lines files (3 events over two days each), one bad line among them."""
    i = 0
    for dataset in ("clicks", "orders"):
        for f in range(FILES):
            lines = []
            for _ in range(3):
                lines.append(json.dumps({"id": i, "ts": START_MS + (i % 2) * 86_400_000, "user": "u", "kind": "click",
                                         "amount": None, "country": "DE"}) + "\n")
                i += 1
            if dataset == "orders" and f == 7:
                lines.insert(1, "not json\n")
            path = root / dataset / f"part-{f:03d}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(lines))


def _setup(tmp: Path) -> Path:
    _data(tmp / "data")
    job = example_job(tmp, job={"name": "t", "work_dir": str(tmp / "work"), "commit_parallelism": 1},
                      source={"class": "files", "path": str(tmp / "data"), "pack_files": 5})
    write_job(tmp, job)
    return tmp


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    """One clean run, and the steps of its two datasets' sequences (read from the records a kill left)."""
    tmp = _setup(tmp_path_factory.mktemp("reference"))
    t0 = time.monotonic()
    done = cli(RUN, tmp)
    took = time.monotonic() - t0
    assert done.returncode == 0, done.stdout + done.stderr
    probe = _setup(tmp_path_factory.mktemp("probe"))
    assert cli(RUN, probe, crash_at="commit.before_record_removal:1").returncode == SIGKILLED
    listed = cli(["inspect-commits", "job.yaml", "--json"], probe)
    views = json.loads(listed.stdout)
    assert {v["dataset"] for v in views} == {"clicks", "orders"}, listed.stdout  # one commit thread: one batch
    return {"snapshot": snapshot(tmp / "output"), "watermarks": StateStore(tmp / "work", "t").watermarks(),
            "steps": sum(len(v["steps"]) for v in views), "duration": took}


def _assert_exactly_once(tmp: Path, reference: dict) -> None:
    snap = snapshot(tmp / "output")
    assert duplicates(snap) == 0
    assert snap == reference["snapshot"]
    assert StateStore(tmp / "work", "t").watermarks() == reference["watermarks"]
    assert cli(["inspect-commits", "job.yaml"], tmp).returncode == 0  # nothing left pending


def _planned(tmp: Path) -> list[str]:
    """The ids of the work units `plan` names (which output file names come from)."""
    done = cli(["plan", "job.yaml", "--json"], tmp)
    assert done.returncode == 0, done.stdout + done.stderr
    return sorted(w["id"] for t in json.loads(done.stdout)["tasks"] for w in t["workunits"])


def test_the_reference_run_packs_and_keeps_every_files_watermark(reference: dict) -> None:
    marks = reference["watermarks"]
    assert {d: len(m) for d, m in marks.items()} == {"clicks": FILES, "orders": FILES}
    assert sum(reference["snapshot"]["records"].values()) == 2 * FILES * 3
    assert len(reference["snapshot"]["errors"]) == 1


def test_kill_at_every_commit_point_over_packed_units_then_run_again(tmp_path_factory, reference: dict) -> None:
    points = commit_points(reference["steps"])
    dirs = [tmp_path_factory.mktemp("p") for _ in points]

    def check(n: int, point: str) -> None:
        tmp = _setup(dirs[n])
        planned = _planned(tmp)
        crashed = cli(RUN, tmp, crash_at=point)
        assert crashed.returncode == SIGKILLED, f"{point} was never reached: {crashed.stdout}{crashed.stderr}"
        if point == "commit.before_store_write":  # tasks wrote their output, nothing logged: the same units again
            assert _planned(tmp) == planned
        again = cli(RUN, tmp)
        assert again.returncode == 0, f"{point}: {again.stdout}{again.stderr}"
        _assert_exactly_once(tmp, reference)

    each_point(points, check)


def test_kill_packed_runs_at_random_times(tmp_path_factory, reference: dict) -> None:
    rng = random.Random(20261206)
    for i in range(6):
        tmp = _setup(tmp_path_factory.mktemp(f"rand{i}"))
        kill_at_random(RUN, tmp, random_delay(rng, reference["duration"]), 0.02)
        if i % 2:
            kill_at_random(RUN, tmp, random_delay(rng, reference["duration"]), 0.02)
        again = cli(RUN, tmp)
        assert again.returncode == 0, f"kill {i}: {again.stdout}{again.stderr}"
        _assert_exactly_once(tmp, reference)
