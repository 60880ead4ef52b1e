"""Benchmark: what a work directory on an object store costs a commit (issue 43), against a local one, in one run.

    .venv/bin/python scripts/bench_work_store.py [--datasets 1 100] [--files 4] [--rounds 3] [--recover 1000]
        [--recover-rounds 1] [--continuous-s 8] [--renew-ttl 3]

For D datasets × F files (the commit protocol as a run drives it: commit record, fs_rename steps, watermark and state
steps, record removal, 4 datasets at a time), alternating each round and which kind goes first: (a) the work
directory local (commit log, watermarks, state and the lease in a temp directory); (b) the same records on an S3
server (moto on 127.0.0.1), the lease there too. Task output and published files stay local in both, so the
difference is what the records on the store add. Then the recovery of R pending datasets from each, the requests one
dataset's commit makes to the store (counted, not timed), and the lease's renewal during a continuous run: batches of
4 datasets committed back to back for a while with the lease renewing (every third of a short TTL, far more often than
the default 60 s TTL does) against the same without renewal. Prints seconds, per-dataset costs and the ratio of (b) to
(a) of the same round, and writes scripts/results/bench_work_store.json. moto spends more CPU a request than S3 (the
ratios of many datasets at a time bound S3's from above) but has no network: the request count carries over to S3,
where one request alone takes longer.
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from bench_lease import commit_all, lease_ops  # noqa: E402  (scripts/ is on sys.path: these run as scripts)
from bench_results import save  # noqa: E402

from gobblin_py.commit.confinement import Confinement  # noqa: E402
from gobblin_py.commit.recovery import recover  # noqa: E402
from gobblin_py.commit.sequence import CommitSequence  # noqa: E402
from gobblin_py.commit.steps import DatasetStateCommitStep, HighWatermarkCommitStep  # noqa: E402
from gobblin_py.commit.store import CommitStepStore  # noqa: E402
from gobblin_py.fs.registry import configure  # noqa: E402
from gobblin_py.state.lease import Lease, Owner  # noqa: E402
from gobblin_py.testing.commits import publish_sequences, task_output  # noqa: E402

JOB = "bench"
KINDS = ("local", "s3")


def sequences(files_root: Path, records: str, datasets: int, files: int, size: int) -> list[CommitSequence]:
    """The run's sequences (task output under `files_root`), their watermark and state steps writing under `records`."""
    seqs = publish_sequences(files_root, JOB, task_output(files_root, datasets=datasets, files=files, size=size))
    state_dir = f"{records.rstrip('/')}/state/{JOB}"
    for seq in seqs:
        for step in seq.steps:
            if isinstance(step, (HighWatermarkCommitStep, DatasetStateCommitStep)):
                step.state_dir = state_dir
    return seqs


def take_lease(records: str, ttl_s: float, filesystems: dict) -> Lease:
    """The job's lease where a run keeps it by default: `<work_dir>/leases`."""
    return Lease.acquire(f"{records.rstrip('/')}/leases", JOB, Owner.here("bench", records), ttl_s, filesystems=filesystems)


def store_at(records: str, files_root: Path, lease: Lease) -> CommitStepStore:
    return CommitStepStore(records, confinement=Confinement.of([records, str(files_root)]), fence=lease.fence)


def commit(records: str, files_root: Path, datasets: int, files: int, filesystems: dict) -> float:
    lease = take_lease(records, 60, filesystems)
    try:
        return commit_all(store_at(records, files_root, lease), sequences(files_root, records, datasets, files, 4096))
    finally:
        lease.release()


def recovery(records: str, files_root: Path, datasets: int, filesystems: dict) -> float:
    lease = take_lease(records, 600, filesystems)
    try:
        store = store_at(records, files_root, lease)
        for seq in sequences(files_root, records, datasets, 1, 1024):
            store.put(seq)
        t0 = time.perf_counter()
        report = recover(store, JOB, max_attempts=3, parallelism=4)
        took = time.perf_counter() - t0
        assert len(report.datasets) == datasets and not report.blocked
        return took
    finally:
        lease.release()


