"""The Kafka world of the model-based test (see world.py): a Kafka → Avro job over one topic of a local Tansu broker
(tests/support/kafka_broker.py), read back with the Apache `avro` package.

Its rules, besides those every world has (a run in the driver or on real local Spark, a run killed at a commit point
or at random, recover, recover --abandon, compact with and without dedup, a second run at the same time): records
produced to some partitions, each partition sealed with a one-record batch (Tansu's end offset after a multi-record
batch is its base offset + 1); the topic deleted and created again (the job sets `on_topic_recreated: earliest`: what
was published of the old topic stays, once, the rest of it may be lost with it, and every record of the new topic is
owed once); `run --continuous` killed after a few checkpoints, with records produced between them; `state reset --to
P=K` back to an offset at or before the first record of partition P not yet published (one further ahead would skip
records on purpose; one of a topic the state does not know yet is read from its start anyway), after which every
record of P from K on is owed once more. Some messages are not JSON: the job sends them to a dead-letter topic (`quality.dead_letter`),
and the model owes each of them there as it owes a good record to the output (the output's ids are the Avro files'
and the dead-letter topic's).

Left out: a partition added to the topic, since Tansu has no CreatePartitions (the broker answers it with an error),
so the world cannot change that way here."""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.kafka_broker import create_topic, delete_topic, produce
from support.world import (
    SCHEMA,
    History,
    Rule,
    Violation,
    World,
    avro_ids,
    load_events,
    reap,
    start,
)

PARTITIONS = 2


@dataclass
class KafkaWorld(World):
    """A world of one topic: where each record of its current incarnation sits."""

    bootstrap: str = ""
    topic: str = ""
    ends: dict[int, int] = field(default_factory=lambda: dict.fromkeys(range(PARTITIONS), 0))
    placed: dict[int, tuple[int, int]] = field(default_factory=dict)  # id → (partition, offset), current topic only

    def bad_record(self) -> tuple[int, bytes]:
        """A message with the next id that is not JSON (a bad record, for the dead-letter topic)."""
        i = self.next_id
        self.next_id += 1
        return i, BAD + str(i).encode()


BAD = b"not json: "


def dead_letter_topic(world: KafkaWorld) -> str:
    return f"{world.topic}.dlq"


