"""Operating the commit log through the CLI: corrupt records, quarantine, recover, abandon, inspect-commits."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.jobs import EXAMPLE_DATA, example_job, write_job

from gobblin_py.state.store import StateStore
from gobblin_py.testing.crash import SIGKILLED, cli, duplicates, snapshot

RUN = ["run", "job.yaml", "--in-process"]


def _serial_job(tmp: Path) -> dict:
    """The example job, datasets committed one at a time so crash points are deterministic."""
    return example_job(tmp, job={"name": "t", "work_dir": str(tmp / "work"), "commit_parallelism": 1})


@pytest.fixture
def job_dir(tmp_path: Path) -> Path:
    write_job(tmp_path, _serial_job(tmp_path))
    return tmp_path


def _pending(job_dir: Path) -> list[dict]:
    listed = cli(["inspect-commits", "job.yaml", "--json"], job_dir)
    assert listed.returncode in (0, 3), listed.stderr
    return json.loads(listed.stdout)


def _clean_reference(tmp: Path) -> dict:
    write_job(tmp, _serial_job(tmp))
    assert cli(RUN, tmp).returncode == 0
    return snapshot(tmp / "output")


def test_inspect_commits_table_json_filter_and_work_dir(job_dir: Path) -> None:
    assert cli(["inspect-commits", "job.yaml"], job_dir).returncode == 0
    assert cli(RUN, job_dir, crash_at="commit.after_step:3").returncode == SIGKILLED
    table = cli(["inspect-commits", "job.yaml"], job_dir)
    assert table.returncode == 3
    assert "t / clicks: run " in table.stdout or "t / orders: run " in table.stdout
    assert " done " in table.stdout and " pending " in table.stdout and "publish " in table.stdout
    views = _pending(job_dir)
    statuses = [s["status"] for v in views for s in v["steps"]]
    assert statuses.count("done") == 3 and "pending" in statuses
    only = cli(["inspect-commits", "job.yaml", "--json", "--dataset", views[0]["dataset"]], job_dir)
    assert [v["dataset"] for v in json.loads(only.stdout)] == [views[0]["dataset"]]
    by_dir = cli(["inspect-commits", "--work-dir", str(job_dir / "work"), "--json"], job_dir)
    assert by_dir.returncode == 3 and {v["job"] for v in json.loads(by_dir.stdout)} == {"t"}
    assert cli(["inspect-commits"], job_dir).returncode == 2


def test_a_corrupt_record_blocks_only_its_dataset_and_is_named(job_dir: Path, tmp_path_factory) -> None:
    assert cli(RUN, job_dir, crash_at="commit.after_store_write:1").returncode == SIGKILLED
    record = job_dir / "work" / "commits" / "t" / "clicks.json"
    raw = record.read_bytes()
    record.write_bytes(raw[: len(raw) // 2])  # torn
    shutil.copy(EXAMPLE_DATA / "orders" / "orders-2026-01-01.jsonl", job_dir / "data" / "orders" / "orders-2026-01-09.jsonl")
    run = cli(RUN, job_dir)
    assert run.returncode == 1
    assert f"commit record {record} is corrupt" in run.stderr + run.stdout
    assert "clicks   blocked" in run.stdout and "orders   committed" in run.stdout
    listed = cli(["inspect-commits", "job.yaml"], job_dir)
    assert listed.returncode == 3 and "CORRUPT" in listed.stdout and str(record) in listed.stdout
    abandoned = cli(["recover", "job.yaml", "--dataset", "clicks", "--abandon", "--yes"], job_dir)
    assert abandoned.returncode == 0 and "the record is corrupt" in abandoned.stdout
    again = cli(RUN, job_dir)
    assert again.returncode == 0, again.stdout + again.stderr
    snap = snapshot(job_dir / "output")
    assert duplicates(snap) == 200  # only the orders file deliberately copied under a new name
    assert sum(n for (ds, _, _), n in snap["records"].items() if ds == "clicks") == 2000


def test_quarantine_after_max_attempts_then_recover_and_abandon(job_dir: Path, tmp_path_factory) -> None:
    reference = _clean_reference(tmp_path_factory.mktemp("ref"))
    job = _serial_job(job_dir)
    job["job"]["commit_retry_backoff"] = 0  # each run attempts it (the wait between attempts: tests/commit/test_commit_faults.py)
    write_job(job_dir, job)
    assert cli(RUN, job_dir, crash_at="commit.after_store_write:1").returncode == SIGKILLED
    clicks = next(v for v in _pending(job_dir) if v["dataset"] == "clicks")
    lost_src = json.loads((job_dir / "work" / "commits" / "t" / "clicks.json").read_text())["body"]["steps"][2]["args"]["src"]
    Path(lost_src).unlink()  # the third step can never be done: its input is gone
    for attempt in (1, 2, 3):
        run = cli(RUN, job_dir)
        assert run.returncode == 1
        expected = "quarantined" if attempt == 3 else "failed"
        assert f"dataset clicks is {expected}" in run.stderr, run.stderr
        assert "step 3/8" in run.stderr and "is gone" in run.stderr
    run = cli(RUN, job_dir)  # quarantined: not retried by runs any more, other datasets go on
    assert run.returncode == 1 and "quarantined after 3 failed attempts" in run.stderr
    assert "orders   no new data" in run.stdout
    view = next(v for v in _pending(job_dir) if v["dataset"] == "clicks")
    assert view["attempts"] == 3 and [s["status"] for s in view["steps"]][:3] == ["done", "done", "lost"]
    retried = cli(["recover", "job.yaml", "--dataset", "clicks"], job_dir)
    assert retried.returncode == 1 and "clicks: quarantined" in retried.stderr
    refused = cli(["recover", "job.yaml", "--dataset", "clicks", "--abandon"], job_dir)  # no input: not confirmed
    assert refused.returncode == 1 and "nothing abandoned" in refused.stderr and "lost" in refused.stdout
    abandoned = cli(["recover", "job.yaml", "--dataset", "clicks", "--abandon", "--yes"], job_dir)
    assert abandoned.returncode == 0 and "abandoned" in abandoned.stdout
    assert cli(["recover", "job.yaml", "--all"], job_dir).returncode == 0
    final = cli(RUN, job_dir)
    assert final.returncode == 0, final.stdout + final.stderr
    assert snapshot(job_dir / "output") == reference  # re-extracted files land on the same names: no duplicates
    assert clicks["run_id"]


def test_recover_needs_a_selection(job_dir: Path) -> None:
    result = cli(["recover", "job.yaml"], job_dir)
    assert result.returncode == 2 and "--dataset URN, or pass --all" in result.stderr


def test_exactly_once_is_refused_for_an_at_least_once_writer(tmp_path: Path) -> None:
    job = example_job(tmp_path, writer={"class": "gobblin_py.testing.faults:AtLeastOnceWriter"})
    write_job(tmp_path, job)
    refused = cli(["validate", "job.yaml"], tmp_path)
    assert refused.returncode == 2
    assert "writer.class: gobblin_py.testing.faults:AtLeastOnceWriter supports only at_least_once" in refused.stderr
    job["job"]["delivery"] = "at_least_once"
    write_job(tmp_path, job)
    assert cli(["validate", "job.yaml"], tmp_path).returncode == 0
    assert cli(RUN, tmp_path).returncode == 0
    assert StateStore(tmp_path / "work", "t").watermarks()["clicks"]
