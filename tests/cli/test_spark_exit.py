"""A run on a local master ends without waiting for SparkContext.stop (about 1 s): its JVM, left to stop the
context in its own shutdown hooks when this process's end closes its stdin, is gone soon after."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.jobs import example_job, write_job

pytestmark = pytest.mark.spark


def _children(pid: int) -> set[int]:
    """Every live descendant of `pid` (from /proc)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _java(pid: int) -> bool:
    try:
        return b"java" in Path(f"/proc/{pid}/cmdline").read_bytes()[:200]
    except OSError:  # gone already
        return False


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _run_watching_jvms(tmp: Path) -> tuple[str, str, set[int]]:
    """`gobblin-py run job.yaml` in tmp, succeeded: its output, its errors, and every JVM seen under it."""
    proc = subprocess.Popen([sys.executable, "-m", "gobblin_py.cli.main", "run", "job.yaml"], cwd=tmp,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    jvms: set[int] = set()
    while proc.poll() is None:
        jvms |= {p for p in _children(proc.pid) if _java(p)}
        time.sleep(0.1)
    out, err = proc.communicate()
    assert proc.returncode == 0, out + err
    return out, err, jvms


def _gone_within_30_s(jvms: set[int]) -> bool:
    deadline = time.monotonic() + 30
    while any(_alive(p) for p in jvms) and time.monotonic() < deadline:
        time.sleep(0.2)
    return not any(_alive(p) for p in jvms)


def test_a_local_run_exits_and_its_jvm_follows(tmp_path: Path) -> None:
    # on Spark, however small the run; without the class archive, whose first recording is dumped at the JVM's exit
    write_job(tmp_path, example_job(tmp_path, spark__in_driver_below=0, spark__class_archive=False))
    out, err, jvms = _run_watching_jvms(tmp_path)
    assert "SUCCEEDED" in out and "Traceback" not in out + err
    assert jvms, "no Spark JVM was seen under the run"
    assert _gone_within_30_s(jvms), "the run's JVM outlived it by 30 s"


def test_after_a_run_on_spark_the_next_starts_it_early_and_a_small_plan_still_runs_in_the_driver(tmp_path: Path) -> None:
    """The last run waited for Spark: the next starts it while it recovers and plans. Its plan, one small new file,
    runs in the driver all the same; the JVM started early ends with the run, not waited for."""
    write_job(tmp_path, example_job(tmp_path, spark__in_driver_below=0, spark__class_archive=False))
    _run_watching_jvms(tmp_path)
    new = tmp_path / "data" / "clicks" / "clicks-2026-01-06.jsonl"
    new.write_text('{"id": 900001, "ts": 1767657600000, "user": "u0001", "kind": "click", "amount": null, "country": "US"}\n')
    write_job(tmp_path, example_job(tmp_path, spark__class_archive=False, logging={"level": "DEBUG"}))
    out, err, jvms = _run_watching_jvms(tmp_path)
    assert "starting Spark while recovering and planning (the last run ran on Spark)" in err
    assert "running 1 task(s) in the driver, not on Spark" in err and "clicks   committed" in out
    assert _gone_within_30_s(jvms), "the early JVM outlived the run by 30 s"
