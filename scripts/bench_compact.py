"""Benchmark: `gobblin-py compact` of one partition of many small Avro files, against reading and writing the same
records once with fastavro in one process.

    .venv/bin/python scripts/bench_compact.py [--files 1000] [--records 2000] [--target-size 256MB] [--in-process]

Writes F deflate files of R records into one day partition of a job's output (as F ingestion runs would), then, in
one run: (1) the baseline, every record read with fastavro and written once to one deflate file (measured before
and after the compactions, the ratios taken against the mean, so a busy machine weighs on both sides); (2) the
compaction as the command runs it (job lock, recovery, one Spark task for the partition on local[2], the commit
sequence: stage, exchange, remove, record), on a Spark session already started (its start is printed apart);
(3) the same with --dedup-key (records decoded, deduplicated and encoded). Checks that every record is there once
and that the files after equal ceil(total bytes / target); prints the times and the ratios and writes
scripts/results/bench_compact.json (bench_compact-<target bytes>.json for another target size).
"""

from __future__ import annotations

import hashlib
import math
import os
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

import fastavro  # noqa: E402
import yaml  # noqa: E402
from bench_results import compaction_args, save, scratch  # noqa: E402  (scripts/ is on sys.path: these run as scripts)

from gobblin_py.compaction.compactor import Compactor  # noqa: E402
from gobblin_py.compaction.plan import CompactionOptions, DedupSpec  # noqa: E402
from gobblin_py.config import load_job  # noqa: E402
from gobblin_py.runtime.executors.in_process import InProcessExecutor  # noqa: E402
from gobblin_py.runtime.executors.spark import SparkExecutor  # noqa: E402
from gobblin_py.runtime.runner import JobRunner  # noqa: E402
from gobblin_py.state.store import WatermarkFile  # noqa: E402

SCHEMA = {"type": "record", "name": "Event", "namespace": "bench", "fields": [
    {"name": "id", "type": "long"}, {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "user", "type": "string"}, {"name": "kind", "type": "string"},
    {"name": "amount", "type": ["null", "double"], "default": None}, {"name": "country", "type": ["null", "string"], "default": None}]}
JAN1 = 1_767_225_600_000
COUNTRIES = ["DE", "FR", "US", "JP", "BR", None]


def make_partition(directory: Path, files: int, records: int) -> int:
    """`files` deflate files of `records` events each (ids unique), as ingestion leaves them; total bytes."""
    directory.mkdir(parents=True)
    parsed = fastavro.parse_schema(SCHEMA)
    for f in range(files):
        base = f * records
        rows = [{"id": base + i, "ts": JAN1 + (base + i) % 86_400_000, "user": hashlib.md5(str(base + i).encode()).hexdigest()[:12],
                 "kind": "click" if i % 3 else "view", "amount": float(i % 997) / 10, "country": COUNTRIES[i % 6]}
                for i in range(records)]
        name = f"part-{f:05d}-{hashlib.blake2b(str(f).encode(), digest_size=16).hexdigest()}.avro"
        with open(directory / name, "wb") as out:
            fastavro.writer(out, parsed, rows, codec="deflate")
    return sum(p.stat().st_size for p in directory.iterdir())


def baseline(directory: Path, out: Path) -> tuple[float, int]:
    """Read every record with fastavro and write each once into one deflate file: seconds, records."""
    t0 = time.perf_counter()
    parsed = fastavro.parse_schema(SCHEMA)

    def rows():
        for p in sorted(directory.iterdir()):
            with open(p, "rb") as f:
                yield from fastavro.reader(f)

    count = 0

    def counted():
        nonlocal count
        for r in rows():
            count += 1
            yield r

    with open(out, "wb") as f:
        fastavro.writer(f, parsed, counted(), codec="deflate")
    return time.perf_counter() - t0, count


