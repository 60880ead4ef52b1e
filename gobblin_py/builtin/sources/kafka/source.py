"""The `kafka` source: each topic is a dataset, each partition's offset a watermark.

Planning reads every partition's earliest and end offsets once; a WorkUnit covers
`[committed offset, end offset at planning)` of one partition, and WorkUnits are bin-packed
into at most `max_workunits` tasks by the size their partition had last time, and into fewer when the run
is small (`min_records_per_workunit`): each Spark task costs its own scheduling, whatever it reads.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any

from gobblin_py.api import Extractor, MultiWorkUnit, Source, SourceState, TaskContext, WorkUnit
from gobblin_py.api.names import workunit_id
from gobblin_py.builtin.sources.packing import worst_fit_decreasing
from gobblin_py.builtin.sources.kafka.settings import (TOPIC_PREFIX_CHARS, KafkaSettings, broker_endpoint, consumer_settings,
                                                   open_consumer)
from gobblin_py.errors import SourceError, describe

log = logging.getLogger(__name__)

NO_TOPIC_ID = {None, "", "00000000-0000-0000-0000-000000000000"}


@dataclass(frozen=True)
class TopicIdentity:
    """Which incarnation of each topic a plan reads, so a deleted and re-created topic (offsets from 0 again)
    never gets an earlier incarnation's output names: the cluster id and each topic's id (KIP-516, Kafka 2.8+);
    from a broker without topic ids, the timestamp of the first record of each planned range."""

    cluster_id: str
    topic_ids: dict[str, str]
    first_timestamps: dict[tuple[str, int], int] = field(default_factory=dict)

    def of(self, tp: Any, start: int) -> str:
        topic_id = self.topic_ids.get(tp.topic)
        first = self.first_timestamps.get((tp.topic, tp.partition), "empty")  # an empty range (an offset reset) writes no file
        return f"id:{topic_id}" if topic_id else f"first-record-ts:{first}@{start}"

    @classmethod
    def lookup(cls, s: KafkaSettings, consumer: Any, ranges: list[tuple[Any, int, int]]) -> TopicIdentity:
        """Ask the brokers (an admin client for the ids; `consumer` reads first records where there are none)."""
        from kafka import KafkaAdminClient

        settings = consumer_settings(s)
        admin = KafkaAdminClient(**{k: v for k, v in settings.items() if k in KafkaAdminClient.DEFAULT_CONFIG})
        try:
            cluster_id = str(admin.describe_cluster().get("cluster_id") or "")
            described = admin.describe_topics(sorted({tp.topic for tp, _, _ in ranges}))
        finally:
            admin.close()
        ids = {d["name"]: str(d["topic_id"]) for d in described
               if not d.get("error_code") and d.get("topic_id") not in NO_TOPIC_ID}
        without = {tp: start for tp, start, end in ranges if tp.topic not in ids and start < end}
        return cls(cluster_id, ids, first_timestamps(s, consumer, without) if without else {})


def first_timestamps(s: KafkaSettings, consumer: Any, starts: dict[Any, int]) -> dict[tuple[str, int], int]:
    """The timestamp of the first record at or after each partition's start offset (only non-empty ranges are asked)."""
    consumer.assign(list(starts))
    for tp, start in starts.items():
        consumer.seek(tp, start)
    found: dict[tuple[str, int], int] = {}
    deadline = time.monotonic() + s.idle_timeout_s
    while len(found) < len(starts):
        if time.monotonic() > deadline:
            missing = ", ".join(f"{tp.topic}/{tp.partition}@{starts[tp]}" for tp in starts if (tp.topic, tp.partition) not in found)
            raise SourceError(f"Kafka broker(s) {s.brokers} report no topic id, and the first record of {missing} could not be "
                              f"read within {s.idle_timeout_s:.0f} s to tell this topic from an earlier one of the same name")
        for tp, records in consumer.poll(timeout_ms=500, max_records=len(starts)).items():
            if records and (tp.topic, tp.partition) not in found:
                found[(tp.topic, tp.partition)] = int(records[0].timestamp)
                consumer.pause(tp)
    consumer.unsubscribe()
    return found


