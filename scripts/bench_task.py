"""Benchmark: records/s of one task's pipeline in process (no Spark), the hot loop of the common job.

    .venv/bin/python scripts/bench_task.py [--records 300000] [--rounds 5]

Writes N ~100-byte JSON events to one JSON-lines file, then runs the task (files source → json_to_avro
→ avro writer, codec null) `rounds` times per variant, unpartitioned and partitioned by day, and prints
the median records/s of each. Compare two checkouts by running it in each.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gobblin_py.api import WorkUnit  # noqa: E402
from gobblin_py.config import load_job  # noqa: E402
from gobblin_py.runtime.task import TaskSpec, run_task  # noqa: E402

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


def run_once(root: Path, data: Path, partition: bool, round_: int) -> tuple[float, int]:
    schema = root / "bench.avsc"
    schema.write_text(json.dumps(SCHEMA))
    writer: dict = {"class": "avro", "codec": "null"}
    if partition:
        writer["partition"] = {"column": "ts", "granularity": "DAY"}
    job = {"job": {"name": "bench", "work_dir": str(root / f"work{round_}{int(partition)}"), "max_task_retries": 0},
           "source": {"class": "files", "path": str(root / "data")},
           "converters": [{"class": "json_to_avro", "schema": str(schema)}],
           "writer": writer, "publisher": {"final_dir": str(root / "out")}}
    job_file = root / "job.yaml"
    job_file.write_text(yaml.safe_dump(job))
    spec = load_job(job_file)
    wu = WorkUnit(id="wu", dataset="bench", watermark_key=data.name, low_watermark=None,
                  expected_high_watermark=data.stat().st_size, props={"file": str(data)})
    started = time.perf_counter()
    [result] = run_task(TaskSpec(job=spec, run_id=f"r{round_}", unit=wu))
    elapsed = time.perf_counter() - started
    if result.error:
        raise SystemExit(f"task failed: {result.error}")
    return elapsed, result.records_written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data = make_input(root, args.records)
        for partition in (False, True):
            rates = []
            for r in range(args.rounds):
                elapsed, written = run_once(root, data, partition, r)
                assert written == args.records, written
                rates.append(written / elapsed)
            print(f"{'partitioned' if partition else 'unpartitioned':>13}: median {statistics.median(rates):,.0f} records/s "
                  f"(rounds: {', '.join(f'{x:,.0f}' for x in rates)})")


if __name__ == "__main__":
    main()