def job_file(root: Path) -> Path:
    job = {"job": {"name": "bench", "work_dir": str(root / "work")},
           "source": {"class": "files", "path": str(root / "data")},
           "writer": {"class": "avro", "codec": "deflate", "partition": {"column": "ts", "granularity": "DAY"}},
           "publisher": {"final_dir": str(root / "output")}, "spark": {"master": "local[2]", "conf": {"spark.ui.enabled": False}}}
    (root / "data").mkdir(exist_ok=True)
    path = root / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    WatermarkFile(root / "work" / "state" / "bench", "clicks").write({})  # a committed dataset, as after ingestion
    return path


def count_records(directory: Path) -> tuple[int, int]:
    n, ids = 0, set()
    for p in directory.iterdir():
        if p.name.endswith(".avro"):
            with open(p, "rb") as f:
                for r in fastavro.reader(f):
                    n += 1
                    ids.add(r["id"])
    return n, len(ids)


def main() -> None:
    args = compaction_args(__doc__)
    target = args.target_size
    with scratch("bench-compact-") as tmp:
        root = tmp / "job"
        part = root / "output" / "clicks" / "2026" / "01" / "01"
        t0 = time.perf_counter()
        total = make_partition(part, args.files, args.records)
        print(f"{args.files} files × {args.records} records ({total / 1e6:.1f} MB) made in {time.perf_counter() - t0:.1f}s")
        pristine = tmp / "pristine"
        shutil.copytree(part, pristine)

        base_s, base_n = baseline(part, tmp / "baseline.avro")
        print(f"baseline (fastavro read + write once, one process): {base_s:.2f}s for {base_n} records")

        job = load_job(job_file(root))
        executor = InProcessExecutor() if args.in_process else SparkExecutor(job)
        t0 = time.perf_counter()
        executor.start()
        if not args.in_process:
            executor.session()  # type: ignore[attr-defined]
        start_s = time.perf_counter() - t0
        try:
            results = {}
            for name, dedup in (("compact", None), ("compact --dedup-key id", DedupSpec("id", "latest", "ts"))):
                if part.exists():
                    shutil.rmtree(part)
                shutil.copytree(pristine, part)
                t0 = time.perf_counter()
                report = Compactor(JobRunner(job, executor)).run(CompactionOptions(target_bytes=target, dedup=dedup))
                took = time.perf_counter() - t0
                assert report.succeeded, report.to_json()
                after = sorted(p for p in part.iterdir() if p.name.endswith(".avro"))
                n, unique = count_records(part)
                assert n == unique == base_n, (n, unique, base_n)
                out_bytes = sum(p.stat().st_size for p in after)
                expected = max(1, math.ceil(out_bytes / target))
                assert len(after) == expected, (len(after), expected)
                phases = report.result.phases if report.result else {}
                results[name] = {"seconds": round(took, 3), "ratio": round(took / base_s, 3), "files_after": len(after),
                                 "bytes_after": out_bytes, "expected_files": expected,
                                 "phases": {k: round(v, 3) for k, v in phases.items()}}
                print(f"{name}: {took:.2f}s; {args.files} files → {len(after)} "
                      f"(ceil({out_bytes} / {target}) = {expected}); phases {results[name]['phases']}")
        finally:
            executor.stop()
        print(f"(Spark's start, before the compactions: {start_s:.1f}s)")
        after_s, _ = baseline(pristine, tmp / "baseline2.avro")
        mean = (base_s + after_s) / 2
        print(f"baseline again, after the compactions: {after_s:.2f}s; against the mean {mean:.2f}s:")
        for name, r in results.items():
            r["ratio"] = round(r["seconds"] / mean, 3)
            print(f"  {name}: {r['ratio']:.2f}× the baseline")
        save("bench_compact" if target == 256_000_000 else f"bench_compact-{target}", {"files": args.files, "records_per_file": args.records, "input_bytes": total,
                               "target_bytes": target, "baseline_s": [round(base_s, 3), round(after_s, 3)], "spark_start_s": round(start_s, 3),
                               "executor": "in-process" if args.in_process else "spark local[2]", **results})


if __name__ == "__main__":
    main()
