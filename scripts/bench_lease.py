"""Benchmark: what the job's lease costs a commit (issue 43), against the same commit without a lease, in one run.

    .venv/bin/python scripts/bench_lease.py [--datasets 1 100] [--files 4] [--rounds 3] [--recover 1000]

For D datasets × F files (the commit protocol as a run drives it: durable record, fs_rename steps, watermark and state
steps, record removal, 4 datasets at a time), alternating each round: (a) no lease; (b) the lease in a local directory
(`<work_dir>/leases`, the default); (c) the lease on an S3 server (moto on 127.0.0.1, the store a multi-host job would
use). Every record write and every step first reads the lease (the fence), so (b) and (c) add one read per step.
Then the lease's own operations on each store (take, renew, release: median of 50), and the recovery of R pending
datasets with the lease on S3 against none. Prints seconds, per-dataset costs and ratios to (a) of the same round,
and writes scripts/results/bench_lease.json. moto is slower per request than S3 itself; the ratios bound what the
fence adds on a real store from above.
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

from bench_results import save  # noqa: E402  (scripts/ is on sys.path: these run as scripts)

from gobblin_py.commit.protocol import commit_sequence  # noqa: E402
from gobblin_py.commit.recovery import recover  # noqa: E402
from gobblin_py.commit.store import CommitStepStore  # noqa: E402
from gobblin_py.state.lease import Lease, Owner  # noqa: E402
from gobblin_py.testing.commits import publish_sequences, task_output  # noqa: E402

JOB = "bench"


def commit_all(store: CommitStepStore, seqs: list) -> float:
    """Seconds to commit `seqs`, 4 datasets at a time, as a run's driver does."""
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda seq: commit_sequence(store, seq), seqs))
    took = time.perf_counter() - t0
    assert not store.datasets(JOB)
    return took


def commit(root: Path, datasets: int, files: int, lease: Lease | None) -> float:
    store = CommitStepStore(root, fence=lease.fence if lease is not None else None)
    return commit_all(store, publish_sequences(root, JOB, task_output(root, datasets=datasets, files=files, size=4096)))


def recovery(root: Path, datasets: int, lease: Lease | None) -> float:
    store = CommitStepStore(root)
    for seq in publish_sequences(root, JOB, task_output(root, datasets=datasets, files=1, size=1024)):
        store.put(seq)
    store.fence = lease.fence if lease is not None else None
    t0 = time.perf_counter()
    report = recover(store, JOB, max_attempts=3, parallelism=4)
    took = time.perf_counter() - t0
    assert len(report.datasets) == datasets and not report.blocked
    return took


def lease_ops(location: str, filesystems: dict) -> dict[str, float]:
    """Median seconds of taking, renewing and releasing the lease (50 of each)."""
    take, renew, release = [], [], []
    for i in range(50):
        t0 = time.perf_counter()
        lease = Lease.acquire(location, f"ops{i % 5}", Owner.here(f"r{i}", "/w"), 60, filesystems=filesystems)
        take.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        lease.renew()
        renew.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        lease.release()
        release.append(time.perf_counter() - t0)
    return {"take_s": statistics.median(take), "renew_s": statistics.median(renew), "release_s": statistics.median(release)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", type=int, nargs="+", default=[1, 100])
    p.add_argument("--files", type=int, default=4)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--recover", type=int, default=1000)
    args = p.parse_args()
    from support.s3_server import LocalS3

    results: dict = {"files_per_dataset": args.files, "rounds": args.rounds, "commit": {}, "lease_ops": {}}
    with LocalS3() as s3:
        bucket = s3.new_bucket()
        s3_location, s3_fs = f"s3://{bucket}/leases", s3.options
        for datasets in args.datasets:
            times: dict[str, list[float]] = {"none": [], "local": [], "s3": []}
            for r in range(args.rounds):
                for kind in times:
                    root = Path(tempfile.mkdtemp(prefix=f"bench-lease-{kind}-"))
                    try:
                        if kind == "none":
                            lease = None
                        elif kind == "local":
                            lease = Lease.acquire(str(root / "leases"), JOB, Owner.here(f"{kind}{r}", root), 60)
                        else:
                            lease = Lease.acquire(s3_location, f"{JOB}{datasets}-{r}", Owner.here(f"{kind}{r}", root), 60,
                                                  filesystems=s3_fs)
                        times[kind].append(commit(root, datasets, args.files, lease))
                    finally:
                        shutil.rmtree(root, ignore_errors=True)
            med = {k: statistics.median(v) for k, v in times.items()}
            results["commit"][str(datasets)] = {
                "seconds": times, "median_s": med, "per_dataset_ms": {k: 1000 * v / datasets for k, v in med.items()},
                "ratio_to_none": {k: med[k] / med["none"] for k in ("local", "s3")}}
            print(f"{datasets} dataset(s) × {args.files} files: no lease {med['none']:.3f} s, lease local "
                  f"{med['local']:.3f} s ({med['local'] / med['none']:.2f}×), lease on S3 (moto) {med['s3']:.3f} s "
                  f"({med['s3'] / med['none']:.2f}×); per dataset {1000 * med['s3'] / datasets:.1f} ms on S3")
        with tempfile.TemporaryDirectory(prefix="bench-lease-ops-") as tmp:
            results["lease_ops"]["local"] = lease_ops(str(Path(tmp) / "leases"), {})
        results["lease_ops"]["s3"] = lease_ops(f"s3://{s3.new_bucket()}/leases", s3_fs)
        for kind, ops in results["lease_ops"].items():
            print(f"lease on {kind}: take {1000 * ops['take_s']:.1f} ms, renew {1000 * ops['renew_s']:.1f} ms, "
                  f"release {1000 * ops['release_s']:.1f} ms (median of 50)")
        rec: dict[str, float] = {}
        for kind in ("none", "s3"):
            root = Path(tempfile.mkdtemp(prefix=f"bench-lease-recover-{kind}-"))
            try:
                lease = None if kind == "none" else Lease.acquire(f"s3://{s3.new_bucket()}/leases", JOB,
                                                                 Owner.here("rec", root), 600, filesystems=s3_fs)
                rec[kind] = recovery(root, args.recover, lease)
            finally:
                shutil.rmtree(root, ignore_errors=True)
        results["recovery"] = {"datasets": args.recover, "seconds": rec, "ratio": rec["s3"] / rec["none"]}
        print(f"recovery of {args.recover} pending datasets: no lease {rec['none']:.2f} s, lease on S3 {rec['s3']:.2f} s "
              f"({rec['s3'] / rec['none']:.2f}×)")
    results["cpu_count"] = os.cpu_count()
    save("bench_lease", results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
