"""Benchmark: CPU time per record of one Kafka → JSON → Parquet task in process (no Spark), against the
hand-written script's and against each Kafka client reading alone, on the same topic in the same run.

    .venv/bin/python scripts/bench_kafka_cpu.py [--records 1000000] [--rounds 3] [--profile confluent|kafka-python]

Starts a local broker (Tansu, 127.0.0.1), produces N ~100-byte JSON events into 4 sealed partitions (as
scripts/bench_kafka.py does), then alternates, `rounds` times: the baseline script (run in this process), a task
per partition with each client (the job bench_kafka.py runs, `sink: parquet`), and the floors: kafka-python's
poll loop with the baseline's settings and confluent-kafka's consume loop with gobblin-py's, doing nothing with
the records. CPU time (`time.process_time()`: every thread of the process, the clients' I/O threads included)
does not depend on how busy the machine is, where wall time does. Prints the median µs of CPU per record of each
and its ratio to the baseline's in the same round; writes scripts/results/bench_kafka_cpu-<N>.json.
`--profile` prints the cProfile of one task run with that client.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import pstats
import runpy
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench_kafka import (  # puts the repo on sys.path
    PARTITIONS,
    REPO,
    TOPIC,
    LocalBroker,
    create_topic,
    gobblin_job,
    produce,
)
from bench_results import save

from gobblin_py.api import WorkUnit
from gobblin_py.builtin.sources.kafka.split import KafkaSplit
from gobblin_py.config import load_job
from gobblin_py.runtime.task.attempt import run_task
from gobblin_py.runtime.task.spec import TaskSpec

CLIENTS = ("kafka-python", "confluent")


def baseline(bootstrap: str, ends: dict[int, int], out: Path) -> None:
    """scripts/baseline_kafka_to_avro.py as it is, run in this process."""
    argv = sys.argv
    sys.argv = ["baseline_kafka_to_avro.py", bootstrap, TOPIC, str(out), "--ends",
                ",".join(f"{p}={e}" for p, e in sorted(ends.items()))]
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
            runpy.run_path(str(REPO / "scripts" / "baseline_kafka_to_avro.py"), run_name="__main__")
    finally:
        sys.argv = argv


def tasks(bootstrap: str, ends: dict[int, int], client: str, tmp: Path) -> None:
    """One gobblin-py task per partition, as a Spark executor would run it; fails on any bad result."""
    spec = load_job(gobblin_job(tmp, bootstrap, "deflate", client, "parquet"))
    for p, end in sorted(ends.items()):
        wu = WorkUnit(id=f"wu{p}", dataset=TOPIC, watermark_key=str(p), low_watermark=0, expected_high_watermark=end,
                      split=KafkaSplit(topic=TOPIC, partition=p, client=client).packed())
        [result] = run_task(TaskSpec(job=spec, run_id="cpu", unit=wu))
        if result.error or result.records_written != end:
            raise SystemExit(f"task of partition {p} failed or short: {result.error or result.records_written}")


def kafka_python_floor(bootstrap: str, ends: dict[int, int]) -> None:
    """kafka-python's poll loop with the baseline's consumer settings, nothing done with a record."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             fetch_max_bytes=64 * 1024 * 1024, max_partition_fetch_bytes=16 * 1024 * 1024,
                             fetch_max_wait_ms=200)
    for p, end in sorted(ends.items()):
        tp = TopicPartition(TOPIC, p)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        offset = 0
        while offset < end:
            records = consumer.poll(timeout_ms=1000, max_records=20000).get(tp, ())
            if records:
                offset = records[-1].offset + 1
    consumer.close()


def confluent_floor(bootstrap: str, ends: dict[int, int]) -> None:
    """confluent-kafka's consume loop with gobblin-py's settings, taking each message's value and nothing more."""
    from confluent_kafka import Consumer, TopicPartition

    from gobblin_py.builtin.sources.kafka.confluent import confluent_settings
    from gobblin_py.builtin.sources.kafka.settings import KafkaSettings

    settings = KafkaSettings(bootstrap_servers=bootstrap, topics=[TOPIC], client="confluent")
    for p, end in sorted(ends.items()):
        consumer = Consumer(confluent_settings(settings, "bench-cpu"))
        consumer.assign([TopicPartition(TOPIC, p, 0)])
        offset = 0
        while offset < end:
            messages = [m for m in consumer.consume(num_messages=min(20000, end - offset), timeout=1.0) if m.error() is None]
            _ = [m.value() for m in messages]
            if messages:
                offset = messages[-1].offset() + 1
        consumer.close()


def timed(fn: Callable[[], None]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of `fn()`."""
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - cpu, time.perf_counter() - wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--profile", choices=CLIENTS, help="print the cProfile of one task run with this client")
    args = ap.parse_args()
    with LocalBroker() as broker, tempfile.TemporaryDirectory(prefix="bench-kafka-cpu-") as scratch:
        create_topic(broker.bootstrap, TOPIC, PARTITIONS)
        ends = produce(broker.bootstrap, args.records)
        total = sum(ends.values())
        b = broker.bootstrap

        def scratch_dir(name: str) -> Path:
            path = Path(scratch) / name
            shutil.rmtree(path, ignore_errors=True)
            path.mkdir()
            return path

        steps: dict[str, Callable[[], None]] = {
            "baseline": lambda: baseline(b, ends, scratch_dir("baseline")),
            "kafka-python floor": lambda: kafka_python_floor(b, ends),
            "confluent floor": lambda: confluent_floor(b, ends),
            **{f"task {c}": (lambda c=c: tasks(b, ends, c, scratch_dir(c))) for c in CLIENTS},
        }
        for c in CLIENTS:  # once untimed: imports and first connections are not what is measured
            tasks(b, ends, c, scratch_dir(c))
        rounds: list[dict[str, dict[str, float]]] = []
        for r in range(args.rounds):
            row = {}
            for name, fn in steps.items():
                cpu, wall = timed(fn)
                row[name] = {"cpu_us": cpu / total * 1e6, "wall_us": wall / total * 1e6}
            rounds.append(row)
            print(f"round {r + 1}: " + ", ".join(f"{k} {v['cpu_us']:.2f}" for k, v in row.items()) + " µs of CPU/record", flush=True)
        summary: dict[str, dict[str, float]] = {}
        for name in steps:
            summary[name] = {
                "cpu_us_per_record": statistics.median(row[name]["cpu_us"] for row in rounds),
                "wall_us_per_record": statistics.median(row[name]["wall_us"] for row in rounds),
                "cpu_of_baseline": statistics.median(row[name]["cpu_us"] / row["baseline"]["cpu_us"] for row in rounds),
            }
            s = summary[name]
            print(f"{name:>20}: {s['cpu_us_per_record']:6.2f} µs CPU/record ({s['cpu_of_baseline']:.2f}× the baseline's), "
                  f"wall {s['wall_us_per_record']:6.2f} µs/record")
        if args.profile:
            profile = cProfile.Profile()
            profile.runcall(tasks, b, ends, args.profile, scratch_dir("profile"))
            out = io.StringIO()
            pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(20)
            print(out.getvalue())
    save(f"bench_kafka_cpu-{total}", {"records": total, "rounds": rounds, "summary": summary})
    return 0


if __name__ == "__main__":
    sys.exit(main())
