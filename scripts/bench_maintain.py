"""Benchmark: `gobblin-py maintain` on an Iceberg table of 10,000 snapshots (issue 32).

    .venv/bin/python scripts/bench_maintain.py [--snapshots 10000] [--keep-last 10]

Runs jobs/example-iceberg.yaml once (from a copy of jobs/, catalog and warehouse in a scratch directory; unpartitioned,
as pyiceberg appends to a partitioned table only with pyiceberg-core, not installed here), then adds
appends of one row each to the `clicks` table with pyiceberg until it has `--snapshots` snapshots (a thousand appends
a transaction: one metadata file each), as a streaming job that committed every minute for a week without expiry
leaves it. Then times, each in a child process: `maintain --expire-snapshots-older-than 1s --keep-last N` dry (it
lists what it would delete), the same with `--yes`, and a second `--yes` that finds nothing to do; and, as the floor,
pyiceberg's own expiry of the same snapshot ids on a copy of the table (metadata only: it deletes no file). The table
is read back with pyiceberg before and after: the same rows, and N snapshots left. Writes
scripts/results/bench_maintain-<N>.json.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench_results import save  # noqa: E402

TABLE = "events.clicks"


def catalog(tmp: Path) -> Any:
    from pyiceberg.catalog import load_catalog

    return load_catalog("gobblin_py", type="sql", uri=f"sqlite:///{tmp / 'work' / 'iceberg' / 'catalog.db'}")


def cli(tmp: Path, *args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "gobblin_py.cli.main", *args], cwd=tmp, capture_output=True, text=True)
    took = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"gobblin-py {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return took, done


def grow(tmp: Path, snapshots: int) -> float:
    """Appends of one row each until the table has `snapshots` snapshots; seconds taken."""
    table = catalog(tmp).load_table(TABLE)
    row = table.scan(limit=1).to_arrow()
    t0 = time.perf_counter()
    while (have := len(table.metadata.snapshots)) < snapshots:
        with table.transaction() as tx:
            for _ in range(min(1000, snapshots - have)):
                tx.append(row)
        table = catalog(tmp).load_table(TABLE)
        print(f"  {len(table.metadata.snapshots)} snapshots ({time.perf_counter() - t0:.0f}s)", flush=True)
    return time.perf_counter() - t0


def ids(tmp: Path) -> Counter:
    return Counter(catalog(tmp).load_table(TABLE).scan().to_arrow().column("id").to_pylist())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--snapshots", type=int, default=10_000)
    ap.add_argument("--keep-last", type=int, default=10)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-maintain-") as scratch:
        tmp = Path(scratch) / "job"
        shutil.copytree(REPO / "jobs", tmp / "jobs")
        job = tmp / "jobs" / "example-iceberg.yaml"
        # unpartitioned: pyiceberg appends to a partitioned table only with pyiceberg-core, not installed here
        text = "".join(line for line in job.read_text().splitlines(True) if not line.strip().startswith("partition:"))
        job.write_text(text + "  warehouse: ./warehouse\n")
        cli(tmp, "run", str(job), "--in-process", "-q")
        grow_s = grow(tmp, args.snapshots)
        before = ids(tmp)
        time.sleep(1.5)
        backup = Path(scratch) / "backup"  # the catalog holds absolute paths: the floor runs on the table, restored after
        shutil.copytree(tmp, backup, symlinks=True)
        expire = ["maintain", str(job), "--expire-snapshots-older-than", "1s", "--keep-last", str(args.keep_last)]
        dry_s, dry = cli(tmp, *expire)
        listed = dry.stdout.count("snapshot ")

        table = catalog(tmp).load_table(TABLE)
        newest = sorted(table.metadata.snapshots, key=lambda s: s.timestamp_ms)[-args.keep_last:]
        old = [s.snapshot_id for s in table.metadata.snapshots if s not in newest]
        t0 = time.perf_counter()
        table.maintenance.expire_snapshots().by_ids(old).commit()
        floor_s = time.perf_counter() - t0
        shutil.rmtree(tmp)
        shutil.copytree(backup, tmp, symlinks=True)  # back to the table of N snapshots

        yes_s, yes = cli(tmp, *expire, "--yes")
        again_s, again = cli(tmp, *expire, "--yes")
        after = ids(tmp)
        left = len(catalog(tmp).load_table(TABLE).metadata.snapshots)
    verdict = "ok" if after == before and left == args.keep_last else "WRONG"
    summary = {"snapshots": args.snapshots, "keep_last": args.keep_last, "grow_s": grow_s, "rows": sum(before.values()),
               "dry_run_s": dry_s, "dry_run_listed_lines": listed, "apply_s": yes_s, "second_apply_s": again_s,
               "pyiceberg_metadata_only_expiry_s": floor_s, "snapshots_left": left, "verdict": verdict,
               "apply_output_tail": yes.stdout.strip().splitlines()[-3:], "second_output_tail": again.stdout.strip().splitlines()[-2:]}
    for k, v in summary.items():
        print(f"{k}: {v}")
    save(f"bench_maintain-{args.snapshots}", summary)
    return 0 if verdict == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
