"""`compaction.schedule`: `gobblin-py schedule` runs the job's compaction on its own cron, as `<job>:compact`."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from compaction.compaction_jobs import add_input, avro_files, ingest, make_job, partition, read_partition


def _compacted(day: Path) -> bool:
    names = avro_files(day) if day.is_dir() else []
    return len(names) == 1 and names[0].startswith("compacted-")


def _until(args: list[str], cwd: Path, done: Callable[[], bool], seconds: float = 60) -> tuple[int, str]:
    """`gobblin-py ARGS` until `done()` holds (or `seconds` pass), then SIGTERM: its exit code and stderr."""
    proc = subprocess.Popen([sys.executable, "-m", "gobblin_py.cli.main", *args], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + seconds
        while not done() and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    return proc.returncode, err


@pytest.mark.parametrize("mode", [["--isolated"], []], ids=["child", "in-thread"])
def test_the_scheduler_runs_a_jobs_compaction_on_compaction_schedule(tmp_path: Path, mode: list[str]) -> None:
    make_job(tmp_path, schedule="* * * * * ?")  # no job.schedule: only the compaction is scheduled
    ingest(tmp_path)
    day1 = partition(tmp_path)
    assert len(avro_files(day1)) == 4
    code, err = _until(["schedule", str(tmp_path / "job.yaml"), *mode, "--in-process"], tmp_path,
                       lambda: _compacted(day1))
    assert code == 0, err
    assert "scheduled c:compact (* * * * * ?)" in err
    assert avro_files(day1)[0].startswith("compacted-") and set(read_partition(day1).values()) == {1}
    assert "c:compact run 1 finished with exit code 0" in err


def test_a_continuous_run_compacts_between_checkpoints_on_compaction_schedule(tmp_path: Path) -> None:
    make_job(tmp_path, schedule="* * * * * ?")
    job = yaml.safe_load((tmp_path / "job.yaml").read_text())
    job["job"].update({"mode": "continuous", "checkpoint_interval": "300ms"})
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(job))
    day1 = partition(tmp_path)
    def compacted_with_late() -> bool:
        if not _compacted(day1):
            return False
        if not (tmp_path / "data" / "clicks" / "late.jsonl").exists():  # the next checkpoint ingests it, the next compaction merges it
            add_input(tmp_path, "late", range(9000, 9010))
        return 9000 in read_partition(day1)

    code, err = _until(["run", "job.yaml", "--in-process"], tmp_path, compacted_with_late)
    assert code == 0, err
    assert "partitions compacted" in err
    seen = read_partition(day1)
    assert set(seen) == set(range(800)) | set(range(9000, 9010)) and set(seen.values()) == {1}
    assert avro_files(day1)[0].startswith("compacted-")
