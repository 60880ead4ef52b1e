"""Benchmark: the exactly-once commit against a plain rename loop, and recovery of pending steps.

    .venv/bin/python scripts/bench_commit.py [--datasets 1000] [--files 10] [--rounds 3] [--spark]

In one run, alternating: (1) the exactly-once commit of D datasets × F files (durable store write,
fs_rename steps, watermark and state steps, record removal; datasets committed 4 at a time as a run
does) into new nested partition directories `<ds>/2026/01/<dd>`, every new directory fsynced in its
parent, and (1b) the same into directories that already exist (the cost of that durability); (2) a plain rename loop with no store and no fsync; (3) the same loop with one directory fsync
per dataset (the least a durable publisher does). Then the recovery of D pending sequences of F steps
(10,000 steps by default) as the start of a run does it: in 4 driver threads, and in one (sequential).
With --spark, the commit and the recovery also run as Spark tasks on local[2] (4 groups of datasets).
Prints each time, the ratios (each against the sequential path measured in the same run), the cost
per step next to one measured fsync, and writes scripts/results/bench_commit.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # Spark binds to 127.0.0.1 only

from bench_results import save  # noqa: E402  (scripts/ is on sys.path: these run as scripts)

from gobblin_py.commit.protocol import commit_sequence  # noqa: E402
from gobblin_py.commit.recovery import recover  # noqa: E402
from gobblin_py.commit.sequence import CommitSequence  # noqa: E402
from gobblin_py.commit.store import CommitStepStore  # noqa: E402
from gobblin_py.durable import fsync_dir  # noqa: E402
from gobblin_py.testing.commits import publish_sequences, published_path, task_output  # noqa: E402

JOB = "bench"
PAYLOAD = os.urandom(4096)  # the fsync probe's writes


def sequences(root: Path, task_files: list[list[Path]]) -> list[CommitSequence]:
    return publish_sequences(root, JOB, task_files)


def exactly_once(root: Path, task_files: list[list[Path]], threads: int = 4, existing_dirs: bool = False) -> float:
    """The commit; each dataset publishes into new partition directories `<ds>/2026/01/<dd>`, each made durable
    in its parent, unless `existing_dirs` (made, and synced, before the clock starts: what that costs)."""
    store = CommitStepStore(root)
    seqs = sequences(root, task_files)
    if existing_dirs:
        for files in task_files:
            for p in files:
                published_path(root, p).parent.mkdir(parents=True, exist_ok=True)
        os.sync()
    t0 = time.perf_counter()

    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(lambda seq: commit_sequence(store, seq), seqs))
    return time.perf_counter() - t0


def exactly_once_on_executors(root: Path, task_files: list[list[Path]], sc: object) -> float:
    from gobblin_py.commit.distributed import commit_many, default_groups
    from gobblin_py.runtime.executors.spark import SparkTasks

    seqs = sequences(root, task_files)
    t0 = time.perf_counter()
    tasks = SparkTasks(sc)
    outcome = commit_many(tasks, CommitStepStore(root), seqs, groups=default_groups(tasks))
    took = time.perf_counter() - t0
    assert all(err is None for err in outcome.values()), outcome
    return took


def plain_rename(root: Path, task_files: list[list[Path]], durable: bool) -> float:
    t0 = time.perf_counter()
    for files in task_files:
        dirs = set()
        for p in files:
            dst = published_path(root, p)
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.rename(p, dst)
            dirs.add(dst.parent)
        if durable:
            for d in dirs:
                fsync_dir(d)
    return time.perf_counter() - t0


def recovery(root: Path, task_files: list[list[Path]], threads: int = 4, sc: object = None) -> float:
    """Replay D pending sequences (none of their steps run) as the start of a run does: in `threads`
    driver threads, or with `sc` as Spark tasks (each loads its datasets' records from the store)."""
    from gobblin_py.commit.distributed import default_groups, recover_many
    from gobblin_py.runtime.executors.spark import SparkTasks

    store = CommitStepStore(root)
    for seq in sequences(root, task_files):
        store.put(seq)
    t0 = time.perf_counter()
    if sc is None:
        report = recover(store, JOB, max_attempts=3, parallelism=threads)
    else:
        tasks = SparkTasks(sc)
        report = recover_many(tasks, CommitStepStore(root), JOB, max_attempts=3, groups=default_groups(tasks))
    took = time.perf_counter() - t0
    assert len(report.datasets) == len(task_files) and not report.blocked and not store.datasets(JOB), report.blocked
    return took


def one_fsync(root: Path) -> float:
    p = root / "fsync-probe"
    times = []
    with open(p, "wb") as f:
        for _ in range(50):
            f.write(PAYLOAD)
            f.flush()
            t0 = time.perf_counter()
            os.fsync(f.fileno())
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", type=int, default=1000)
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", type=Path, default=REPO / "work", help="where to write (the disk being measured)")
    ap.add_argument("--spark", action="store_true", help="also commit as Spark tasks on local[2] (session started before timing)")
    args = ap.parse_args()
    sc = None
    if args.spark:
        from pyspark.sql import SparkSession

        os.environ["PYSPARK_PYTHON"] = sys.executable
        sc = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false").getOrCreate().sparkContext
        sc.setLogLevel("ERROR")
        sc.parallelize(range(2), 2).map(lambda x: __import__("gobblin_py.commit.distributed")).collect()  # warm the workers
    args.dir.mkdir(parents=True, exist_ok=True)
    measures = [
        ("plain_rename_s", lambda root, tf: plain_rename(root, tf, False)),
        ("exactly_once_s", exactly_once),
        ("exactly_once_existing_dirs_s", lambda root, tf: exactly_once(root, tf, existing_dirs=True)),
        ("durable_rename_s", lambda root, tf: plain_rename(root, tf, True)),
        ("exactly_once_sequential_s", lambda root, tf: exactly_once(root, tf, threads=1)),
        *([("exactly_once_executors_s", lambda root, tf: exactly_once_on_executors(root, tf, sc))] if sc else []),
        ("recovery_s", recovery),
        ("recovery_sequential_s", lambda root, tf: recovery(root, tf, threads=1)),
        *([("recovery_executors_s", lambda root, tf: recovery(root, tf, sc=sc))] if sc else []),
    ]
    results: dict[str, list[float]] = {name: [] for name, _ in measures}
    for r in range(args.rounds):
        for name, fn in measures:
            root = Path(tempfile.mkdtemp(prefix="bench-commit-", dir=args.dir))
            try:
                took = fn(root, task_output(root, args.datasets, args.files))
                results[name].append(took)
                print(f"round {r + 1}: {name:<26} {took:7.3f}s", flush=True)
            finally:
                shutil.rmtree(root, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in results.items()}
    per_dataset_steps = args.files + 2
    steps = args.datasets * per_dataset_steps
    fsync_s = one_fsync(args.dir)
    summary = {
        "datasets": args.datasets, "files_per_dataset": args.files,
        **{k: round(v, 4) for k, v in med.items()},
        "ratio_exactly_once_vs_plain_rename": med["exactly_once_s"] / med["plain_rename_s"],
        "ratio_exactly_once_vs_durable_rename": med["exactly_once_s"] / med["durable_rename_s"],
        "ratio_new_partition_dirs_vs_existing": med["exactly_once_s"] / med["exactly_once_existing_dirs_s"],
        "speedup_threads_vs_sequential": med["exactly_once_sequential_s"] / med["exactly_once_s"],
        **({"speedup_executors_vs_sequential": med["exactly_once_sequential_s"] / med["exactly_once_executors_s"]} if sc else {}),
        "ms_per_step": med["exactly_once_s"] / steps * 1000,
        "recovery_steps": steps, "recovery_ms_per_step": med["recovery_s"] / steps * 1000,
        "speedup_recovery_threads_vs_sequential": med["recovery_sequential_s"] / med["recovery_s"],
        **({"speedup_recovery_executors_vs_sequential": med["recovery_sequential_s"] / med["recovery_executors_s"]} if sc else {}),
        "one_fsync_ms": fsync_s * 1000,
    }
    print(json.dumps(summary, indent=2))
    save("bench_commit", {"summary": summary, "rounds": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
