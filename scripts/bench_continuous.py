"""Benchmark: continuous runs (`gobblin-py run --continuous`) with the Kafka source on local[2], in one run.

    .venv/bin/python scripts/bench_continuous.py [--rate 20000] [--interval 5] [--steady-seconds 300]
                                                 [--records 1000000] [--trickle-seconds 45]

Starts a local broker (Tansu, 127.0.0.1) and measures, each phase on a topic and work directory of its own:

1. fixed cost: a warm continuous run (1 s interval) while a trickle (40 records/s over 4 partitions) arrives; the
   median and p90 of its checkpoints' duration_s (Spark's start excluded), against a bounded `gobblin-py run` of the
   same job over as few records (the way to get the same freshness without continuous mode);
2. throughput: N records produced into a warm continuous run (30 s interval, so the producer is done before the
   checkpoint that reads them): N over the busy time of the checkpoints that took them (and over their task phase
   alone), against the task phase of a bounded run over the same topic; also N / (from the first of those
   checkpoints' start to the last one's commit);
3. latency and memory: `--rate` records/s (each carrying its produce time in `ts`, ms) into 4 partitions for
   `--steady-seconds` under a `--interval` continuous run; a record's latency is the CheckpointCommitted event of
   the checkpoint that published it (the output file's mtime falls between that checkpoint's start and commit)
   minus its `ts`: p50 and p99. Peak RSS of the driver, the JVM and the Python workers in the first minute
   against the last minute.

Writes scripts/results/bench_continuous.json (bench_continuous-<N>s.json for a steady phase over 5 minutes). The broker and producer code is scripts/bench_kafka.py's.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_kafka
from bench_common import process_tree, rss, run_measured
from bench_kafka import PARTITIONS, LocalBroker, create_topic, end_offsets, gobblin_job
from bench_results import save

from gobblin_py.state.store import StateStore

PY = sys.executable
JOB = "bench"


# -- a producer at a steady rate (a child process, so it does not share the GIL with the sampling here) ------------

def produce_steady(bootstrap: str, topic: str, rate: float, seconds: float, first_id: int) -> dict[str, Any]:
    """`rate` records/s round-robin over the partitions for `seconds`, each stamped with its produce time (`ts`,
    epoch ms); then every partition sealed by a single-record batch. What was produced, and at what rate."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "queue.buffering.max.messages": 1_000_000,
                         "enable.idempotence": False})
    template = '{"id":%d,"user":"user-%06d","page":"/page/%d","amount":%d.5,"ts":%d,"ok":%s}'
    sent, t0 = 0, time.monotonic()

    def send(partition: int) -> None:
        nonlocal sent
        i = first_id + sent
        value = (template % (i, i % 100_000, i % 50, i % 1000, time.time_ns() // 1_000_000, "true" if i % 3 else "false")).encode()
        while True:
            try:
                producer.produce(topic, value, partition=partition)
                break
            except BufferError:
                producer.poll(0.01)
        sent += 1

    while (elapsed := time.monotonic() - t0) < seconds:
        for _ in range(int(rate * elapsed) - sent):
            send(sent % PARTITIONS)
        producer.poll(0)
        time.sleep(0.005)
    took = time.monotonic() - t0
    producer.flush(60)
    for p in range(PARTITIONS):  # the seal: one single-record batch per partition (Tansu's end offsets are exact after it)
        send(p)
        producer.flush(30)
    return {"produced": sent, "seconds": took, "rate": (sent - PARTITIONS) / took, "target_rate": rate}


def start_producer(bootstrap: str, topic: str, rate: float, seconds: float, first_id: int) -> subprocess.Popen[str]:
    return subprocess.Popen([PY, __file__, "--produce", bootstrap, topic, str(rate), str(seconds), str(first_id)],
                            stdout=subprocess.PIPE, text=True)


def producer_result(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"the producer failed ({proc.returncode})")
    return json.loads(out.strip().splitlines()[-1])


# -- a continuous run in a child process ----------------------------------------------------------------------

def job_file(tmp: Path, bootstrap: str, topic: str, interval: str) -> Path:
    """bench_kafka's job (Kafka → JSON → Avro files, local[2]) on `topic`, checkpointing every `interval`."""
    path = gobblin_job(tmp, bootstrap, "deflate", "kafka-python")
    job = yaml.safe_load(path.read_text())
    job["source"]["topics"] = [topic]
    job["job"]["checkpoint_interval"] = interval
    path.write_text(yaml.safe_dump(job))
    return path


class Continuous:
    """`gobblin-py run JOB --continuous` in a child process (its own process group), its memory sampled every 0.5 s."""

    def __init__(self, tmp: Path, job: Path) -> None:
        self.tmp, self.job = tmp, job
        self.samples: list[tuple[float, dict[str, int]]] = []  # (seconds since start, RSS by kind)
        self._stop = threading.Event()

    def __enter__(self) -> Continuous:
        self.log = open(self.tmp / "continuous.log", "wb")
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen([PY, "-m", "gobblin_py.cli.main", "run", str(self.job), "--continuous"], cwd=self.tmp,
                                     stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # what is left of its Spark JVM and Python workers
        except ProcessLookupError:
            pass
        self._stop.set()
        self._sampler.join()
        self.log.close()

    def _sample(self) -> None:
        while not self._stop.is_set():
            sums = {"driver": 0, "jvm": 0, "python_workers": 0}
            for pid, cmd in process_tree(self.proc.pid):
                kind = "driver" if pid == self.proc.pid else "jvm" if "java" in cmd else "python_workers" if "python" in cmd else None
                if kind:
                    sums[kind] += rss(pid)
            self.samples.append((time.monotonic() - self.t0, sums))
            self._stop.wait(0.5)

    def warm(self, bootstrap: str, topic: str) -> None:
        """Return once a first checkpoint (one record per partition) has committed: Spark is up."""
        producer_result(start_producer(bootstrap, topic, 1, 0, 10**12))
        self.wait_for(topic, end_offsets(bootstrap, topic))

    def committed(self, topic: str) -> dict[int, int]:
        try:
            return {int(p): v for p, v in StateStore(self.tmp / "work", JOB).watermarks().get(topic, {}).items()}
        except Exception:  # noqa: BLE001 - read while the run writes it
            return {}

    def wait_for(self, topic: str, ends: dict[int, int], timeout: float = 600.0) -> None:
        deadline = time.monotonic() + timeout
        while self.committed(topic) != ends:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the continuous run did not reach {ends} (exit {self.proc.poll()}); see {self.tmp / 'continuous.log'}:\n"
                                 + (self.tmp / "continuous.log").read_text(errors="replace")[-3000:])
            time.sleep(0.2)

    def stop(self) -> dict[str, Any]:
        """SIGTERM; the run's history record."""
        self.proc.send_signal(signal.SIGTERM)
        if self.proc.wait(120) != 0:
            raise SystemExit(f"the continuous run ended with {self.proc.returncode}: see {self.tmp / 'continuous.log'}")
        [run] = [r for r in StateStore(self.tmp / "work", JOB).runs() if r.get("mode") == "continuous"]  # not its compactions
        return run

    def events(self) -> list[dict[str, Any]]:
        path = self.tmp / "work" / "events" / f"{JOB}.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def peak(self, since: float, until: float) -> dict[str, float]:
        """Peak RSS (MiB) by kind over [since, until) seconds of the run."""
        window = [s for t, s in self.samples if since <= t < until]
        return {k: max((s[k] for s in window), default=0) / 2**20 for k in ("driver", "jvm", "python_workers")}


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def bounded_run(tmp: Path, job: Path) -> tuple[float, dict[str, Any]]:
    """A bounded `gobblin-py run` of `job`: its wall time and its history record."""
    took, _, _ = run_measured([PY, "-m", "gobblin_py.cli.main", "run", str(job)], tmp)
    return took, StateStore(tmp / "work", JOB).runs()[-1]


# -- the three phases --------------------------------------------------------------------------------------------

def fixed_cost(bootstrap: str, scratch: Path, seconds: float) -> dict[str, Any]:
    topic, tmp = "trickle", scratch / "fixed"
    tmp.mkdir()
    create_topic(bootstrap, topic, PARTITIONS)
    job = job_file(tmp, bootstrap, topic, "1s")
    with Continuous(tmp, job) as run:
        run.warm(bootstrap, topic)
        producer_result(start_producer(bootstrap, topic, 40, seconds, 0))
        run.wait_for(topic, end_offsets(bootstrap, topic))
        record = run.stop()
    rows = [r for r in record["checkpoints"] if r["records_written"]][1:]  # the first waited for Spark to start
    durations = [r["duration_s"] for r in rows]
    walls = []
    for i in range(3):  # the same job, bounded: a run per batch of as few records
        producer_result(start_producer(bootstrap, topic, 40, 1.0, 1_000_000 * (i + 1)))
        took, bounded = bounded_run(tmp, job)
        assert bounded["status"] == "succeeded", bounded
        walls.append(took)
    median = statistics.median(durations)
    out = {"checkpoints": len(rows), "records_per_checkpoint": statistics.median(r["records_written"] for r in rows),
           "checkpoint_median_s": median, "checkpoint_p90_s": quantile(durations, 0.9),
           "checkpoint_phases_median_s": {p: statistics.median(r["phases"].get(p, 0.0) for r in rows) for p in ("planning", "tasks", "commit")},
           "bounded_run_wall_s": walls, "bounded_over_checkpoint": statistics.median(walls) / median}
    print(f"fixed cost: checkpoint median {median:.3f}s p90 {out['checkpoint_p90_s']:.3f}s over {len(rows)} checkpoints of "
          f"~{out['records_per_checkpoint']:.0f} records; a bounded run {statistics.median(walls):.2f}s "
          f"({out['bounded_over_checkpoint']:.1f}x)", flush=True)
    return out


def throughput(bootstrap: str, scratch: Path, n: int) -> dict[str, Any]:
    topic, tmp = bench_kafka.TOPIC, scratch / "throughput"
    tmp.mkdir()
    create_topic(bootstrap, topic, PARTITIONS)
    warm = bench_kafka.produce(bootstrap, 2 * PARTITIONS)
    # a checkpoint every 30 s: the records are all produced (the producer off the CPU) before the next one reads them,
    # so its busy time is the pipeline's alone, as a bounded run's task phase is
    job = job_file(tmp, bootstrap, topic, "30s")
    with Continuous(tmp, job) as run:
        run.wait_for(topic, warm)
        t0 = time.perf_counter()
        ends = bench_kafka.produce(bootstrap, n)
        produced_s = time.perf_counter() - t0
        run.wait_for(topic, ends)
        record, events = run.stop(), run.events()
    rows = [r for r in record["checkpoints"] if r["records_written"]][1:]  # after the warm-up checkpoint
    records = sum(r["records_written"] for r in rows)
    assert records == sum(ends.values()) - sum(warm.values()), (records, ends, warm)
    when = {(e["name"], e["metadata"]["checkpoint"]): e["timestamp"] / 1000 for e in events if e["name"].startswith("Checkpoint")}
    span = when[("CheckpointCommitted", rows[-1]["checkpoint"])] - when[("CheckpointStarted", rows[0]["checkpoint"])]
    continuous_rps = records / span
    busy_rps = records / sum(r["duration_s"] for r in rows)
    tasks_rps = records / sum(r["phases"].get("tasks", 0.0) for r in rows)
    (scratch / "bounded").mkdir()
    took, bounded = bounded_run(scratch / "bounded", job_file(scratch / "bounded", bootstrap, topic, "1s"))
    bounded_records = sum(d["records_written"] for d in bounded["datasets"])
    bounded_rps = bounded_records / bounded["phases"]["tasks"]
    out = {"records": records, "produce_s": produced_s, "checkpoints": len(rows), "span_s": span,
           "continuous_records_per_s": continuous_rps, "busy_records_per_s": busy_rps, "task_phase_records_per_s": tasks_rps,
           "bounded_tasks_s": bounded["phases"]["tasks"], "bounded_records": bounded_records, "bounded_wall_s": took,
           "bounded_task_records_per_s": bounded_rps, "continuous_over_bounded_tasks": continuous_rps / bounded_rps,
           "busy_over_bounded_tasks": busy_rps / bounded_rps, "task_phase_over_bounded_tasks": tasks_rps / bounded_rps}
    print(f"throughput: continuous {continuous_rps:.0f} rec/s over {records} records in {len(rows)} checkpoints "
          f"({span:.1f}s, produced in {produced_s:.1f}s); bounded task phase {bounded_rps:.0f} rec/s "
          f"(ratio {out['continuous_over_bounded_tasks']:.2f}); busy checkpoints {busy_rps:.0f} rec/s (ratio "
          f"{out['busy_over_bounded_tasks']:.2f}), their task phase {tasks_rps:.0f} rec/s (ratio {out['task_phase_over_bounded_tasks']:.2f})", flush=True)
    return out


def latency_and_memory(bootstrap: str, scratch: Path, rate: float, interval: float, seconds: float) -> dict[str, Any]:
    import fastavro

    topic, tmp = "steady", scratch / "steady"
    tmp.mkdir()
    create_topic(bootstrap, topic, PARTITIONS)
    job = job_file(tmp, bootstrap, topic, f"{interval}s")
    with Continuous(tmp, job) as run:
        run.warm(bootstrap, topic)
        warm = sum(end_offsets(bootstrap, topic).values())
        made = producer_result(start_producer(bootstrap, topic, rate, seconds, 0))
        run.wait_for(topic, end_offsets(bootstrap, topic))
        ended = time.monotonic() - run.t0
        record, events = run.stop(), run.events()
        first_minute, last_minute = run.peak(0, 60), run.peak(max(60, ended - 60), ended)
    started = sorted((e["timestamp"] / 1000, e["metadata"]["checkpoint"]) for e in events if e["name"] == "CheckpointStarted")
    committed = {e["metadata"]["checkpoint"]: e["timestamp"] / 1000 for e in events if e["name"] == "CheckpointCommitted"}
    starts = [t for t, _ in started]
    latencies: list[float] = []
    for path in (tmp / "output").rglob("*.avro"):
        # the task wrote the file after its checkpoint started and before it committed (a rename keeps the mtime)
        checkpoint = started[bisect.bisect_right(starts, path.stat().st_mtime) - 1][1]
        published = committed[checkpoint]
        with open(path, "rb") as f:
            latencies.extend(published - rec["ts"] / 1000 for rec in fastavro.reader(f) if rec["id"] < 10**12)
    assert len(latencies) == made["produced"] == sum(end_offsets(bootstrap, topic).values()) - warm, (len(latencies), made)
    assert min(latencies) > 0, "a record published before it was produced: the file-to-checkpoint mapping is wrong"
    rows = [r for r in record["checkpoints"] if r["records_written"]][1:]  # after the warm-up
    out = {"rate_target": rate, "rate_achieved": made["rate"], "interval_s": interval, "seconds": seconds,
           "records": len(latencies), "checkpoints": len(rows),
           "checkpoint_duration_median_s": statistics.median(r["duration_s"] for r in rows),
           "latency_p50_s": quantile(latencies, 0.5), "latency_p99_s": quantile(latencies, 0.99), "latency_min_s": min(latencies), "latency_max_s": max(latencies),
           "run_s": ended, "peak_rss_mib_first_minute": first_minute, "peak_rss_mib_last_minute": last_minute,
           "rss_last_over_first_minute": {k: last_minute[k] / first_minute[k] for k in first_minute if first_minute[k]}}
    print(f"latency at {made['rate']:.0f} rec/s (target {rate:.0f}), {interval}s interval: p50 {out['latency_p50_s']:.2f}s "
          f"p99 {out['latency_p99_s']:.2f}s over {len(latencies)} records; peak RSS MiB first minute {first_minute}, "
          f"last minute {last_minute}", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=20_000, help="records/s of the steady producer")
    ap.add_argument("--interval", type=float, default=5.0, help="checkpoint interval (s) under the steady producer")
    ap.add_argument("--steady-seconds", type=float, default=300.0, help="how long the steady producer writes")
    ap.add_argument("--records", type=int, default=1_000_000, help="records of the throughput phase")
    ap.add_argument("--trickle-seconds", type=float, default=45.0, help="how long the fixed-cost phase's trickle lasts")
    ap.add_argument("--produce", nargs=5, metavar=("BOOTSTRAP", "TOPIC", "RATE", "SECONDS", "FIRST_ID"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.produce:
        bootstrap, topic, rate, seconds, first_id = args.produce
        print(json.dumps(produce_steady(bootstrap, topic, float(rate), float(seconds), int(first_id))))
        return 0
    t0 = time.perf_counter()
    with LocalBroker() as broker, tempfile.TemporaryDirectory(prefix="bench-continuous-") as scratch:
        results = {"fixed_cost": fixed_cost(broker.bootstrap, Path(scratch), args.trickle_seconds),
                   "throughput": throughput(broker.bootstrap, Path(scratch), args.records),
                   "latency_and_memory": latency_and_memory(broker.bootstrap, Path(scratch), args.rate, args.interval,
                                                            args.steady_seconds)}
    results["settings"] = {k: v for k, v in vars(args).items() if k != "produce"} | {"spark_master": "local[2]", "cores": os.cpu_count()}
    results["bench_s"] = time.perf_counter() - t0
    print(json.dumps(results, indent=2))
    save("bench_continuous" if args.steady_seconds <= 300 else f"bench_continuous-{int(args.steady_seconds)}s", results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
