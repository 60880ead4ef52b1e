"""A misspelled dataset on the command line gets the closest known ones (the one helper the job file loader uses too)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gobblin_py.state.store import StateStore, WatermarkFile
from gobblin_py.suggest import close_matches, did_you_mean


def test_the_helper_suggests_the_closest_names_only() -> None:
    assert did_you_mean("sorce", ["job", "source", "converters"]) == "did you mean 'source'?"
    assert did_you_mean("bootstrap_server", ["bootstrap_servers", "bootstrap_with_offset", "topics"]) == "did you mean 'bootstrap_servers'?"
    assert did_you_mean("Events", ["events", "orders"]) == "did you mean 'events'?"
    assert sorted(close_matches("order", ["orders", "ordera", "events"])) == ["ordera", "orders"]  # as likely: both
    assert did_you_mean("xyz", ["events", "orders"]) == ""
    assert did_you_mean("events", ["events"]) == ""  # a known name is no typo


@pytest.fixture
def job(tmp_path: Path) -> Path:
    """A job with committed watermarks for datasets `events` and `orders`."""
    (tmp_path / "data").mkdir()
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({
        "job": {"name": "k", "work_dir": str(tmp_path / "work")},
        "source": {"class": "files", "path": str(tmp_path / "data")},
        "writer": {"class": "jsonl"},
        "publisher": {"final_dir": str(tmp_path / "output")},
    }))
    store = StateStore(tmp_path / "work", "k")
    WatermarkFile(store.dir, "events").write({"0": 10})
    WatermarkFile(store.dir, "orders").write({"0": 5})
    return path


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "GOBBLIN_PY_DEFAULTS"}
    return subprocess.run([sys.executable, "-m", "gobblin_py.cli.main", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60)


def test_state_show_and_reset_suggest_the_dataset(job: Path) -> None:
    shown = _cli("state", "show", "job.yaml", "--dataset", "evnets", cwd=job.parent)
    assert shown.returncode == 2, shown.stdout + shown.stderr
    assert "no committed state for dataset 'evnets' (did you mean 'events'? known: events, orders)" in shown.stderr
    reset = _cli("state", "reset", "job.yaml", "--dataset", "order", cwd=job.parent)
    assert reset.returncode == 2, reset.stdout + reset.stderr
    assert "no committed state for dataset 'order' (did you mean 'orders'? known: events, orders); pass --new" in reset.stderr
    assert "Traceback" not in shown.stderr + reset.stderr
    assert StateStore(job.parent / "work", "k").watermarks() == {"events": {"0": 10}, "orders": {"0": 5}}


def test_recover_and_inspect_suggest_the_dataset(job: Path) -> None:
    recovered = _cli("recover", "job.yaml", "--dataset", "evnts", cwd=job.parent)
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    assert "evnts: nothing pending (did you mean 'events'?)" in recovered.stdout
    unknown = _cli("recover", "job.yaml", "--dataset", "zzz", cwd=job.parent)
    assert "zzz: nothing pending\n" in unknown.stdout