class KafkaSource(Source):
    """One WorkUnit per partition with new data; partitions packed into at most `max_workunits` tasks."""

    Settings = KafkaSettings
    keeps_key_stats = True

    def get_workunits(self, state: SourceState) -> list[WorkUnit | MultiWorkUnit]:
        from kafka import TopicPartition
        from kafka.errors import KafkaError

        s: KafkaSettings = self.settings
        consumer = open_consumer(s)
        try:
            topics = self._select_topics(consumer.topics())
            ranges: list[tuple[Any, int, int]] = []
            for topic in topics:
                partitions = consumer.partitions_for_topic(topic) or set()
                committed = state.watermarks(topic)
                gone = sorted(int(k) for k in committed if int(k) not in partitions)
                if gone:
                    raise SourceError(f"topic {topic!r} on {s.brokers} no longer has partition(s) {', '.join(map(str, gone))} "
                                      "that earlier runs read; nothing was extracted (reset the dataset's state to go on)")
                tps = [TopicPartition(topic, p) for p in sorted(partitions)]
                begins = consumer.beginning_offsets(tps)
                ends = consumer.end_offsets(tps)
                for tp in tps:
                    planned = self._plan_partition(tp, committed.get(str(tp.partition)), begins[tp], ends[tp])
                    if planned is not None:
                        ranges.append((tp, *planned))
            ranges = capped(ranges, state.max_records)
            identity = TopicIdentity.lookup(s, consumer, ranges) if ranges else None
        except KafkaError as exc:
            raise SourceError(f"Kafka broker(s) {s.brokers}: could not read topic metadata or offsets: {describe(exc)}") from None
        finally:
            consumer.close()
        units = [_workunit(tp, start, end, identity) for tp, start, end in ranges if identity is not None]
        records = sum(end - start for _, start, end in ranges)
        tasks = min(s.max_workunits, max(1, -(-records // s.min_records_per_workunit)))
        return worst_fit_decreasing(units, tasks, lambda u: self.estimated_bytes(u, state))

    def estimated_bytes(self, workunit: WorkUnit, state: SourceState) -> float:
        """Records in range × the partition's bytes per record last time (1 KiB when unknown)."""
        records = max(0, int(workunit.expected_high_watermark or 0) - int(workunit.low_watermark or 0))
        last = state.key_stat(workunit.dataset, workunit.watermark_key)
        per_record = last["bytes"] / last["records"] if last and last.get("records") else 1024.0
        return records * per_record

    def _select_topics(self, available: set[str]) -> list[str]:
        s: KafkaSettings = self.settings
        if s.topics is not None:
            missing = [t for t in s.topics if t not in available]
            if missing:
                raise SourceError(f"topic(s) {', '.join(map(repr, missing))} do not exist on Kafka broker(s) {s.brokers}")
            selected = list(s.topics)
        else:
            pattern = re.compile(s.topic_pattern or "")
            selected = sorted(t for t in available if pattern.fullmatch(t) and not t.startswith("__"))
        excluded = [re.compile(x) for x in s.exclude_topics]
        return [t for t in selected if not any(x.fullmatch(t) for x in excluded)]

    def _plan_partition(self, tp: Any, committed: Any, begin: int, end: int) -> tuple[int, int] | None:
        """The offset range `[start, end)` to read of one partition, or None when it has no new data."""
        s: KafkaSettings = self.settings
        where = f"{tp.topic}/{tp.partition} on {s.brokers}"
        if committed is None:
            start = begin if s.bootstrap_with_offset == "earliest" else end
            new = True
        else:
            start, new = int(committed), False
            if start < begin or start > end:
                policy = s.reset_on_offset_out_of_range
                if policy == "fail":
                    raise SourceError(f"{where}: committed offset {start} is outside the available range [{begin}, {end}); "
                                      "set reset_on_offset_out_of_range: earliest or latest to go on")
                reset = begin if policy == "earliest" else end
                skipped = f"offsets {start}..{begin - 1} ({begin - start} records) were deleted by retention" if start < begin \
                    else f"the partition now ends at {end}, before the committed offset"
                log.warning("%s: committed offset %d is out of range [%d, %d): %s; resetting to %s offset %d%s",
                            where, start, begin, end, skipped, policy, reset,
                            f" and skipping offsets {max(start, begin)}..{end - 1}" if policy == "latest" and end > max(start, begin) else "")
                start, new = reset, True  # an empty range still commits the reset offset
        if start >= end and not new:
            return None  # no new data: the committed watermark carries forward unchanged
        return start, end

    def endpoints(self, workunit: WorkUnit) -> list[str]:
        """The brokers every task reads from: once a task of the run gives up on them, the others do not try."""
        return [broker_endpoint(self.settings)]

    def get_extractor(self, workunit: WorkUnit, context: TaskContext) -> Extractor:
        if self.settings.client == "confluent":
            from gobblin_py.builtin.sources.kafka.confluent import ConfluentKafkaExtractor

            return ConfluentKafkaExtractor(self.settings, workunit, context)
        from gobblin_py.builtin.sources.kafka.extractor import KafkaExtractor

        return KafkaExtractor(self.settings, workunit, context)


def capped(ranges: list[tuple[Any, int, int]], limit: int | None) -> list[tuple[Any, int, int]]:
    """The ranges cut to `limit` records in all, each partition's share in proportion to its backlog (largest
    remainders first), so every partition moves on; a partition whose share is nothing waits for the next run."""
    total = sum(end - start for _, start, end in ranges)
    if limit is None or total <= limit:
        return ranges
    shares = [limit * (end - start) / total for _, start, end in ranges]
    taken = [int(x) for x in shares]
    for i in sorted(range(len(ranges)), key=lambda i: shares[i] - taken[i], reverse=True)[:limit - sum(taken)]:
        taken[i] += 1
    return [(tp, start, start + n) for (tp, start, end), n in zip(ranges, taken) if n > 0 or start == end]


def _workunit(tp: Any, start: int, end: int, identity: TopicIdentity) -> WorkUnit:
    """The WorkUnit of offsets `[start, end)`, named by cluster, topic identity, partition and range."""
    wu_id = workunit_id(f"{tp.topic[:TOPIC_PREFIX_CHARS]}.{tp.partition}.{start}-{end}", "kafka", identity.cluster_id,
                        tp.topic, identity.of(tp, start), tp.partition, start, end)
    return WorkUnit(id=wu_id, dataset=tp.topic, watermark_key=str(tp.partition), low_watermark=start,
                    expected_high_watermark=end, props={"topic": tp.topic, "partition": tp.partition})
