"""How far a Kafka job is behind (`gobblin-py lag`): per partition, the records past the committed offset and the age
of the first of them, measured with short timeouts so a lag probe gives up rather than waits."""

from __future__ import annotations

import time
from typing import Any

from gobblin_py.api import SourceState
from gobblin_py.api.lag import DatasetLag, PartitionLag, unmeasured
from gobblin_py.builtin.sources.kafka.identity import describe_topics, first_records, recreated
from gobblin_py.builtin.sources.kafka.settings import KafkaSettings, open_consumer
from gobblin_py.builtin.sources.kafka.subscriber import select_topics
from gobblin_py.errors import SourceError, describe


def backlog(settings: KafkaSettings, state: SourceState, timeout_s: float) -> list[DatasetLag]:
    """Per partition, end offset − committed offset (the last stable offset: `read_committed`, as runs read), and
    the age of the first record not committed (one record fetched; None when nothing waits). A topic re-created
    since its offsets were committed, or missing, is an error, never a small figure."""
    from kafka import TopicPartition
    from kafka.errors import KafkaError

    s = lag_settings(settings, timeout_s)
    consumer = open_consumer(s)
    try:
        available = consumer.topics()
        topics = select_topics(s, available | set(s.topics or []))
        described = describe_topics(s, [t for t in topics if t in available], consumer)
        out = []
        for topic in topics:
            if topic not in available:
                out.append(unmeasured(topic, f"topic {topic!r} does not exist on Kafka broker(s) {s.brokers}"))
                continue
            tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or set())]
            begins, ends = consumer.beginning_offsets(tps), consumer.end_offsets(tps)
            committed = state.watermarks(topic)
            gone = recreated(s, topic, described[1].get(topic), committed, state.kept(topic), consumer, begins, ends)
            if gone is not None:
                out.append(unmeasured(topic, gone.message(s.brokers) + ": the lag of the new topic is not "
                                      "measured until a run reads it (see on_topic_recreated)"))
                continue
            out.append(topic_lag(s, consumer, topic, tps, begins, ends, committed))
        return out
    except KafkaError as exc:
        raise SourceError(f"Kafka broker(s) {s.brokers}: could not read topic metadata or offsets: {describe(exc)}") from None
    finally:
        consumer.close()


def topic_lag(s: KafkaSettings, consumer: Any, topic: str, tps: list[Any], begins: dict[Any, int],
              ends: dict[Any, int], committed: dict[str, Any]) -> DatasetLag:
    """One topic's lag from its offsets; a partition never committed starts where its first run would
    (`bootstrap_with_offset`), one whose committed offsets retention deleted at its first offset."""
    starts, problems = {}, []
    for tp in tps:
        mark = committed.get(str(tp.partition))
        start = int(mark) if mark is not None else begins[tp] if s.bootstrap_with_offset == "earliest" else ends[tp]
        if start > ends[tp]:
            problems.append(f"partition {tp.partition}'s committed offset {start} is past its end offset {ends[tp]}")
        starts[tp] = max(start, begins[tp])
    if problems:
        return unmeasured(topic, f"topic {topic!r} on {s.brokers}: " + "; ".join(problems))
    pending = {tp: start for tp, start in starts.items() if start < ends[tp]}
    firsts = first_records(s, consumer, pending, required=False) if pending else {}
    now_ms = time.time() * 1000
    parts = []
    for tp in tps:
        first = firsts.get((tp.topic, tp.partition))
        seconds = max(0.0, (now_ms - first[1]) / 1000) if first is not None and first[1] >= 0 else None
        parts.append(PartitionLag(f"{topic}-{tp.partition}", ends[tp] - starts[tp], seconds))
    ages = [p.seconds for p in parts if p.seconds is not None]
    return DatasetLag(topic, records=sum(p.records or 0 for p in parts), seconds=max(ages) if ages else None,
                      unit="records", partitions=tuple(parts))


def lag_settings(s: KafkaSettings, timeout_s: float) -> KafkaSettings:
    """The settings with their timeouts cut to `timeout_s` (a lag measurement gives up rather than wait) and small
    fetches: it needs one record per partition (a broker still returns at least one whole batch)."""
    ms = max(1000, int(timeout_s * 1000))
    return s.model_copy(update={"request_timeout_ms": min(s.request_timeout_ms, ms),
                                "idle_timeout_s": min(s.idle_timeout_s, max(0.5, timeout_s / 2)),
                                "max_partition_fetch_bytes": LAG_FETCH_BYTES, "fetch_max_bytes": 16 * LAG_FETCH_BYTES})


LAG_FETCH_BYTES = 64 * 1024
"""Bytes a lag measurement's fetch asks per partition."""
