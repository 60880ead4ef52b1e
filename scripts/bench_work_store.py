"""Benchmark: what a work directory on an object store costs a commit (issue 43), against a local one, in one run.

    .venv/bin/python scripts/bench_work_store.py [--datasets 1 100] [--files 4] [--rounds 2] [--recover 200]

For D datasets × F files, alternating each round: (a) the work directory local (commit log, watermarks, state and the
lease in a temp directory); (b) the same records on an S3 server (moto on 127.0.0.1) with the lease there too. The
task output and the published files stay local in both, so the difference is what the records on the store add:
each commit record written and removed, each step's lease check, each watermark and state read then written only
over the version read. Then the recovery of R pending datasets from each. Prints seconds, per-dataset costs and the
ratio of (b) to (a), and writes scripts/results/bench_work_store.json. moto answers slower than S3 itself, so the
ratios bound the cost on a real store from above.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from gobblin_py.commit.confinement import Confinement  # noqa: E402
from gobblin_py.commit.protocol import commit_sequence  # noqa: E402
from gobblin_py.commit.recovery import recover  # noqa: E402
from gobblin_py.commit.sequence import CommitSequence  # noqa: E402
from gobblin_py.commit.steps import DatasetStateCommitStep, HighWatermarkCommitStep  # noqa: E402
from gobblin_py.commit.store import CommitStepStore  # noqa: E402
from gobblin_py.fs.registry import configure  # noqa: E402
from gobblin_py.state.lease import Lease, Owner  # noqa: E402
from gobblin_py.testing.commits import publish_sequences, task_output  # noqa: E402
from bench_results import save  # noqa: E402  (scripts/ is on sys.path: these run as scripts)

JOB = "bench"


def sequences(files_root: Path, records: str, datasets: int, files: int, size: int) -> list[CommitSequence]:
    """The run's sequences, with their watermark and state steps writing under `records`."""
    seqs = publish_sequences(files_root, JOB, task_output(files_root, datasets=datasets, files=files, size=size))
    state_dir = f"{records.rstrip('/')}/state/{JOB}"
    for seq in seqs:
        for step in seq.steps:
            if isinstance(step, (HighWatermarkCommitStep, DatasetStateCommitStep)):
                step.state_dir = state_dir
    return seqs


def store_at(records: str, files_root: Path, lease: Lease) -> CommitStepStore:
    return CommitStepStore(records, confinement=Confinement.of([records, str(files_root)]), fence=lease.fence)


def commit(records: str, files_root: Path, datasets: int, files: int, filesystems: dict) -> float:
    lease = Lease.acquire(f"{records.rstrip('/')}/leases", JOB, Owner.here("bench", records), 60, filesystems=filesystems)
    store = store_at(records, files_root, lease)
    seqs = sequences(files_root, records, datasets, files, 4096)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda seq: commit_sequence(store, seq), seqs))
    took = time.perf_counter() - t0
    assert not store.datasets(JOB)
    lease.release()
    return took


def recovery(records: str, files_root: Path, datasets: int, filesystems: dict) -> float:
    lease = Lease.acquire(f"{records.rstrip('/')}/leases", JOB, Owner.here("bench", records), 600, filesystems=filesystems)
    store = store_at(records, files_root, lease)
    for seq in sequences(files_root, records, datasets, 1, 1024):
        store.put(seq)
    t0 = time.perf_counter()
    report = recover(store, JOB, max_attempts=3, parallelism=4)
    took = time.perf_counter() - t0
    assert len(report.datasets) == datasets and not report.blocked
    lease.release()
    return took


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", type=int, nargs="+", default=[1, 100])
    p.add_argument("--files", type=int, default=4)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--recover", type=int, default=200)
    args = p.parse_args()
    from support.s3_server import LocalS3

    results: dict = {"files_per_dataset": args.files, "rounds": args.rounds, "commit": {}}
    with LocalS3() as s3:
        configure(s3.options)  # as a job's `job.filesystems` does in its driver
        bucket = s3.new_bucket()

        def one(kind: str, n: int, body) -> float:  # noqa: ANN001
            files_root = Path(tempfile.mkdtemp(prefix=f"bench-store-{kind}-"))
            records = str(files_root / "work") if kind == "local" else f"s3://{bucket}/w{n}-{time.time_ns()}"
            try:
                return body(records, files_root)
            finally:
                shutil.rmtree(files_root, ignore_errors=True)

        for datasets in args.datasets:
            times: dict[str, list[float]] = {"local": [], "s3": []}
            for r in range(args.rounds):
                for kind in times:
                    times[kind].append(one(kind, datasets, lambda rec, root: commit(rec, root, datasets, args.files, s3.options)))
            med = {k: statistics.median(v) for k, v in times.items()}
            results["commit"][str(datasets)] = {"seconds": times, "median_s": med,
                                                "per_dataset_ms": {k: 1000 * v / datasets for k, v in med.items()},
                                                "ratio": med["s3"] / med["local"]}
            print(f"{datasets} dataset(s) × {args.files} files: work directory local {med['local']:.3f} s, on S3 (moto) "
                  f"{med['s3']:.3f} s ({med['s3'] / med['local']:.2f}×); per dataset {1000 * med['local'] / datasets:.1f} "
                  f"ms local, {1000 * med['s3'] / datasets:.1f} ms on S3")
        rec = {kind: one(kind, 0, lambda records, root: recovery(records, root, args.recover, s3.options))
               for kind in ("local", "s3")}
        results["recovery"] = {"datasets": args.recover, "seconds": rec, "ratio": rec["s3"] / rec["local"]}
        print(f"recovery of {args.recover} pending datasets: local {rec['local']:.2f} s, on S3 {rec['s3']:.2f} s "
              f"({rec['s3'] / rec['local']:.2f}×)")
    results["cpu_count"] = os.cpu_count()
    save("bench_work_store", results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
