"""`maintain` on a Delta table under SIGKILL at every commit point of each action (vacuum, checkpoint and log expiry,
retention): after the next `maintain --yes` (or `run`) the action is complete, every id is in what delta-rs reads of
the table's latest version exactly once, and nothing a pending commit needs was deleted."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from builtin.test_delta_publisher import delta_ids, table
from maintenance.test_delta_upkeep import (
    RETENTION_APP,
    RUN,
    add_clicks,
    age,
    copy_job,
    make_two_runs,
    ok,
    retention_keeping,
)

from gobblin_py.commit.store import CommitStepStore
from gobblin_py.testing.crash import SIGKILLED, cli, commit_points, each_point

pytestmark = pytest.mark.crash
pytest.importorskip("deltalake")


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> dict:
    tmp = make_two_runs(tmp_path_factory.mktemp("delta"))
    return {"tmp": tmp, "ids": delta_ids(table(tmp, "clicks"))}


def _readable_once(root: Path, expected: Counter, point: str) -> None:
    t = table(root, "clicks")
    ids = delta_ids(t)
    assert ids == expected and set(ids.values()) == {1}, point
    assert all(Path(p).exists() for p in t.file_uris()), point


def test_vacuum_killed_at_every_commit_point(tmp_path: Path, two_runs: dict) -> None:
    """With a pending ingestion commit whose published file is as old as the orphan: the orphan goes, that file stays."""

    def check(n: int, point: str) -> None:
        root = copy_job(two_runs["tmp"], tmp_path / str(n))
        data = root / "lake" / "clicks" / "data"
        orphan = data / "orphan.parquet"
        orphan.write_bytes(b"x" * 10)
        age(orphan, 10)
        add_clicks(root, "pending", range(300_000, 300_020), day=3)
        add_clicks(root, "pending2", range(400_000, 400_020), day=4)
        assert cli(RUN, root, crash_at="commit.after_step:1").returncode == SIGKILLED
        [published] = [p for p in data.rglob("pending*.parquet")]
        age(published, 10)
        away = {p: root / p.name for p in (root / "work" / "task-output").rglob("*.parquet")}
        for src, dst in away.items():  # the ingestion record stays pending through `maintain --yes`
            shutil.move(src, dst)
        args = ["maintain", "job.yaml", "--remove-orphans-older-than", "8d", "--dataset", "clicks", "--yes"]
        killed = cli(args, root, crash_at=point)
        assert killed.returncode == SIGKILLED, f"{point}: {killed.stdout}{killed.stderr}"
        assert published.exists(), point
        again = cli(args, root)
        assert not orphan.exists() and published.exists(), f"{point}: {again.stdout}"
        assert "refused: " + str(published) in again.stdout, f"{point}: {again.stdout}"
        assert CommitStepStore(root / "work").datasets("t") == ["clicks"], point  # only the ingestion's
        for src, dst in away.items():
            shutil.move(dst, src)
        ok(cli(["recover", "job.yaml", "--dataset", "clicks"], root))  # the ingestion commit completed: its file added
        _readable_once(root, two_runs["ids"] + Counter([*range(300_000, 300_020), *range(400_000, 400_020)]), point)

    each_point(commit_points(1), check)


def test_checkpoint_and_log_expiry_killed_at_every_commit_point(tmp_path: Path, two_runs: dict) -> None:
    def check(n: int, point: str) -> None:
        root = copy_job(two_runs["tmp"], tmp_path / str(n))
        log = root / "lake" / "clicks" / "_delta_log"
        for p in log.iterdir():
            age(p, 40)
        args = ["maintain", "job.yaml", "--expire-snapshots-older-than", "31d", "--dataset", "clicks", "--yes"]
        killed = cli(args, root, crash_at=point)
        assert killed.returncode == SIGKILLED, f"{point}: {killed.stdout}{killed.stderr}"
        _readable_once(root, two_runs["ids"], point)  # a reader at the kill
        ok(cli(args, root))
        assert json.loads((log / "_last_checkpoint").read_text())["version"] == 1, point  # what the next commit reads
        assert not (log / "00000000000000000000.json").exists() and (log / "00000000000000000001.json").exists(), point
        assert CommitStepStore(root / "work").datasets("t") == [], point
        _readable_once(root, two_runs["ids"], point)
        add_clicks(root, "after", range(500_000, 500_010))
        ok(cli(RUN, root))  # the job's next commit (its RESTORE check reads the history it kept)
        _readable_once(root, two_runs["ids"] + Counter(range(500_000, 500_010)), point)

    each_point(commit_points(2), check)


def test_retention_killed_at_every_commit_point_then_a_run_completes_it(tmp_path: Path, two_runs: dict) -> None:
    def check(n: int, point: str) -> None:
        root = copy_job(two_runs["tmp"], tmp_path / str(n))
        before = table(root, "clicks").to_pyarrow_table(columns=["id", "ts_day"]).to_pylist()
        expected = Counter(r["id"] for r in before if r["ts_day"] >= "2026-01-03")
        args = ["maintain", "job.yaml", "--retention", retention_keeping("2026-01-03"), "--dataset", "clicks", "--yes"]
        killed = cli(args, root, crash_at=point)
        assert killed.returncode == SIGKILLED, f"{point}: {killed.stdout}{killed.stderr}"
        t = table(root, "clicks")
        assert delta_ids(t) in (expected, two_runs["ids"]), point  # a reader at the kill: before or after, nothing between
        ok(cli(RUN, root))  # recovers the maintenance record first
        if point in ("commit.before_store_write", "commit.store_write_midway"):
            ok(cli(args, root))  # nothing was logged: maintain plans it again
        t = table(root, "clicks")
        assert t.transaction_version(RETENTION_APP) == 1 and len([h for h in t.history() if h["operation"] == "DELETE"]) == 1, point
        assert CommitStepStore(root / "work").datasets("t") == [], point
        _readable_once(root, expected, point)

    each_point(commit_points(1), check)
