"""This project's test helpers: example job settings in a temp dir, the real CLI in a child process
(the output readers are gobblin_py.testing.outputs, which plugin authors reuse too)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]  # tests/support/jobs.py -> the checkout
EXAMPLE_DATA = REPO / "jobs" / "data"
EVENT_SCHEMA = REPO / "jobs" / "schemas" / "event.avsc"


def example_job(tmp: Path, **overrides: Any) -> dict[str, Any]:
    """The example job's settings with every path inside `tmp` (data copied there)."""
    data = tmp / "data"
    if not data.exists():
        shutil.copytree(EXAMPLE_DATA, data)
    job: dict[str, Any] = {
        "job": {"name": "t", "work_dir": str(tmp / "work"), "max_task_retries": 1},
        "source": {"class": "files", "path": str(data)},
        "converters": [{"class": "json_to_avro", "schema": str(EVENT_SCHEMA)}],
        "quality": {"row": [{"class": "required_fields", "type": "ERR_FILE", "fields": ["id", "ts"]}],
                    "task": [{"class": "row_count", "type": "FAIL"}]},
        "writer": {"class": "avro", "codec": "deflate",
                   "partition": {"column": "ts", "granularity": "DAY", "pattern": "yyyy/MM/dd"}},
        "publisher": {"final_dir": str(tmp / "output")},
        "spark": {"master": "local[2]"},
    }
    for key, value in overrides.items():
        section, _, sub = key.partition("__")
        if sub:
            job.setdefault(section, {})[sub] = value
        elif value is None:
            job.pop(section, None)
        else:
            job[section] = value
    return job


def write_job(tmp: Path, job: dict[str, Any], name: str = "job.yaml") -> Path:
    path = tmp / name
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    return path


def on_spark(job_file: Path) -> Path:
    """Set `spark.in_driver_below: 0` in a job file, so its tasks run on Spark however small its run (for tests about
    Spark itself: its JVM, its logs, its sessions)."""
    job = yaml.safe_load(job_file.read_text())
    job.setdefault("spark", {})["in_driver_below"] = 0
    job_file.write_text(yaml.safe_dump(job, sort_keys=False))
    return job_file


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """The real `gobblin-py` command in a child process."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "gobblin_py.cli.main", *args], cwd=cwd or REPO,
                          env=full_env, capture_output=True, text=True, timeout=timeout)