def continuous(records: str, files_root: Path, seconds: float, renew_ttl: float | None, files: int,
               filesystems: dict) -> dict[str, float]:
    """Batches of 4 datasets (the same 4, as a continuous run's checkpoints commit) back to back for `seconds`, with
    the lease renewing every `renew_ttl / 3` s (None: never, its TTL long): commit milliseconds per dataset."""
    lease = take_lease(records, renew_ttl or 3600, filesystems)
    if renew_ttl is not None:
        lease.start_renewing()
    try:
        store = store_at(records, files_root, lease)
        busy, done, batch, t0 = 0.0, 0, 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            batch += 1  # each batch's files under a root of their own: its published names are new
            busy += commit_all(store, sequences(files_root / f"b{batch}", records, 4, files, 4096))
            done += 4
        wall = time.perf_counter() - t0
        lease.fence.check()  # still held: renewed throughout (or never needed to be)
        return {"datasets": done, "commit_s": busy, "wall_s": wall, "per_dataset_ms": 1000 * busy / done,
                "renewals": int(wall // (renew_ttl / 3)) if renew_ttl else 0}
    finally:
        lease.release()


@contextmanager
def counting_requests() -> Iterator[collections.Counter]:
    """Count obstore's calls (every request the records and the lease make to the store) while inside."""
    import obstore

    counts: collections.Counter = collections.Counter()
    saved = {name: getattr(obstore, name) for name in ("get", "put", "delete", "head", "list", "list_with_delimiter")}

    def counted(name: str, fn: Callable) -> Callable:
        def call(*args: object, **kwargs: object) -> object:
            counts[name] += 1
            return fn(*args, **kwargs)
        return call

    for name, fn in saved.items():
        setattr(obstore, name, counted(name, fn))
    try:
        yield counts
    finally:
        for name, fn in saved.items():
            setattr(obstore, name, fn)


def requests(records: str, files_root: Path, datasets: int, files: int, filesystems: dict) -> dict[str, float]:
    """The requests per dataset a commit of `datasets` makes to the store (untimed), by kind."""
    lease = take_lease(records, 60, filesystems)
    try:
        store, seqs = store_at(records, files_root, lease), sequences(files_root, records, datasets, files, 4096)
        with counting_requests() as counts:
            commit_all(store, seqs)
        return {k: v / datasets for k, v in sorted(counts.items())}
    finally:
        lease.release()


def ratios(times: dict[str, list[float]]) -> list[float]:
    """On S3 over local, round by round (the two measured back to back)."""
    return [s / loc for loc, s in zip(times["local"], times["s3"])]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", type=int, nargs="+", default=[1, 100])
    p.add_argument("--files", type=int, default=4)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--recover", type=int, default=1000)
    p.add_argument("--recover-rounds", type=int, default=1)
    p.add_argument("--continuous-s", type=float, default=8.0, help="seconds of each continuous measurement (0: none)")
    p.add_argument("--renew-ttl", type=float, default=3.0, help="the lease's TTL while renewing (renewed every third)")
    args = p.parse_args()
    from support.s3_server import LocalS3

    results: dict = {"date": dt.date.today().isoformat(), "files_per_dataset": args.files, "rounds": args.rounds,
                     "task_output_and_published_files": "local", "commit": {}}
    with LocalS3() as s3:
        configure(s3.options)  # as a job's `job.filesystems` does in its driver
        bucket = s3.new_bucket()

        def one(kind: str, body: Callable[[str, Path], object]) -> object:
            files_root = Path(tempfile.mkdtemp(prefix=f"bench-store-{kind}-"))
            records = str(files_root / "work") if kind == "local" else f"s3://{bucket}/w{time.time_ns()}"
            try:
                return body(records, files_root)
            finally:
                shutil.rmtree(files_root, ignore_errors=True)

        def alternating(rounds: int, body: Callable[[str, Path], object]) -> dict[str, list]:
            got: dict[str, list] = {k: [] for k in KINDS}
            for r in range(rounds):
                for kind in (KINDS if r % 2 == 0 else KINDS[::-1]):
                    got[kind].append(one(kind, body))
            return got

        for datasets in args.datasets:
            times = alternating(args.rounds, lambda rec, root, n=datasets: commit(rec, root, n, args.files, s3.options))
            med = {k: statistics.median(v) for k, v in times.items()}
            rr = ratios(times)
            results["commit"][str(datasets)] = {
                "seconds": times, "median_s": med, "per_dataset_ms": {k: 1000 * v / datasets for k, v in med.items()},
                "ratio_by_round": rr, "ratio": statistics.median(rr)}
            print(f"{datasets} dataset(s) × {args.files} files: work directory local {med['local']:.3f} s, on S3 (moto) "
                  f"{med['s3']:.3f} s; per dataset {1000 * med['local'] / datasets:.1f} ms local, "
                  f"{1000 * med['s3'] / datasets:.1f} ms on S3; ratio {statistics.median(rr):.2f}× "
                  f"(rounds {', '.join(f'{x:.2f}' for x in rr)})")

        results["requests_per_dataset"] = one("s3", lambda rec, root: requests(rec, root, 10, args.files, s3.options))
        print(f"requests to the store per dataset ({args.files} files; of a commit of 10 datasets): "
              + ", ".join(f"{k} {v:.1f}" for k, v in results["requests_per_dataset"].items()))

        rec = alternating(args.recover_rounds, lambda rec, root: recovery(rec, root, args.recover, s3.options))
        rr = ratios(rec)
        results["recovery"] = {"datasets": args.recover, "seconds": rec, "ratio_by_round": rr, "ratio": statistics.median(rr),
                               "per_dataset_ms": {k: 1000 * statistics.median(v) / args.recover for k, v in rec.items()}}
        print(f"recovery of {args.recover} pending datasets: local {statistics.median(rec['local']):.2f} s, on S3 "
              f"{statistics.median(rec['s3']):.2f} s; ratio {statistics.median(rr):.2f}× "
              f"(rounds {', '.join(f'{x:.2f}' for x in rr)})")

        results["lease_ops"] = {"s3": lease_ops(f"s3://{s3.new_bucket()}/leases", s3.options)}
        with tempfile.TemporaryDirectory(prefix="bench-store-ops-") as tmp:
            results["lease_ops"]["local"] = lease_ops(str(Path(tmp) / "leases"), {})
        for kind in KINDS:
            ops = results["lease_ops"][kind]
            print(f"lease {kind}: renew {1000 * ops['renew_s']:.1f} ms (median of 50); renewed every 20 s at the "
                  f"default TTL of 60 s: {100 * ops['renew_s'] / 20:.3f} % of one thread's time")

        if args.continuous_s > 0:
            runs: dict[str, list[dict]] = {"renewing": [], "not_renewing": []}
            for r in range(args.rounds):
                for mode in (("renewing", "not_renewing") if r % 2 == 0 else ("not_renewing", "renewing")):
                    ttl = args.renew_ttl if mode == "renewing" else None
                    runs[mode].append(one("s3", lambda rec, root, ttl=ttl: continuous(rec, root, args.continuous_s, ttl, args.files,
                                                                             s3.options)))
            per = {m: [x["per_dataset_ms"] for x in v] for m, v in runs.items()}
            rr = [a / b for a, b in zip(per["renewing"], per["not_renewing"])]
            results["continuous"] = {"seconds_each": args.continuous_s, "renew_ttl_s": args.renew_ttl, "runs": runs,
                                     "ratio_by_round": rr, "ratio": statistics.median(rr)}
            print(f"continuous run on S3, batches of 4 datasets for {args.continuous_s:.0f} s: renewing every "
                  f"{args.renew_ttl / 3:.1f} s {statistics.median(per['renewing']):.1f} ms a dataset, not renewing "
                  f"{statistics.median(per['not_renewing']):.1f} ms; ratio {statistics.median(rr):.3f}× "
                  f"(rounds {', '.join(f'{x:.3f}' for x in rr)})")
        configure({})
    results["cpu_count"] = os.cpu_count()
    save("bench_work_store", results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
