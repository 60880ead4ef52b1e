"""Which incarnation of a topic a plan reads (its id, or a record read) and whether the topic was re-created since its
offsets were committed: a re-created topic restarts its offsets, so the committed ones must never be read on in it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from gobblin_py.builtin.sources.kafka.settings import KafkaSettings, consumer_settings
from gobblin_py.errors import SourceError

NO_TOPIC_ID = {None, "", "00000000-0000-0000-0000-000000000000"}


@dataclass(frozen=True)
class TopicIdentity:
    """Which incarnation of each topic a plan reads, so a deleted and re-created topic (offsets from 0 again)
    never gets an earlier incarnation's output names: the cluster id and each topic's id (KIP-516, Kafka 2.8+);
    from a broker without topic ids, the timestamp of the first record of each planned range."""

    cluster_id: str
    topic_ids: dict[str, str]
    first_timestamps: dict[tuple[str, int], int] = field(default_factory=dict)
    first_records: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)  # offset and timestamp

    def of(self, tp: Any, start: int) -> str:
        topic_id = self.topic_ids.get(tp.topic)
        first = self.first_timestamps.get((tp.topic, tp.partition), "empty")  # an empty range (an offset reset) writes no file
        return f"id:{topic_id}" if topic_id else f"first-record-ts:{first}@{start}"

    @classmethod
    def lookup(cls, s: KafkaSettings, consumer: Any, ranges: list[tuple[Any, int, int]],
               described: tuple[str, dict[str, str]] | None = None) -> TopicIdentity:
        """Ask the brokers (an admin client for the ids, unless `described` has them; `consumer` reads first records
        where there are none)."""
        cluster_id, ids = described if described is not None else describe_topics(s, sorted({tp.topic for tp, _, _ in ranges}))
        without = {tp: start for tp, start, end in ranges if tp.topic not in ids and start < end}
        found = first_records(s, consumer, without) if without else {}
        return cls(cluster_id, ids, {k: ts for k, (_, ts) in found.items()}, found)


def describe_topics(s: KafkaSettings, topics: list[str], consumer: Any = None) -> tuple[str, dict[str, str]]:
    """The cluster id and each topic's id (KIP-516; a broker older than Kafka 2.8 reports none): from the metadata
    `consumer` has just fetched where it holds them (no round trip: a continuous run plans every checkpoint), else
    from an admin client."""
    from kafka import KafkaAdminClient

    cluster = getattr(getattr(consumer, "_client", None), "cluster", None)  # kafka-python keeps its metadata there
    if cluster is not None and getattr(cluster, "cluster_id", None) and hasattr(cluster, "topic_id"):
        found = {t: str(cluster.topic_id(t)) for t in topics if cluster.topic_id(t) is not None}
        found = {t: i for t, i in found.items() if i not in NO_TOPIC_ID}
        if len(found) == len(topics):
            return str(cluster.cluster_id), found

    settings = consumer_settings(s)
    admin = KafkaAdminClient(**{k: v for k, v in settings.items() if k in KafkaAdminClient.DEFAULT_CONFIG})
    try:
        cluster_id = str(admin.describe_cluster().get("cluster_id") or "")
        described = admin.describe_topics(topics) if topics else []
    finally:
        admin.close()
    return cluster_id, {d["name"]: str(d["topic_id"]) for d in described
                        if not d.get("error_code") and d.get("topic_id") not in NO_TOPIC_ID}


def first_timestamps(s: KafkaSettings, consumer: Any, starts: dict[Any, int]) -> dict[tuple[str, int], int]:
    """The timestamp of the first record at or after each partition's start offset (only non-empty ranges are asked)."""
    return {k: ts for k, (_, ts) in first_records(s, consumer, starts).items()}


def first_records(s: KafkaSettings, consumer: Any, starts: dict[Any, int], required: bool = True) -> dict[tuple[str, int], tuple[int, int]]:
    """The offset and timestamp of the first record at or after each partition's start offset; a partition that gives
    none within `idle_timeout_s` fails (SourceError), or is left out unless `required`."""
    consumer.assign(list(starts))
    for tp, start in starts.items():
        consumer.seek(tp, start)
    found: dict[tuple[str, int], tuple[int, int]] = {}
    deadline = time.monotonic() + s.idle_timeout_s
    while len(found) < len(starts):
        if time.monotonic() > deadline:
            if not required:
                break
            missing = ", ".join(f"{tp.topic}/{tp.partition}@{starts[tp]}" for tp in starts if (tp.topic, tp.partition) not in found)
            raise SourceError(f"Kafka broker(s) {s.brokers} report no topic id, and the first record of {missing} could not be "
                              f"read within {s.idle_timeout_s:.0f} s to tell this topic from an earlier one of the same name")
        for tp, records in consumer.poll(timeout_ms=500, max_records=len(starts)).items():
            if records and (tp.topic, tp.partition) not in found:
                found[(tp.topic, tp.partition)] = (int(records[0].offset), int(records[0].timestamp))
                consumer.pause(tp)
    consumer.unsubscribe()
    return found


