"""Benchmark: one run's commit of D datasets of one file each on driver threads, by `job.commit_parallelism`.

    PYTHONPATH=. .venv/bin/python scripts/bench_commit_threads.py [--datasets 50] [--threads 4,16] [--rounds 5]

What a run's commit phase does in steady state (a postgres_cdc run over 50 tables, issue 45): each dataset's file
renamed into place, its watermark and state records rewritten (each a new numbered version, fsynced, then its
directory), the records written and removed in one batch per thread (`commit.distributed.commit_many` over
`ThreadTasks`). Each round commits a first run untimed (the records made), then times the next run's commit at
each thread count, alternating which goes first (the machine is shared: only figures of one round compare). Prints
the seconds and the ratio to the first count of `--threads`, with one fsync measured, and writes
scripts/results/bench_commit_threads.json.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench_commit import one_fsync  # noqa: E402  (scripts/ is on sys.path: these run as scripts)
from bench_results import save  # noqa: E402

from gobblin_py.commit.distributed import commit_many  # noqa: E402
from gobblin_py.commit.store import CommitStepStore  # noqa: E402
from gobblin_py.commit.tasks import ThreadTasks  # noqa: E402
from gobblin_py.testing.commits import publish_sequences, task_output  # noqa: E402

JOB = "bench"


def commit_run(root: Path, datasets: int, threads: int, run_id: str) -> float:
    """Seconds to commit run `run_id` (one new file a dataset) on `threads` threads, as `PublishPath.commit` does."""
    files = task_output(root, datasets, 1, run_id=run_id)
    for f in files:  # each run's file a name of its own in the published directory
        f[0].rename(f[0].with_name(f"{run_id}.avro"))
        f[0] = f[0].with_name(f"{run_id}.avro")
    seqs = publish_sequences(root, JOB, files, run_id=run_id)
    t0 = time.perf_counter()
    out = commit_many(ThreadTasks(threads), CommitStepStore(root), seqs, groups=threads)
    took = time.perf_counter() - t0
    assert all(e is None for e in out.values()), out
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", type=int, default=50)
    ap.add_argument("--threads", default="4,16", help="thread counts compared (the first is the baseline)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", type=Path, default=None, help="where to write (the disk being measured; default: a temp dir)")
    args = ap.parse_args()
    counts = [int(t) for t in args.threads.split(",")]
    times: dict[int, list[float]] = {n: [] for n in counts}
    for r in range(args.rounds):
        for n in (counts if r % 2 == 0 else counts[::-1]):
            root = Path(tempfile.mkdtemp(prefix="bench-commit-threads-", dir=args.dir))
            try:
                commit_run(root, args.datasets, n, "r0")
                times[n].append(commit_run(root, args.datasets, n, "r1"))
            finally:
                shutil.rmtree(root, ignore_errors=True)
        print(f"round {r + 1}: " + ", ".join(f"{n} threads {times[n][-1]:.3f} s" for n in counts), file=sys.stderr)
    probe = Path(tempfile.mkdtemp(prefix="bench-commit-threads-", dir=args.dir))
    try:
        fsync_s = one_fsync(probe)
    finally:
        shutil.rmtree(probe, ignore_errors=True)
    base = statistics.median(times[counts[0]])
    summary = {"datasets": args.datasets, "rounds": args.rounds, "one_fsync_ms": round(fsync_s * 1000, 2),
               **{f"threads_{n}_s": round(statistics.median(times[n]), 3) for n in counts},
               **{f"threads_{n}_ratio": round(statistics.median(times[n]) / base, 2) for n in counts[1:]}}
    print(summary)
    save("bench_commit_threads", {"summary": summary, "rounds": {str(n): [round(t, 3) for t in ts] for n, ts in times.items()}})


if __name__ == "__main__":
    main()
