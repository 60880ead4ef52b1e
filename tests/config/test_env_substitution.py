"""`${VAR}` and `${VAR:-default}` in job files: values from the environment, secrets never echoed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.jobs import example_job, write_job

from gobblin_py.config import load_job
from gobblin_py.config.env import substitute
from gobblin_py.errors import ConfigError


def test_every_string_value_takes_variables_defaults_and_a_literal_escape() -> None:
    done = substitute({"a": "${HOST}:${PORT:-9092}", "b": ["x-${HOST}"], "c": "$${HOST} stays", "n": 3},
                      {"HOST": "broker1"})
    assert done.data == {"a": "broker1:9092", "b": ["x-broker1"], "c": "${HOST} stays", "n": 3} and not done.problems


def test_a_job_file_reads_its_paths_from_the_environment(tmp_path: Path, monkeypatch) -> None:
    job = example_job(tmp_path, job={"name": "${JOB_NAME:-t}", "work_dir": "${WORK}"})
    job["source"]["path"] = "${DATA_DIR}"
    monkeypatch.setenv("WORK", str(tmp_path / "w"))
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    spec = load_job(write_job(tmp_path, job))
    assert spec.name == "t" and spec.job.work_dir == tmp_path / "w" and spec.source.settings.path == str(tmp_path / "data")


def test_an_unset_variable_names_the_key_and_the_variable(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("NOPE_DIR", raising=False)
    job = example_job(tmp_path)
    job["source"]["path"] = "${NOPE_DIR}"
    with pytest.raises(ConfigError) as err:
        load_job(write_job(tmp_path, job))
    assert "source.path: environment variable NOPE_DIR is not set" in str(err.value)


def test_a_secret_from_the_environment_is_never_echoed_by_validate(tmp_path: Path) -> None:
    (tmp_path / "secretplugins.py").write_text(
        "from gobblin_py.builtin.sources.files.source import FilesSource, FilesSettings\n"
        "class S(FilesSettings):\n    db_password: int\n"
        "class Src(FilesSource):\n    Settings = S\n")
    job = example_job(tmp_path)
    job["source"].update({"class": "secretplugins:Src", "db_password": "${DB_PASSWORD}"})
    write_job(tmp_path, job)
    done = subprocess.run([sys.executable, "-m", "gobblin_py.cli.main", "validate", "job.yaml"], cwd=tmp_path,
                          env={"DB_PASSWORD": "hunter2-not-a-number", "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "source.db_password" in done.stderr
    assert "hunter2" not in done.stderr + done.stdout and "***" in done.stderr
