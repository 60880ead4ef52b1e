"""`gobblin-py plan` says where a run's tasks would run (the driver or Spark) and each task's estimated size."""

from __future__ import annotations

import json
from pathlib import Path

from support.jobs import example_job, run_cli, write_job


def test_plan_says_a_small_run_stays_in_the_driver_and_a_forced_one_goes_to_spark(tmp_path: Path) -> None:
    write_job(tmp_path, example_job(tmp_path))
    shown = run_cli("plan", "job.yaml", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert ("tasks run in the driver: about 272.7 KiB, read natively or in tasks too few for Spark's slots, so that "
            "about 152.8 KiB count against spark.in_driver_below (16.0 MiB)") in shown.stdout  # its largest task weighs less
    assert "(about 8.1 KiB)" in shown.stdout  # orders-2026-01-02.csv's 8,324 bytes (a task of its own)
    assert "    clicks  clicks-2026-01-05.jsonl  start → " in shown.stdout  # a packed task lists each of its files

    write_job(tmp_path, example_job(tmp_path, spark__in_driver_below="off"))
    forced = json.loads(run_cli("plan", "job.yaml", "--json", cwd=tmp_path).stdout)
    assert forced["runs_in"] == "local[2]"
    sizes = sorted(size for t in forced["tasks"] for w in t["workunits"]
                   for size in ([high for _, high in w["packed_keys"].values()] if "packed_keys" in w else [w["estimated_bytes"]]))
    files = sorted(p.stat().st_size for p in (tmp_path / "data").rglob("*.*"))
    assert sizes == files
