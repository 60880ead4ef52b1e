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
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from gobblin_py.api import Extractor, MultiWorkUnit, Settings, Source, SourceState, TaskContext, WorkUnit
from gobblin_py.builtin.output_names import workunit_id
from gobblin_py.builtin.packing import worst_fit_decreasing
from gobblin_py.fs.paths import ExistingFile
from gobblin_py.errors import SourceError, UnreachableError, describe
from gobblin_py.builtin.extras import require

log = logging.getLogger(__name__)

TOPIC_PREFIX_CHARS = 40
"""How much of the topic name the readable part of an output name keeps (the hash covers all of it)."""


class KafkaSettings(Settings):
    bootstrap_servers: str | list[str]
    topics: list[str] | None = None
    topic_pattern: str | None = None
    exclude_topics: list[str] = Field(default_factory=list, description="regexes (Gobblin topic.blacklist)")
    bootstrap_with_offset: Literal["earliest", "latest"] = "earliest"
    reset_on_offset_out_of_range: Literal["earliest", "latest", "fail"] = "earliest"
    max_workunits: int = Field(default=8, ge=1)
    min_records_per_workunit: int = Field(
        default=50_000, ge=1, description="fewer tasks for a small run or checkpoint: each reads at least this many records where it can (a task costs Spark ~0.1 s)")
    deserializer: Literal["json", "avro", "string", "bytes"] = "json"
    client: Literal["kafka-python", "confluent"] = Field(
        default="kafka-python", description="confluent: librdkafka, a quarter of kafka-python's CPU per record (pip install 'gobblin-py[confluent]')")
    avro_schema: ExistingFile | None = None
    fetch_max_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)
    max_partition_fetch_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    fetch_max_wait_ms: int = Field(default=200, ge=1, description="never 0: some brokers spin and return nothing")
    max_poll_records: int = Field(default=20_000, ge=1)
    request_timeout_ms: int = Field(default=30_000, ge=1000)
    idle_timeout_s: float = Field(default=60.0, gt=0, description="give up when a partition makes no progress this long")
    consumer_config: dict[str, Any] = Field(default_factory=dict, description="extra kafka-python consumer settings (security, …)")

    @field_validator("topic_pattern")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression: {exc}") from None
        return value

    @model_validator(mode="after")
    def _one_selection(self) -> KafkaSettings:
        if (self.topics is None) == (self.topic_pattern is None):
            raise ValueError("give exactly one of topics: [..] or topic_pattern: REGEX")
        if self.deserializer == "avro" and self.avro_schema is None:
            raise ValueError("deserializer avro needs avro_schema: PATH.avsc")
        if self.client == "confluent":
            require("confluent_kafka", "client confluent needs the confluent-kafka package", "confluent")
        return self

    @property
    def brokers(self) -> str:
        servers = self.bootstrap_servers
        return servers if isinstance(servers, str) else ",".join(servers)


BROKER_REMEDY = ("Check that the broker is running and `source.bootstrap_servers` is right; "
                 "the next run resumes from the committed offsets.")


def broker_endpoint(s: KafkaSettings) -> str:
    """The brokers as a task's `UnreachableError.endpoint` names them (one retry budget per run for them)."""
    return f"Kafka broker {s.brokers}" if "," not in s.brokers else f"Kafka brokers {s.brokers}"


def unreachable(s: KafkaSettings, message: str) -> UnreachableError:
    return UnreachableError(message, broker_endpoint(s), BROKER_REMEDY)


def consumer_settings(s: KafkaSettings) -> dict[str, Any]:
    """kafka-python consumer settings: no group, no offset commits (the watermark store is the truth)."""
    return {
        "bootstrap_servers": s.brokers,
        "group_id": None,
        "enable_auto_commit": False,
        "auto_offset_reset": "none",
        "fetch_max_bytes": s.fetch_max_bytes,
        "max_partition_fetch_bytes": s.max_partition_fetch_bytes,
        "fetch_max_wait_ms": s.fetch_max_wait_ms,
        "max_poll_records": s.max_poll_records,
        "request_timeout_ms": s.request_timeout_ms,
        "bootstrap_timeout_ms": min(s.request_timeout_ms, 10_000),
        "check_crcs": True,
        **s.consumer_config,
    }


def open_consumer(s: KafkaSettings, in_task: bool = False) -> Any:
    """A connected KafkaConsumer, or SourceError naming the brokers (UnreachableError `in_task`, where it is retried)."""
    from kafka import KafkaConsumer
    from kafka.errors import KafkaError

    try:
        return KafkaConsumer(**consumer_settings(s))
    except KafkaError as exc:
        message = f"cannot reach Kafka broker(s) {s.brokers}: {describe(exc)}"
        raise (unreachable(s, message) if in_task else SourceError(message)) from None


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
            from gobblin_py.builtin.kafka_confluent import ConfluentKafkaExtractor

            return ConfluentKafkaExtractor(self.settings, workunit, context)
        from gobblin_py.builtin.kafka_extractor import KafkaExtractor

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
