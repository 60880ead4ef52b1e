"""A copied job file that kept `job.name` and `work_dir` shares the original's state: the run says so by name (the
datasets in the state its source no longer lists, and the other job file), instead of calling them "no new data"."""

from __future__ import annotations

import shutil
from pathlib import Path

from support.jobs import REPO, run_cli


def _copied_as_readme_says(tmp_path: Path) -> Path:
    """The user's directory: jobs/ as shipped, their own data in `mydata/events`, and `jobs/mine.yaml`, a copy of
    jobs/example.yaml with only `source.path` changed (its job.name and work_dir kept)."""
    shutil.copytree(REPO / "jobs", tmp_path / "jobs")
    (tmp_path / "mydata" / "events").mkdir(parents=True)
    shutil.copy(REPO / "jobs" / "data" / "clicks" / "clicks-2026-01-01.jsonl", tmp_path / "mydata" / "events")
    example = (tmp_path / "jobs" / "example.yaml").read_text()
    assert "  path: jobs/data " in example
    (tmp_path / "jobs" / "mine.yaml").write_text(example.replace("  path: jobs/data ", "  path: mydata "))
    return tmp_path


def test_a_copied_job_names_the_datasets_it_does_not_list_and_the_other_job_file(tmp_path: Path) -> None:
    cwd = _copied_as_readme_says(tmp_path)
    first = run_cli("run", "jobs/example.yaml", "--in-process", cwd=cwd)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "not in source" not in first.stdout

    mine = run_cli("run", "jobs/mine.yaml", "--in-process", cwd=cwd)
    assert mine.returncode == 0, mine.stdout + mine.stderr
    rows = {line.split()[0]: line.split("  ")[1:] for line in mine.stdout.splitlines()[2:] if line.startswith("  ")
            and line.split()[0] in ("clicks", "orders", "events")}
    assert "no new data" not in mine.stdout
    assert "in state, not in the source: clicks, orders. Another job with this name? `job.name` keys the state" in mine.stdout
    assert sorted(rows) == ["clicks", "events", "orders"]
    assert "committed" in " ".join(rows["events"])
    assert f"was last run from {cwd / 'jobs' / 'example.yaml'}, this run from {cwd / 'jobs' / 'mine.yaml'}" in mine.stderr
    assert "give this one its own job.name" in mine.stderr

    again = run_cli("run", "jobs/mine.yaml", "--in-process", cwd=cwd)  # the same file again: no warning about files
    assert again.returncode == 0
    assert "was last run from" not in again.stderr
    assert "in state, not in the source: clicks, orders." in again.stdout


def test_a_job_whose_source_lists_every_dataset_in_its_state_says_no_new_data(tmp_path: Path) -> None:
    cwd = _copied_as_readme_says(tmp_path)
    assert run_cli("run", "jobs/example.yaml", "--in-process", cwd=cwd).returncode == 0
    again = run_cli("run", "jobs/example.yaml", "--in-process", cwd=cwd)
    assert again.stdout.count("no new data") == 2 and "not in the source" not in again.stdout
    assert "was last run from" not in again.stderr
