"""Profiles one mysql_cdc run applying `--changes` changes (inserts and updates, as `bench_mysql_cdc.py --phase stream`
writes them) into an Iceberg upsert table, the run in this process (tasks in the driver) sampled by a thread of ours
(`profile_cdc.sample_in_process`): where the apply path's time goes (the binlog decode by mysql-replication, the
records, rows → Arrow, the upsert commit). Prints the shares of the named stages and the functions by own samples.

    python scripts/profile_mysql_cdc.py --changes 100000
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import scratch_dir
from bench_mysql_cdc import PASSWORD, PASSWORD_ENV, LocalMariaDB, cdc_job, fill, gobblin, write_changes
from profile_cdc import sample_in_process, summary

STAGES = {  # (file part, function): the samples with it on the stack
    "decode: binlog read (events.py, mysql-replication) + rows": ("mysql_cdc/binlog.py", "scan"),
    "  socket reads, anywhere (mostly the binlog)": ("/socket.py", "readinto"),
    "  of which row events parsed from the packets": ("mysql_cdc/events.py", "_rows"),
    "  of which the row values decoded here": ("mysql_cdc/rows.py", "images"),
    "records (extractor, decode included)": ("mysql_cdc/extractor.py", "read_batches"),
    "record pipeline (task: rows → Arrow, writer)": ("runtime/task/pipeline.py", "run"),
    "publish: upsert commit (whole)": ("iceberg/upsert_commit.py", "commit_upsert"),
    "  read and reduce the changes by key": ("iceberg/upsert.py", "read_changes"),
    "  copy-on-write rewrite (scan + write files)": ("iceberg/upsert.py", "rewrite"),
    "  snapshot commit": ("iceberg/upsert.py", "commit_snapshot"),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--changes", type=int, default=100_000)
    p.add_argument("--initial", type=int, default=100_000)
    p.add_argument("--per-txn", type=int, default=10)
    p.add_argument("--top", type=int, default=35)
    args = p.parse_args()
    tmp = scratch_dir("profile-mysql-cdc-")
    with LocalMariaDB(binlog=True) as maria:
        fill(maria, args.initial)
        publisher = {"class": "iceberg", "table": "db.acct", "warehouse": str(tmp / "warehouse"), "mode": "upsert",
                     "key": ["id"], "order_by": ["_pos", "_seq"], "delete_when": {"column": "_op", "equals": ["delete"]},
                     "truncate_when": {"column": "_op", "equals": ["truncate"]}}
        (tmp / "job.yaml").write_text(yaml.safe_dump(cdc_job(tmp, maria, publisher)))
        for _ in range(2):  # the snapshot's chunks, then the stream that follows them
            code, _, text = gobblin(["run", "job.yaml", "--in-process"], tmp)
            if code:
                raise SystemExit(f"a first run failed: {text[-2000:]}")
        changes = write_changes(maria, args.changes, args.per_txn, args.initial)
        os.environ[PASSWORD_ENV] = PASSWORD
        started = time.monotonic()
        failed = sample_in_process(tmp / "job.yaml", tmp / "run.txt")
        took = time.monotonic() - started
        if failed:
            raise SystemExit("the profiled run failed")
    summary(tmp / "run.txt", f"run: {took:.1f} s wall for {changes} changes ({changes / took:,.0f}/s); ", args.top,
            STAGES)


if __name__ == "__main__":
    main()
