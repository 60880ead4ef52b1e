"""Benchmark: a scheduled firing on the warm Spark session against the hand-written pipeline and a cold run, in one run.

    .venv/bin/python scripts/bench_schedule.py [--records 1000000] [--rounds 2] [--codec deflate]

Starts a local broker (127.0.0.1) and produces N JSON events into 4 sealed partitions (scripts/bench_kafka.py's
producer), then alternates, `rounds` times each: (a) the baseline (scripts/baseline_kafka_to_avro.py), (b) a cold
`gobblin-py run` (Spark's start included), and (c) a firing of `gobblin-py schedule` on its warm session: the
scheduler first fires the job on a small warm-up topic (that run starts the session), then the job file is
switched to the benchmark topic and the next firing is timed from its run state (start to end). Prints records/s
and the ratios to the baseline of the same run, and writes scripts/results/bench_schedule.json.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import run_measured
from bench_kafka import PARTITIONS, REPO, TOPIC, gobblin_job, produce
from bench_results import save
from support.kafka_broker import LocalBroker, create_topic
from support.kafka_broker import produce as produce_records

WARMUP_TOPIC = "warmup"
WARMUP_PER_PARTITION = 250


def _runs(work: Path) -> list[dict]:
    run_dir = work / "state" / "bench" / "runs"
    return [json.loads(p.read_text())["body"] for p in sorted(run_dir.glob("*.json"))] if run_dir.is_dir() else []


def _written(run: dict, topic: str) -> int:
    return sum(t["records_written"] for t in run["tasks"] if t["dataset"] == topic)


def _wait(what: str, proc: subprocess.Popen[str], check, timeout: float = 900):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        if proc.poll() is not None:
            raise SystemExit(f"the scheduler exited ({proc.returncode}) before {what}:\n{proc.stderr.read()}")
        time.sleep(0.2)
    raise SystemExit(f"no {what} within {timeout} s")


def warm_firing(tmp: Path, bootstrap: str, codec: str, total: int) -> dict:
    """Start `gobblin-py schedule` on the job, let a warm-up firing start the session, switch the job file to the
    benchmark topic and return the run state of the firing that read it."""
    job_path = gobblin_job(tmp, bootstrap, codec, "kafka-python")
    job = yaml.safe_load(job_path.read_text())
    job["job"]["schedule"] = "*/2 * * * * ?"
    job["source"]["topics"] = [WARMUP_TOPIC]
    job_path.write_text(yaml.safe_dump(job))
    work = tmp / "work"
    proc = subprocess.Popen([sys.executable, "-m", "gobblin_py.cli.main", "schedule", str(job_path)], cwd=tmp,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait("the warm-up firing", proc, lambda: any(_written(r, WARMUP_TOPIC) for r in _runs(work)))
        job["source"]["topics"] = [TOPIC]  # the scheduler reads the job file again at each firing
        job_path.write_text(yaml.safe_dump(job))
        run = _wait("the timed firing", proc, lambda: next((r for r in _runs(work) if _written(r, TOPIC)), None))
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"the scheduler exited with {proc.returncode}:\n{err}")
    assert run["status"] == "succeeded" and _written(run, TOPIC) == total, run
    return run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--codec", default="deflate")
    args = ap.parse_args()
    py = sys.executable
    figures: dict[str, list] = {"baseline": [], "cold": [], "warm": []}
    with LocalBroker() as broker, tempfile.TemporaryDirectory(prefix="bench-schedule-") as scratch:
        create_topic(broker.bootstrap, TOPIC, PARTITIONS)
        t0 = time.perf_counter()
        ends = produce(broker.bootstrap, args.records)
        total = sum(ends.values())
        print(f"produced {total} records into {PARTITIONS} partitions in {time.perf_counter() - t0:.1f}s", flush=True)
        create_topic(broker.bootstrap, WARMUP_TOPIC, PARTITIONS)
        event = {"id": 0, "user": "user-000000", "page": "/page/0", "amount": 1.0, "ts": 1767225600000, "ok": True}
        produce_records(broker.bootstrap, WARMUP_TOPIC, {p: [json.dumps({**event, "id": i}).encode() for i in range(WARMUP_PER_PARTITION)]
                                                         for p in range(PARTITIONS)})
        ends_arg = ",".join(f"{p}={e}" for p, e in sorted(ends.items()))
        for r in range(args.rounds):
            tmp = Path(scratch) / f"round{r}"
            took, _, done = run_measured([py, str(REPO / "scripts" / "baseline_kafka_to_avro.py"), broker.bootstrap, TOPIC,
                                          str(tmp / "baseline"), "--ends", ends_arg, "--codec", args.codec], REPO)
            assert json.loads(done.stdout.strip().splitlines()[-1])["records"] == total
            figures["baseline"].append({"wall_s": took, "records_per_s": total / took})
            print(f"round {r + 1}: baseline          {took:6.2f}s  {total / took:9.0f} rec/s", flush=True)

            cold = tmp / "cold"
            cold.mkdir(parents=True)
            job = gobblin_job(cold, broker.bootstrap, args.codec, "kafka-python")
            took, _, _ = run_measured([py, "-m", "gobblin_py.cli.main", "run", str(job)], cold)
            run = _runs(cold / "work")[-1]
            assert _written(run, TOPIC) == total, run
            figures["cold"].append({"wall_s": took, "records_per_s": total / took, "phases": run["phases"]})
            print(f"round {r + 1}: cold run          {took:6.2f}s  {total / took:9.0f} rec/s  "
                  f"spark start {run['phases'].get('executor_start', 0):.2f}s", flush=True)

            warm = tmp / "warm"
            warm.mkdir()
            run = warm_firing(warm, broker.bootstrap, args.codec, total)
            took = run["duration_s"]
            figures["warm"].append({"wall_s": took, "records_per_s": total / took, "phases": run["phases"]})
            print(f"round {r + 1}: warm firing       {took:6.2f}s  {total / took:9.0f} rec/s  "
                  f"spark start {run['phases'].get('executor_start', 0):.2f}s  tasks {run['phases']['tasks']:.2f}s", flush=True)
    med = statistics.median
    base, cold_s, warm_s = (med(f["wall_s"] for f in figures[k]) for k in ("baseline", "cold", "warm"))
    summary = {
        "records": total, "codec": args.codec, "rounds": args.rounds,
        "baseline_records_per_s": total / base, "cold_run_records_per_s": total / cold_s, "warm_firing_records_per_s": total / warm_s,
        "ratio_cold_run": base / cold_s, "ratio_warm_firing": base / warm_s,
        "warm_firing_spark_start_s": max(f["phases"].get("executor_start", 0.0) for f in figures["warm"]),
    }
    print(json.dumps(summary, indent=2))
    save("bench_schedule", {"summary": summary, "rounds": figures})
    return 0


if __name__ == "__main__":
    sys.exit(main())
