"""Relative paths in a job file are relative to the working directory; a missing one says so, names the
resolved path, and names the directory to run from when the path exists beside (or above) the job file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gobblin_py.config import load_job
from gobblin_py.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parents[2]
SCHEMA = REPO_ROOT / "jobs" / "schemas" / "event.avsc"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`<tmp>/proj/job.yaml` reading `data` and `schemas/event.avsc`, both relative, both in proj/."""
    monkeypatch.delenv("GOBBLIN_PY_DEFAULTS", raising=False)
    proj = tmp_path / "proj"
    (proj / "data" / "events").mkdir(parents=True)
    (proj / "schemas").mkdir()
    (proj / "schemas" / "event.avsc").write_bytes(SCHEMA.read_bytes())
    (proj / "job.yaml").write_text(yaml.safe_dump({
        "job": {"name": "rel", "work_dir": "work"},
        "source": {"class": "files", "path": "data"},
        "converters": [{"class": "json_to_avro", "schema": "schemas/event.avsc"}],
        "writer": {"class": "jsonl"},
        "publisher": {"final_dir": "output"},
    }))
    return proj


def test_run_from_the_job_files_directory_resolves_there(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project)
    job = load_job("job.yaml")
    assert job.source.settings.path == str(project / "data")
    assert job.job.work_dir == project / "work"


def test_run_from_elsewhere_names_the_resolved_path_the_rule_and_where_to_run_from(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = project.parent
    monkeypatch.chdir(elsewhere)
    with pytest.raises(ConfigError) as info:
        load_job(project / "job.yaml")
    lines = str(info.value).splitlines()
    source = next(line for line in lines if line.strip().startswith("source.path:"))
    assert f"directory not found: {elsewhere / 'data'} " in source
    assert f"'data' is relative, and relative paths in a job file are relative to the working directory, {elsewhere}" in source
    assert f"{project / 'data'} exists: did you mean to run from {project}?" in source
    schema = next(line for line in lines if line.strip().startswith("converters[0].schema:"))
    assert f"file not found: {elsewhere / 'schemas' / 'event.avsc'} " in schema
    assert f"did you mean to run from {project}?" in schema


def test_the_directory_to_run_from_may_be_above_the_job_file(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """jobs/example.yaml names `jobs/data`: it runs from the checkout, the job file's parent."""
    jobs = project / "jobs"
    jobs.mkdir()
    (jobs / "job.yaml").write_text((project / "job.yaml").read_text().replace("path: data", "path: proj/data"))
    monkeypatch.chdir(project)
    with pytest.raises(ConfigError) as info:
        load_job(jobs / "job.yaml")
    assert f"did you mean to run from {jobs}?" not in str(info.value)
    assert f"{project.parent / 'proj' / 'data'} exists: did you mean to run from {project.parent}?" in str(info.value)


def test_a_path_found_nowhere_or_absolute_gets_no_guess(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project.parent)
    text = (project / "job.yaml").read_text()
    (project / "job.yaml").write_text(text.replace("path: data", "path: nowhere").replace("schemas/event.avsc", str(project / "no.avsc")))
    with pytest.raises(ConfigError) as info:
        load_job(project / "job.yaml")
    message = str(info.value)
    assert f"directory not found: {project.parent / 'nowhere'} ('nowhere' is relative, and relative paths in a job file are " \
           f"relative to the working directory, {project.parent})" in message
    assert f"file not found: {project / 'no.avsc'}\n" in message + "\n"  # absolute: no rule to explain
    assert "did you mean to run from" not in message


def test_cli_names_it_without_a_traceback(project: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "GOBBLIN_PY_DEFAULTS"}
    proc = subprocess.run([sys.executable, "-m", "gobblin_py.cli.main", "validate", str(project / "job.yaml")],
                          cwd=project.parent, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"did you mean to run from {project}?" in proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
