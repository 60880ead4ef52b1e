"""What a user sees by default: `run` prints its summary (and one line when Spark starts, since the wait that follows is
Spark's); its log lines wait behind -v. `status` names the source it waits on, and waits no longer than --lag-timeout."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import pytest
from support.jobs import REPO, on_spark, run_cli


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "jobs", tmp_path / "jobs")
    return tmp_path


def test_a_run_prints_its_summary_and_nothing_else(checkout: Path) -> None:
    done = run_cli("run", "jobs/example.yaml", cwd=checkout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr == ""  # small: its tasks run in the driver, Spark never starts, no log line
    lines = done.stdout.splitlines()
    assert lines[0].startswith("job example run ") and lines[-1].startswith("SUCCEEDED job example run ")
    assert [line.split()[0] for line in lines[1:-1]] == ["dataset", "clicks", "orders"]


def test_verbose_shows_the_runs_log_lines(checkout: Path) -> None:
    done = run_cli("run", "jobs/example.yaml", "-v", cwd=checkout)
    assert done.returncode == 0
    assert "INFO gobblin_py.runtime.runner: planned 4 work units in 4 tasks" in done.stderr
    assert "dataset clicks: committed, 2000 records written, 5 files" in done.stderr


def test_a_job_can_ask_for_its_log_lines(checkout: Path) -> None:
    job = checkout / "jobs" / "example.yaml"
    job.write_text(job.read_text() + "logging:\n  level: INFO\n")
    done = run_cli("run", "jobs/example.yaml", cwd=checkout)
    assert done.returncode == 0 and "planned 4 work units in 4 tasks" in done.stderr


@pytest.mark.spark
def test_a_run_on_spark_says_spark_is_starting_in_one_line(checkout: Path) -> None:
    on_spark(checkout / "jobs" / "example.yaml")
    done = run_cli("run", "jobs/example.yaml", "--master", "local[2]", cwd=checkout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr.splitlines() == ["starting Spark (local[2])…"]
    assert "clicks   committed       2001     2000" in done.stdout


def test_status_names_the_source_it_waits_on_and_caps_the_wait(checkout: Path) -> None:
    with socket.socket() as free:  # a port nothing listens on: a broker that is down
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    job = checkout / "jobs" / "kafka-to-avro.yaml"
    job.write_text(job.read_text().replace("127.0.0.1:9092", f"127.0.0.1:{port}"))
    done = run_cli("status", "jobs/kafka-to-avro.yaml", "--lag-timeout", "1", "--json", cwd=checkout)
    assert f"job kafka-to-avro: waiting on source kafka (127.0.0.1:{port}), at most 1 s…" in done.stderr
    [view] = json.loads(done.stdout)
    errors = {d["lag"]["error"] for d in view["datasets"]}
    assert errors == {f"not measured: source kafka (127.0.0.1:{port}) did not answer within 1 s"}, errors
    assert "source source" not in done.stdout + done.stderr
