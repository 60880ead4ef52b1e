"""The `kafka` source: each topic is a dataset, each partition's offset a watermark.

Planning reads every partition's earliest and end offsets once; a WorkUnit covers
`[committed offset, end offset at planning)` of one partition, and WorkUnits are bin-packed
into at most `max_workunits` tasks by the size their partition had last time, and into fewer when the run
is small (`min_records_per_workunit`): each Spark task costs its own scheduling, whatever it reads. Each WorkUnit
carries a `KafkaSplit` (partition, client, output schemas); its `client`, set from `source.client` at planning, picks
the extractor through `EXTRACTORS`.

What it assumes, checked at each plan: the topic is the one the offsets were committed from. Each partition's commit
keeps the topic's id beside its watermark (or, from a broker without topic ids, a record read); a re-created topic
(offsets from 0 again) fails the topic or is read from its start (`on_topic_recreated`), never from the old offsets.
Offsets deleted by retention before they were read are named in the run's summary (`reset_on_offset_out_of_range`).

A transactional topic: both clients read `read_committed`, so a run gets the records of committed transactions only
and plans up to the last stable offset (an open transaction's records wait for a later run); aborted records are never
given to the task. Commit and abort markers take offsets but hold no record: a range ending on them is complete when the
consumer's position reaches its end.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from gobblin_py.api import Extractor, MultiWorkUnit, Source, SourceState, TaskContext, WorkUnit
from gobblin_py.api.lag import DatasetLag
from gobblin_py.api.types import SchemaKind
from gobblin_py.builtin.sources.kafka import enumerator, lag, subscriber
from gobblin_py.builtin.sources.kafka.enumerator import capped, plan_partition
from gobblin_py.builtin.sources.kafka.identity import KEPT_IDS, TopicIdentity, describe_topics, recreated
from gobblin_py.builtin.sources.kafka.schema_plan import output_schemas
from gobblin_py.builtin.sources.kafka.settings import KafkaSettings, broker_endpoint, open_consumer
from gobblin_py.builtin.sources.kafka.split import KafkaSplit
from gobblin_py.builtin.sources.kafka.subscriber import select_topics
from gobblin_py.builtin.sources.packing import worst_fit_decreasing
from gobblin_py.errors import SourceError, describe

log = logging.getLogger(__name__)

NATIVE_SHARE = 0.7
"""Of a columnar JSON task's work, the share outside Python's lock: 1M records in 4 tasks on 2 driver threads took
1.7 s against 3.3 s of task time (scripts/bench_kafka.py), so at least half; what holds it is the client's message
objects, a microsecond or so of the 3.3 a record."""


class KafkaSource(Source):
    """One WorkUnit per partition with new data; partitions packed into at most `max_workunits` tasks."""

    Settings = KafkaSettings
    split_type = KafkaSplit
    keeps_key_stats = True

    @classmethod
    def schema_kind(cls, settings: KafkaSettings) -> SchemaKind:
        """Messages read with `deserializer: avro` carry its avro_schema, with `confluent_avro` their subject's
        latest version; JSON, text and bytes carry none."""
        return SchemaKind.AVRO if settings.deserializer in ("avro", "confluent_avro", "confluent_protobuf") else SchemaKind.NONE

    def get_workunits(self, state: SourceState) -> list[WorkUnit | MultiWorkUnit]:
        from kafka import TopicPartition
        from kafka.errors import KafkaError

        s: KafkaSettings = self.settings
        consumer = open_consumer(s)
        try:
            topics = select_topics(s, consumer.topics())
            state.report_listed(topics)  # a topic deleted, or no longer selected, is named, not "no new data"
            described = describe_topics(s, topics, consumer)
            ranges: list[tuple[Any, int, int]] = []
            for topic in topics:
                partitions = consumer.partitions_for_topic(topic) or set()
                tps = [TopicPartition(topic, p) for p in sorted(partitions)]
                begins = consumer.beginning_offsets(tps)
                ends = consumer.end_offsets(tps)
                committed = state.watermarks(topic)
                renewed = recreated(s, topic, described[1].get(topic), committed, state.kept(topic), consumer, begins, ends)
                if renewed is not None:
                    if s.on_topic_recreated == "fail":
                        state.report_input_problem(topic, renewed.message(s.brokers) + (
                            "; nothing of the topic was read. Set `on_topic_recreated: earliest` to read the new topic from "
                            f"its first offset, or drop its state with `gobblin-py state reset JOB.yaml --dataset {topic}` "
                            "to start it over per bootstrap_with_offset"))
                        continue
                    notice = (renewed.message(s.brokers) + "; they are read from the new topic's first offset "
                              "(on_topic_recreated: earliest)")
                    log.warning("%s", notice)
                    state.report_notice(topic, notice)
                    committed = {k: v for k, v in committed.items() if int(k) not in renewed.partitions}
                gone = sorted(int(k) for k in committed if int(k) not in partitions)
                if gone:
                    raise SourceError(f"topic {topic!r} on {s.brokers} no longer has partition(s) {', '.join(map(str, gone))} "
                                      "that earlier runs read; nothing was extracted (reset the dataset's state to go on)")
                for tp in tps:
                    from_start = renewed is not None and tp.partition in renewed.partitions
                    planned = plan_partition(s, tp, committed.get(str(tp.partition)), begins[tp], ends[tp], state, from_start)
                    if planned is not None:
                        ranges.append((tp, *planned))
            ranges = capped(ranges, state.max_records)
            identity = TopicIdentity.lookup(s, consumer, ranges, described) if ranges else None
        except KafkaError as exc:
            raise SourceError(f"Kafka broker(s) {s.brokers}: could not read topic metadata or offsets: {describe(exc)}") from None
        finally:
            consumer.close()
        schemas = output_schemas(s, sorted({tp.topic for tp, _, _ in ranges}), state)
        units = [enumerator.workunit(s, tp, start, end, identity, schemas.get(tp.topic, {})) for tp, start, end in ranges
                 if identity is not None]
        records = sum(end - start for _, start, end in ranges)
        tasks = min(s.max_workunits, max(1, -(-records // s.min_records_per_workunit)))
        return worst_fit_decreasing(units, tasks, lambda u: self.estimated_bytes(u, state))

    def backlog(self, state: SourceState, timeout_s: float) -> list[DatasetLag]:
        """Per partition, end offset − committed offset and the age of the first record not committed (see `lag`)."""
        return lag.backlog(self.settings, state, timeout_s)

    def committed(self, state: SourceState) -> None:
        """`commit_offsets_to_group`: the committed offsets of the job's topics copied to that consumer group, so lag
        tools (Burrow, Kafka UIs) see the job. Called by the runner after the run's commits, not a commit step: a
        step's failure would leave the dataset's commit pending and block its next run, and this copy is never read
        back (the watermarks stay the truth). Partitions whose offsets were committed from an earlier incarnation of
        the topic (another topic id) are left out."""
        s: KafkaSettings = self.settings
        if s.commit_offsets_to_group is None:
            return
        from kafka import TopicPartition

        from gobblin_py.builtin.sources.kafka.consumer_group import commit_offsets

        datasets = state.datasets()
        topics = [t for t in select_topics(s, set(datasets) | set(s.topics or [])) if t in datasets]
        if not topics:
            return
        _, ids = describe_topics(s, topics)
        offsets, skipped = {}, []
        for topic in topics:
            recorded = state.kept(topic).get(KEPT_IDS)
            recorded = recorded if isinstance(recorded, dict) else {}
            for partition, offset in state.watermarks(topic).items():
                if ids.get(topic) and recorded.get(partition) not in (None, ids[topic]):
                    skipped.append(f"{topic}/{partition}")
                elif offset is not None:
                    offsets[TopicPartition(topic, int(partition))] = int(offset)
        if skipped:
            log.warning("consumer group %s: partition(s) %s left as they are: their committed offsets belong to an earlier "
                        "topic of the same name", s.commit_offsets_to_group, ", ".join(skipped))
        commit_offsets(s, s.commit_offsets_to_group, offsets)

    def estimated_bytes(self, workunit: WorkUnit, state: SourceState) -> float:
        """Records in range × the partition's bytes per record last time (1 KiB when unknown)."""
        records = max(0, int(workunit.expected_high_watermark or 0) - int(workunit.low_watermark or 0))
        last = state.key_stat(workunit.dataset, workunit.watermark_key)
        per_record = last["bytes"] / last["records"] if last and last.get("records") else 1024.0
        return records * per_record

    def native_share(self, workunit: WorkUnit, converted: bool) -> float:
        """JSON values made Arrow by `json_to_avro`'s batch path are parsed by Arrow's JSON reader and written by Arrow,
        outside Python's lock; with `client: confluent` librdkafka fetches them, and Python still makes one message
        object a record (see `NATIVE_SHARE`). kafka-python fetches and decodes its batches in Python: none."""
        confluent = KafkaSplit.of(workunit).client == "confluent"
        return NATIVE_SHARE if converted and self.settings.deserializer in ("json", "confluent_json") and confluent else 0.0

    def reads_topic(self, topic: str) -> str | None:
        """`source.topics` or `source.topic_pattern` when planning would read `topic` (see `KafkaSettings.selects`)."""
        return subscriber.reads_topic(self.settings, topic)

    def endpoints(self, workunit: WorkUnit) -> list[str]:
        """The brokers (and schema registry) every task reads from: once a task of the run gives up on them, the others
        do not try."""
        registry = self.settings.schema_registry
        return [broker_endpoint(self.settings), *([registry.endpoint] if registry is not None else [])]

    def get_extractor(self, workunit: WorkUnit, context: TaskContext) -> Extractor:
        """The extractor of the client the split names (`EXTRACTORS`)."""
        return EXTRACTORS[KafkaSplit.of(workunit).client]()(self.settings, workunit, context)


def _kafka_python() -> type[Extractor]:
    from gobblin_py.builtin.sources.kafka.extractor import KafkaExtractor

    return KafkaExtractor


def _confluent() -> type[Extractor]:
    from gobblin_py.builtin.sources.kafka.confluent import ConfluentKafkaExtractor

    return ConfluentKafkaExtractor


EXTRACTORS: dict[str, Callable[[], type[Extractor]]] = {"kafka-python": _kafka_python, "confluent": _confluent}
"""Each `KafkaSplit.client` → its extractor class, imported when a task asks for one (the source and its extractors
never import each other at module level)."""
