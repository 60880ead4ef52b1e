"""`gobblin-py demo kafka`: a local broker, two topics of sample events, a job file for them, and one run of it.

Everything it writes goes under one directory (default `./kafka-demo`): the job file, its Avro schema, the job's
work directory and its output. It then keeps producing until Ctrl-C, so that each further run of the printed
command ingests what arrived since the last one, exactly once.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gobblin_py.demo.broker import (
    LocalBroker,
    check_port,
    create_topic,
    free_port,
    produce_json,
)

TOPICS = ("events", "clicks")
PARTITIONS = 4
DAY_MS = 86_400_000
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z

EVENT_SCHEMA: dict[str, Any] = {
    "type": "record", "name": "Event", "namespace": "gobblin_py.demo",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "user", "type": "string"},
        {"name": "kind", "type": "string"},
        {"name": "amount", "type": ["null", "double"], "default": None},
        {"name": "country", "type": ["null", "string"], "default": None},
    ],
}
"""The events' Avro schema (jobs/schemas/event.avsc's fields), written beside the job file."""


@dataclass(frozen=True)
class DemoOptions:
    """What `gobblin-py demo kafka` was asked for."""

    directory: Path
    port: int = 9092
    rate: int = 200
    seconds: float = 0.0
    once: bool = False
    first_batch: int = 100


class EventMaker:
    """Sample events with unique ids, spread over three days from 2026-01-01."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)

    def make(self, n: int, kind: str) -> list[dict[str, Any]]:
        """`n` new events of `kind`."""
        out = []
        for i in range(n):
            eid = next(self._ids)
            out.append({"id": eid, "ts": START_MS + (i % 3) * DAY_MS + eid % 1000, "user": f"u{eid % 97}",
                        "kind": kind, "amount": float(eid % 50), "country": "DE"})
        return out


def write_job(directory: Path, bootstrap: str) -> Path:
    """The demo's job file and schema under `directory`, with absolute paths so it runs from anywhere; its path."""
    directory.mkdir(parents=True, exist_ok=True)
    schema = directory / "event.avsc"
    schema.write_text(json.dumps(EVENT_SCHEMA, indent=2) + "\n")
    job = {
        "job": {"name": "kafka-demo", "work_dir": str(directory / "work")},
        "source": {"class": "kafka", "bootstrap_servers": bootstrap, "topics": list(TOPICS)},
        "converters": [{"class": "json_to_avro", "schema": str(schema)}],
        "writer": {"class": "avro", "codec": "deflate", "partition": {"column": "ts", "granularity": "DAY", "pattern": "yyyy/MM/dd"}},
        "publisher": {"final_dir": str(directory / "output")},
    }
    path = directory / "kafka-demo.yaml"
    path.write_text("# Written by `gobblin-py demo kafka`: the demo broker's topics → Avro under output/, exactly once.\n"
                    + yaml.safe_dump(job, sort_keys=False))
    return path


def produce(bootstrap: str, maker: EventMaker, per_partition: int) -> int:
    """`per_partition` new events into every partition of both topics; how many were sent."""
    return sum(produce_json(bootstrap, topic, {p: maker.make(per_partition, topic[:-1]) for p in range(PARTITIONS)})
               for topic in TOPICS)


def run_job(job: Path, env: dict[str, str] | None = None) -> int:
    """One `gobblin-py run` of a demo's job in a child process (`env` added to ours), its output on ours; its exit code."""
    return subprocess.run([sys.executable, "-m", "gobblin_py.cli.main", "run", str(job)],
                          env={**os.environ, **(env or {})}, check=False).returncode


def demo(options: DemoOptions, say: Callable[[str], None] = print) -> int:
    """Start the broker, produce, run the job once, then (unless `once`) produce until stopped; the run's exit code."""
    directory = options.directory.resolve()
    port = options.port or free_port()
    check_port(port)
    with LocalBroker(port) as broker:
        for topic in TOPICS:
            create_topic(broker.bootstrap, topic, PARTITIONS)
        job = write_job(directory, broker.bootstrap)
        maker = EventMaker()
        sent = produce(broker.bootstrap, maker, options.first_batch // (len(TOPICS) * PARTITIONS) or 1)
        say(f"broker on {broker.bootstrap} (in memory: stopping it drops the topics); topics {', '.join(TOPICS)}, "
            f"{PARTITIONS} partitions each; {sent} events produced")
        say(f"running: gobblin-py run {job}")
        code = run_job(job)
        say(f"output: {directory / 'output'} (Avro, one directory per topic and day)")
        if options.once:
            return code
        say(f"producing {options.rate} events/s; in another terminal run again, as often as you like:\n\n"
            f"    gobblin-py run {job}\n\nCtrl-C stops the broker.")
        started = time.monotonic()
        per_partition = max(1, options.rate // (2 * len(TOPICS) * PARTITIONS))
        try:
            while not options.seconds or time.monotonic() - started < options.seconds:
                sent += produce(broker.bootstrap, maker, per_partition)
                print(f"\r{sent} events produced", end="", file=sys.stderr, flush=True)
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        say(f"\nstopping the broker after {sent} events")
    return code