KEPT_IDS = "topic_ids"
"""Kept with the watermarks (`state.topic_ids`): partition → the id of the topic its committed offset belongs to."""
KEPT_FIRST = "first_records"
"""Kept instead from a broker without topic ids (`state.first_records`): partition → [offset, timestamp] of a record
read, which the same topic still has (until retention deletes it) and a re-created one almost never does."""


@dataclass(frozen=True)
class Recreated:
    """A topic deleted and created again since its offsets were committed: the partitions whose committed offsets
    belong to the earlier topic, and how that was seen (both ids, or the record that differs)."""

    topic: str
    partitions: list[int]
    evidence: str

    def message(self, brokers: str) -> str:
        return (f"topic {self.topic!r} on {brokers} was deleted and created again since its offsets were committed "
                f"({self.evidence}): the committed offsets of partition(s) {', '.join(map(str, self.partitions))} are "
                "positions in the earlier topic")


def state_props(identity: TopicIdentity, tp: Any) -> dict[str, Any]:
    """The `state.<name>` prop keeping the topic's identity with the partition's watermark: the topic id, or the
    range's first record (None clears an earlier one when the range is empty)."""
    key = str(tp.partition)
    topic_id = identity.topic_ids.get(tp.topic)
    if topic_id:
        return {f"state.{KEPT_IDS}": {key: topic_id}}
    first = identity.first_records.get((tp.topic, tp.partition))
    return {f"state.{KEPT_FIRST}": {key: list(first) if first else None}}

def recreated(s: KafkaSettings, topic: str, topic_id: str | None, committed: dict[str, Any], kept: dict[str, Any],
              consumer: Any, begins: dict[Any, int], ends: dict[Any, int]) -> Recreated | None:
    """Whether the topic is another incarnation than the one its committed offsets were read from: its id differs
    from the one recorded with them, or (a broker without topic ids) a record read before now differs or is past
    the end. Once one partition shows it, every committed partition not shown to be of the current topic is reset.
    A partition with nothing recorded (state written before ids were recorded) is adopted."""
    current = {str(tp.partition): tp for tp in ends if str(tp.partition) in committed}
    if topic_id is not None:
        recorded = kept.get(KEPT_IDS) if isinstance(kept.get(KEPT_IDS), dict) else {}
        old = sorted({v for k, v in recorded.items() if k in current and v and v != topic_id})
        if not old:
            return None
        stale = sorted(int(k) for k in current if recorded.get(k) != topic_id)
        return Recreated(topic, stale, f"its id is now {topic_id}; the offsets were committed under id {' and '.join(old)}")
    recorded = kept.get(KEPT_FIRST) if isinstance(kept.get(KEPT_FIRST), dict) else {}
    seen = {k: v for k, v in recorded.items() if k in current and isinstance(v, list) and len(v) == 2}
    evidence, check = [], {}
    for key, (offset, _timestamp) in sorted(seen.items()):
        tp = current[key]
        if offset >= ends[tp]:
            evidence.append(f"partition {key} ends at offset {ends[tp]}, before offset {offset} read earlier")
        elif offset >= begins[tp]:
            check[tp] = offset
    matched = set()
    for (_, partition), (offset, timestamp) in (first_records(s, consumer, check, required=False) if check else {}).items():
        key = str(partition)
        if offset != seen[key][0]:
            continue  # that record is gone (compacted): this partition cannot tell
        if timestamp == seen[key][1]:
            matched.add(key)
        else:
            evidence.append(f"partition {key}'s record at offset {offset} has timestamp {timestamp}, not {seen[key][1]} as "
                            "read earlier")
    if not evidence:
        return None
    stale = sorted(int(k) for k in current if k not in matched)
    return Recreated(topic, stale, "the broker reports no topic ids; " + "; ".join(evidence))