def dead_letter_ids(world: KafkaWorld) -> Counter[int]:
    """How many times each bad record's id is in the dead-letter topic (read to its end: past an end offset a broker
    reports short)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=world.bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", fetch_max_wait_ms=100)
    try:
        topic = dead_letter_topic(world)
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out: Counter[int] = Counter()
        quiet = 0
        while quiet < 2:
            polled = consumer.poll(timeout_ms=200)
            for records in polled.values():
                out.update(int(r.value[len(BAD):]) for r in records)
            quiet = 0 if polled else quiet + 1
        return out
    finally:
        consumer.close()


class KafkaHistory(History):
    """A history of a Kafka → Avro job against the broker at `bootstrap` (see the module's docstring)."""

    kind = "kafka"
    leased_share = 0.5  # half the histories: two drivers of the work directory kept apart by the lease alone
    pause_weight = 1

    def __init__(self, seed: int, steps: int, bootstrap: str, include: tuple[str, ...] = (),
                 pauses: tuple[int, ...] = ()) -> None:
        super().__init__(seed, steps, include, pauses)
        self.bootstrap = bootstrap

    def new_world(self, root: Path) -> World:
        root.mkdir(parents=True, exist_ok=True)
        world = KafkaWorld(root, bootstrap=self.bootstrap, topic=f"w{self.seed}-{uuid.uuid4().hex[:8]}")
        create_topic(world.bootstrap, world.topic, PARTITIONS)
        create_topic(world.bootstrap, dead_letter_topic(world), 2)
        return world

    def job(self, world: World) -> dict[str, Any]:
        assert isinstance(world, KafkaWorld)
        schema = world.root / "event.avsc"
        schema.write_text(json.dumps(SCHEMA))
        return {
            "job": {"name": "w", "work_dir": str(world.root / "work"), "max_task_retries": 1, "commit_parallelism": 1,
                    "commit_max_attempts": 100, "checkpoint_interval": "200ms"},
            "source": {"class": "kafka", "bootstrap_servers": world.bootstrap, "topics": [world.topic],
                       "max_workunits": 4, "request_timeout_ms": 5000, "idle_timeout_s": 5,
                       "on_topic_recreated": "earliest"},
            "converters": [{"class": "json_to_avro", "schema": str(schema)}],
            "quality": {"dead_letter": {"topic": dead_letter_topic(world)}},
            "writer": {"class": "avro", "codec": "null", "partition": {"column": "ts", "granularity": "DAY",
                                                                       "pattern": "yyyy/MM/dd"}},
            "publisher": {"final_dir": str(world.root / "output")},
            "spark": {"master": "local[1]", "in_driver_below": 0},
        }

    def output_ids(self, world: World) -> Counter[int]:
        assert isinstance(world, KafkaWorld)
        return avro_ids(world.root / "output") + dead_letter_ids(world)

    def rules(self) -> list[tuple[int, Rule]]:
        return [*super().rules(), (1, self.recreate_topic), (1, self.continuous_killed)]

    # --- rules ------------------------------------------------------------------------------------------------

    def produce(self, world: World, step: int) -> None:
        """Records to one partition or both, each partition sealed so that its end offset is exact."""
        assert isinstance(world, KafkaWorld)
        batches: dict[int, list[tuple[int, dict[str, Any]]]] = {}
        for p in self.rng.sample(range(PARTITIONS), self.rng.randint(1, PARTITIONS)):
            batches[p] = [world.record(self.rng.randrange(3)) for _ in range(self.rng.randint(1, 25))]
            if self.rng.random() < 0.4:  # a message that is not JSON: owed to the dead-letter topic
                batches[p].insert(self.rng.randrange(len(batches[p])), world.bad_record())
        ends = produce(world.bootstrap, world.topic, {p: [r if isinstance(r, bytes) else json.dumps(r).encode()
                                                          for _, r in recs] for p, recs in batches.items()})
        for p, recs in batches.items():
            for offset, (i, _) in enumerate(recs, start=world.ends[p]):
                world.placed[i] = (p, offset)
            if ends[p] != world.ends[p] + len(recs):
                raise Violation(self.seed, step, "produce", f"{world.topic}[{p}] ends at {ends[p]}, expected "
                                                            f"{world.ends[p] + len(recs)} (the broker's fault, not the job's)")
            world.ends[p] = ends[p]
            world.produced([i for i, _ in recs])

    def recreate_topic(self, world: World, step: int) -> None:
        """The topic deleted and created again: its offsets start over at 0 under a new topic id."""
        assert isinstance(world, KafkaWorld)
        world.withdraw(set(world.placed), self.output_ids(world))
        delete_topic(world.bootstrap, world.topic)
        create_topic(world.bootstrap, world.topic, PARTITIONS)
        world.placed.clear()
        world.ends = dict.fromkeys(range(PARTITIONS), 0)
        world.log.append(f"{step} topic re-created")
        if self.rng.random() < 0.8:
            self.produce(world, step)

    def continuous_killed(self, world: World, step: int) -> None:
        """`run --continuous` SIGKILLed after 1 to 3 checkpoints, with records produced after each."""
        assert isinstance(world, KafkaWorld)
        want = self.rng.randint(1, 3)
        linger = self.rng.uniform(0.0, 1.0)

        def committed() -> int:
            return sum(e.get("name") == "CheckpointCommitted" for e in load_events(world, "w"))

        seen = committed()
        proc = start(world, ["run", "job.yaml", "--continuous", "--in-process"])
        try:
            for _ in range(want):
                deadline = time.monotonic() + 90
                while committed() <= seen:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise Violation(self.seed, step, "continuous run", f"no checkpoint committed; exit {proc.poll()}")
                    time.sleep(0.05)
                seen = committed()
                self.produce(world, step)
            time.sleep(linger)
        finally:
            rc = reap(proc, kill=True)
        world.log.append(f"{step} continuous run killed after {want} checkpoints -> {rc}")

    def reset_to(self, world: World) -> tuple[list[str], Callable[[], set[int]]]:
        """A partition back to an offset no later than its first record not yet published."""
        assert isinstance(world, KafkaWorld)
        p = self.rng.randrange(PARTITIONS)
        now = self.output_ids(world)
        mine = sorted((offset, i) for i, (q, offset) in world.placed.items() if q == p)
        first_missing = next((offset for offset, i in mine if not now[i]), world.ends[p])
        k = self.rng.randint(0, first_missing)
        return (["--dataset", world.topic, "--to", f"{p}={k}"],
                lambda: {i for offset, i in mine if offset >= k})
