"""Benchmark: records/s of one task's pipeline in process (no Spark), the hot loop of the common job.

    .venv/bin/python scripts/bench_task.py [--records 300000] [--rounds 5] [--writers avro:null,parquet:zstd]
                                           [--job] [--peak-rss 1000000,4000000]

Writes N ~100-byte JSON events to one JSON-lines file, then runs the task (files source → json_to_avro
→ writer) `rounds` times per writer, alternating the writers, unpartitioned and partitioned by day, and
prints the median records/s of each and its ratio to the first writer of `--writers` (`writer:codec`,
e.g. `avro:deflate`, `parquet:none`). `--job` also times whole in-process jobs (plan, task, commit;
no Spark). `--peak-rss` runs one task per writer and size in a child process and prints its peak RSS.
Compare two checkouts by running it in each.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gobblin_py.api import WorkUnit  # noqa: E402
from gobblin_py.builtin.sources.files.split import FileSplit  # noqa: E402
from gobblin_py.config import load_job  # noqa: E402
from gobblin_py.runtime.executors.in_process import InProcessExecutor  # noqa: E402
from gobblin_py.runtime.runner import JobRunner  # noqa: E402
from gobblin_py.runtime.task.attempt import run_task  # noqa: E402
from gobblin_py.runtime.task.spec import TaskSpec  # noqa: E402

SCHEMA = {"type": "record", "name": "BenchEvent", "fields": [
    {"name": "id", "type": "long"}, {"name": "user", "type": "string"}, {"name": "page", "type": "string"},
    {"name": "amount", "type": "double"}, {"name": "ts", "type": "long"}, {"name": "ok", "type": "boolean"},
]}


def make_input(root: Path, n: int) -> Path:
    rng = random.Random(1)
    pages = [f"/page/{i}" for i in range(50)]
    path = root / "data" / "bench" / "events.jsonl"
    path.parent.mkdir(parents=True)
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({"id": i, "user": f"user-{rng.randrange(100000):06d}", "page": rng.choice(pages),
                                "amount": round(rng.random() * 1000, 2), "ts": 1767225600000 + i * 37,
                                "ok": i % 3 != 0}, separators=(",", ":")) + "\n")
    return path


def _writer(variant: str, partition: bool) -> dict:
    """`avro:null` → the avro writer with codec null; `parquet:zstd` → the parquet writer with compression zstd."""
    name, _, codec = variant.partition(":")
    writer: dict = {"class": name}
    if codec:
        writer["codec" if name == "avro" else "compression"] = codec
    if partition:
        writer["partition"] = {"column": "ts", "granularity": "DAY"}
    return writer


def _job_file(root: Path, variant: str, partition: bool, round_: int) -> Path:
    schema = root / "bench.avsc"
    schema.write_text(json.dumps(SCHEMA))
    tag = f"{variant.replace(':', '-')}-{round_}{int(partition)}"
    job = {"job": {"name": "bench", "work_dir": str(root / f"work-{tag}"), "max_task_retries": 0},
           "source": {"class": "files", "path": str(root / "data")},
           "converters": [{"class": "json_to_avro", "schema": str(schema)}],
           "writer": _writer(variant, partition), "publisher": {"final_dir": str(root / f"out-{tag}")}}
    job_file = root / f"job-{tag}.yaml"
    job_file.write_text(yaml.safe_dump(job))
    return job_file


def run_once(root: Path, data: Path, partition: bool, round_: int, variant: str = "avro:null") -> tuple[float, int]:
    spec = load_job(_job_file(root, variant, partition, round_))
    wu = WorkUnit(id="wu", dataset="bench", watermark_key=data.name, low_watermark=None,
                  expected_high_watermark=data.stat().st_size,
                  split=FileSplit(file=str(data), end=data.stat().st_size).packed())
    started = time.perf_counter()
    [result] = run_task(TaskSpec(job=spec, run_id=f"r{round_}", unit=wu))
    elapsed = time.perf_counter() - started
    if result.error:
        raise SystemExit(f"task failed: {result.error}")
    return elapsed, result.records_written


def run_job(root: Path, variant: str, round_: int) -> tuple[float, int]:
    """A whole in-process job (plan, one task, commit; no Spark) from a fresh work directory."""
    job_file = _job_file(root, variant, True, 100 + round_)
    started = time.perf_counter()
    result = JobRunner(load_job(job_file), InProcessExecutor()).run()
    elapsed = time.perf_counter() - started
    if not result.succeeded:
        raise SystemExit(f"job failed: {result.error}")
    return elapsed, sum(d.records_written for d in result.datasets)


def _median_rates(label: str, variants: list[str], timed: dict[str, list[float]]) -> None:
    base = statistics.median(timed[variants[0]])
    for v in variants:
        med = statistics.median(timed[v])
        print(f"{label:>13} {v:>14}: median {med:,.0f} records/s ({med / base:.2f}× {variants[0]}; "
              f"rounds: {', '.join(f'{x:,.0f}' for x in timed[v])})")


def _child_rss(variant: str, data: str, records: int) -> None:
    """In a child process: one partitioned task; prints its peak RSS (MiB) as JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "data").symlink_to(Path(data).parent.parent)
        elapsed, written = run_once(root, Path(data), True, 0, variant)
    assert written == records, written
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"variant": variant, "records": records, "peak_rss_mib": round(rss, 1), "seconds": round(elapsed, 2)}))


def peak_rss(variants: list[str], sizes: list[int]) -> None:
    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            data = make_input(Path(tmp), n)
            for v in variants:
                out = subprocess.run([sys.executable, __file__, "--child-rss", v, str(data), str(n)],
                                     check=True, capture_output=True, text=True).stdout
                got = json.loads(out.strip().splitlines()[-1])
                print(f"peak RSS {v:>14} {n:>9,} records: {got['peak_rss_mib']:,.0f} MiB ({got['seconds']} s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--writers", default="avro:null,parquet:zstd", help="writer:codec, comma-separated; the first is the baseline")
    ap.add_argument("--job", action="store_true", help="also time whole in-process jobs")
    ap.add_argument("--peak-rss", default="", help="record counts, comma-separated: peak RSS of one task per writer")
    ap.add_argument("--child-rss", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child_rss:
        variant, data, n = args.child_rss
        _child_rss(variant, data, int(n))
        return
    variants = args.writers.split(",")
    if args.peak_rss:
        peak_rss(variants, [int(x) for x in args.peak_rss.split(",")])
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data = make_input(root, args.records)
        for partition in (False, True):
            timed: dict[str, list[float]] = {v: [] for v in variants}
            for r in range(args.rounds):
                for v in variants:  # alternating, so a slower moment of the machine hits every writer alike
                    elapsed, written = run_once(root, data, partition, r, v)
                    assert written == args.records, written
                    timed[v].append(written / elapsed)
            _median_rates("partitioned" if partition else "unpartitioned", variants, timed)
        if args.job:
            timed = {v: [] for v in variants}
            for r in range(args.rounds):
                for v in variants:
                    elapsed, written = run_job(root, v, r)
                    assert written == args.records, written
                    timed[v].append(written / elapsed)
            _median_rates("whole job", variants, timed)


if __name__ == "__main__":
    main()
