"""The `kafka` source: each topic is a dataset, each partition's offset a watermark.

Planning reads every partition's earliest and end offsets once; a WorkUnit covers
`[committed offset, end offset at planning)` of one partition, and WorkUnits are bin-packed
into at most `max_workunits` tasks by the size their partition had last time, and into fewer when the run
is small (`min_records_per_workunit`): each Spark task costs its own scheduling, whatever it reads.

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
import time
from dataclasses import dataclass, field
from typing import Any

from gobblin_py.api import Extractor, MultiWorkUnit, Source, SourceState, TaskContext, WorkUnit
from gobblin_py.api.lag import DatasetLag, PartitionLag, unmeasured
from gobblin_py.api.names import workunit_id
from gobblin_py.api.types import SchemaKind
from gobblin_py.builtin.sources.packing import worst_fit_decreasing
from gobblin_py.builtin.sources.kafka.metadata import clashes, with_metadata
from gobblin_py.builtin.sources.kafka.registry import KEY, VALUE, OutputSchema, SchemaPart, evolved, latest_schema, registry_client
from gobblin_py.builtin.sources.kafka.settings import (TOPIC_PREFIX_CHARS, KafkaSettings, broker_endpoint, consumer_settings,
                                                   open_consumer)
from gobblin_py.errors import ConfigError, SourceError, describe

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


NATIVE_SHARE = 0.7
"""Of a columnar JSON task's work, the share outside Python's lock: 1M records in 4 tasks on 2 driver threads took
1.7 s against 3.3 s of task time (scripts/bench_kafka.py), so at least half; what holds it is the client's message
objects, a microsecond or so of the 3.3 a record."""


class KafkaSource(Source):
    """One WorkUnit per partition with new data; partitions packed into at most `max_workunits` tasks."""

    Settings = KafkaSettings
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
            topics = self._select_topics(consumer.topics())
            described = describe_topics(s, topics, consumer)
            ranges: list[tuple[Any, int, int]] = []
            for topic in topics:
                partitions = consumer.partitions_for_topic(topic) or set()
                tps = [TopicPartition(topic, p) for p in sorted(partitions)]
                begins = consumer.beginning_offsets(tps)
                ends = consumer.end_offsets(tps)
                committed = state.watermarks(topic)
                recreated = self._recreated(topic, described[1].get(topic), committed, state.kept(topic), consumer, begins, ends)
                if recreated is not None:
                    if s.on_topic_recreated == "fail":
                        state.report_input_problem(topic, recreated.message(s.brokers) + (
                            "; nothing of the topic was read. Set `on_topic_recreated: earliest` to read the new topic from "
                            f"its first offset, or drop its state with `gobblin-py state reset JOB.yaml --dataset {topic}` "
                            "to start it over per bootstrap_with_offset"))
                        continue
                    notice = (recreated.message(s.brokers) + "; they are read from the new topic's first offset "
                              "(on_topic_recreated: earliest)")
                    log.warning("%s", notice)
                    state.report_notice(topic, notice)
                    committed = {k: v for k, v in committed.items() if int(k) not in recreated.partitions}
                gone = sorted(int(k) for k in committed if int(k) not in partitions)
                if gone:
                    raise SourceError(f"topic {topic!r} on {s.brokers} no longer has partition(s) {', '.join(map(str, gone))} "
                                      "that earlier runs read; nothing was extracted (reset the dataset's state to go on)")
                for tp in tps:
                    from_start = recreated is not None and tp.partition in recreated.partitions
                    planned = self._plan_partition(tp, committed.get(str(tp.partition)), begins[tp], ends[tp], state, from_start)
                    if planned is not None:
                        ranges.append((tp, *planned))
            ranges = capped(ranges, state.max_records)
            identity = TopicIdentity.lookup(s, consumer, ranges, described) if ranges else None
        except KafkaError as exc:
            raise SourceError(f"Kafka broker(s) {s.brokers}: could not read topic metadata or offsets: {describe(exc)}") from None
        finally:
            consumer.close()
        schemas = self._output_schemas(sorted({tp.topic for tp, _, _ in ranges}), state)
        units = [_workunit(tp, start, end, identity, schemas.get(tp.topic, {})) for tp, start, end in ranges
                 if identity is not None]
        records = sum(end - start for _, start, end in ranges)
        tasks = min(s.max_workunits, max(1, -(-records // s.min_records_per_workunit)))
        return worst_fit_decreasing(units, tasks, lambda u: self.estimated_bytes(u, state))

    def _output_schemas(self, topics: list[str], state: SourceState) -> dict[str, dict[SchemaPart, OutputSchema]]:
        """Each topic's output schemas from the registry: the value's under `confluent_avro`, the key's under
        `metadata_key: confluent_avro`, each its subject's latest version now (the same for every task of the run), or
        under `schema_evolution: evolve` the merge of its versions where an earlier one does not read into the latest
        losslessly; an output schema other than the last commit's is named in the run's summary. Metadata fields must clash with no value
        field (of `avro_schema` too)."""
        s: KafkaSettings = self.settings
        from_file = None
        if s.deserializer == "avro" and s.metadata_columns:
            from gobblin_py.builtin.schemas.avro_files import load_avro_schema

            from_file = load_avro_schema(s.avro_schema)
            self._check_clashes(from_file, f"avro_schema {s.avro_schema}")
        parts = [(part, subject_of) for part, subject_of, wanted in (
            (VALUE, s.subject_of, s.deserializer in ("confluent_avro", "confluent_protobuf")),
            (KEY, s.key_subject_of, s.avro_keys)) if wanted]
        if not parts or not topics:
            return {}
        assert s.schema_registry is not None
        client = registry_client(s.schema_registry)
        found: dict[str, dict[SchemaPart, OutputSchema]] = {}
        for topic in topics:
            planned = found[topic] = {part: self._latest(client, subject_of(topic), topic, part) for part, subject_of in parts}
            if s.schema_evolution == "evolve":
                planned = found[topic] = {part: evolved(s.schema_registry, client, out, topic, part)
                                          for part, out in planned.items()}
            value = planned[VALUE].schema if VALUE in planned else from_file
            if VALUE in planned:
                self._check_clashes(value, planned[VALUE].describe())
            if KEY in planned and value is not None:
                self._check_key_names(value, planned[KEY])
            for part, out in planned.items():
                before = state.kept(topic).get(part.kept)
                was = state.kept(topic).get(part.kept_evolved)
                if isinstance(before, dict) and (before.get("id") != out.schema_id or was != out.evolved()):
                    merged = f", merged with versions {', '.join(map(str, was['versions']))}" if isinstance(was, dict) else ""
                    notice = (f"the {part.part} schema of topic {topic!r} is now {out.describe()}, was version "
                              f"{before.get('version')} (schema id {before.get('id')}{merged}): records are written in "
                              "it from now on")
                    log.warning("%s", notice)
                    state.report_notice(topic, notice)
        return found

    def _latest(self, client: Any, subject: str, topic: str, part: SchemaPart) -> OutputSchema:
        """The subject's latest version as the output schema: Avro's own, or derived from a Protobuf message."""
        s: KafkaSettings = self.settings
        assert s.schema_registry is not None
        if part is VALUE and s.deserializer == "confluent_protobuf":
            from gobblin_py.builtin.sources.kafka.protobuf import latest_protobuf_schema

            return latest_protobuf_schema(s.schema_registry, client, subject, topic, s.protobuf_message)
        return latest_schema(s.schema_registry, client, subject, topic, part)

    def _check_clashes(self, schema: dict[str, Any], where: str) -> None:
        taken = clashes(self.settings, schema)
        if taken:
            raise ConfigError(f"source.metadata_columns: {where} already has field(s) {', '.join(taken)}; drop them from "
                              "metadata_columns")

    def _check_key_names(self, value: dict[str, Any], key: OutputSchema) -> None:
        """The key's schema inside the value's record: a named type both define makes the output schema invalid."""
        import fastavro

        try:
            fastavro.parse_schema(with_metadata(self.settings, value, key.schema))
        except Exception as exc:  # noqa: BLE001 - any schema fastavro refuses is one no writer can write
            raise SourceError(f"the key schema ({key.describe()}) cannot be a field of the value's record: "
                              f"{describe(exc)}. Give the key's and the value's named types different names or "
                              "namespaces") from None

    def _recreated(self, topic: str, topic_id: str | None, committed: dict[str, Any], kept: dict[str, Any], consumer: Any,
                   begins: dict[Any, int], ends: dict[Any, int]) -> Recreated | None:
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
        for key, (offset, timestamp) in sorted(seen.items()):
            tp = current[key]
            if offset >= ends[tp]:
                evidence.append(f"partition {key} ends at offset {ends[tp]}, before offset {offset} read earlier")
            elif offset >= begins[tp]:
                check[tp] = offset
        matched = set()
        for (_, partition), (offset, timestamp) in (first_records(self.settings, consumer, check, required=False) if check else {}).items():
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

    def backlog(self, state: SourceState, timeout_s: float) -> list[DatasetLag]:
        """Per partition, end offset − committed offset (the last stable offset: `read_committed`, as runs read), and
        the age of the first record not committed (one record fetched; None when nothing waits). A topic re-created
        since its offsets were committed, or missing, is an error, never a small figure."""
        from kafka import TopicPartition
        from kafka.errors import KafkaError

        s = lag_settings(self.settings, timeout_s)
        consumer = open_consumer(s)
        try:
            available = consumer.topics()
            topics = self._select_topics(available | set(s.topics or []))
            described = describe_topics(s, [t for t in topics if t in available], consumer)
            out = []
            for topic in topics:
                if topic not in available:
                    out.append(unmeasured(topic, f"topic {topic!r} does not exist on Kafka broker(s) {s.brokers}"))
                    continue
                tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or set())]
                begins, ends = consumer.beginning_offsets(tps), consumer.end_offsets(tps)
                committed = state.watermarks(topic)
                recreated = self._recreated(topic, described[1].get(topic), committed, state.kept(topic), consumer, begins, ends)
                if recreated is not None:
                    out.append(unmeasured(topic, recreated.message(s.brokers) + ": the lag of the new topic is not "
                                          "measured until a run reads it (see on_topic_recreated)"))
                    continue
                out.append(self._topic_lag(s, consumer, topic, tps, begins, ends, committed))
            return out
        except KafkaError as exc:
            raise SourceError(f"Kafka broker(s) {s.brokers}: could not read topic metadata or offsets: {describe(exc)}") from None
        finally:
            consumer.close()

    def _topic_lag(self, s: KafkaSettings, consumer: Any, topic: str, tps: list[Any], begins: dict[Any, int],
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
        topics = [t for t in self._select_topics(set(datasets) | set(s.topics or [])) if t in datasets]
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
        s: KafkaSettings = self.settings
        return NATIVE_SHARE if converted and s.deserializer in ("json", "confluent_json") and s.client == "confluent" else 0.0

    def _select_topics(self, available: set[str]) -> list[str]:
        s: KafkaSettings = self.settings
        if s.topics is not None:
            missing = [t for t in s.topics if t not in available]
            if missing:
                raise SourceError(f"topic(s) {', '.join(map(repr, missing))} do not exist on Kafka broker(s) {s.brokers}")
            candidates = list(s.topics)
        else:
            candidates = sorted(available)
        return [t for t in candidates if s.selects(t) is not None]

    def reads_topic(self, topic: str) -> str | None:
        """`source.topics` or `source.topic_pattern` when planning would read `topic` (see `KafkaSettings.selects`)."""
        key = self.settings.selects(topic)
        return None if key is None else f"source.{key}"

    def _plan_partition(self, tp: Any, committed: Any, begin: int, end: int, state: SourceState,
                        from_start: bool = False) -> tuple[int, int] | None:
        """The offset range `[start, end)` to read of one partition (from its first offset `from_start`), or None when
        it has no new data. Committed offsets the broker no longer has are a loss the run's summary names."""
        s: KafkaSettings = self.settings
        where = f"{tp.topic}/{tp.partition} on {s.brokers}"
        if from_start:
            start, new = begin, True
        elif committed is None:
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
                also = f" and skipping offsets {max(start, begin)}..{end - 1}" if policy == "latest" and end > max(start, begin) else ""
                lost = (f"{tp.topic}/{tp.partition}: committed offset {start} is out of range [{begin}, {end}): {skipped}; "
                        f"reset to the {policy} offset {reset}{also}" + (" (records lost)" if start < begin or also else ""))
                log.warning("%s on %s", lost, s.brokers)
                state.report_notice(tp.topic, lost)
                start, new = reset, True  # an empty range still commits the reset offset
        if start >= end and not new:
            return None  # no new data: the committed watermark carries forward unchanged
        return start, end

    def endpoints(self, workunit: WorkUnit) -> list[str]:
        """The brokers (and schema registry) every task reads from: once a task of the run gives up on them, the others
        do not try."""
        registry = self.settings.schema_registry
        return [broker_endpoint(self.settings), *([registry.endpoint] if registry is not None else [])]

    def get_extractor(self, workunit: WorkUnit, context: TaskContext) -> Extractor:
        if self.settings.client == "confluent":
            from gobblin_py.builtin.sources.kafka.confluent import ConfluentKafkaExtractor

            return ConfluentKafkaExtractor(self.settings, workunit, context)
        from gobblin_py.builtin.sources.kafka.extractor import KafkaExtractor

        return KafkaExtractor(self.settings, workunit, context)


def lag_settings(s: KafkaSettings, timeout_s: float) -> KafkaSettings:
    """The settings with their timeouts cut to `timeout_s` (a lag measurement gives up rather than wait) and small
    fetches: it needs one record per partition (a broker still returns at least one whole batch)."""
    ms = max(1000, int(timeout_s * 1000))
    return s.model_copy(update={"request_timeout_ms": min(s.request_timeout_ms, ms),
                                "idle_timeout_s": min(s.idle_timeout_s, max(0.5, timeout_s / 2)),
                                "max_partition_fetch_bytes": LAG_FETCH_BYTES, "fetch_max_bytes": 16 * LAG_FETCH_BYTES})


LAG_FETCH_BYTES = 64 * 1024
"""Bytes a lag measurement's fetch asks per partition."""


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


def _workunit(tp: Any, start: int, end: int, identity: TopicIdentity,
              schemas: dict[SchemaPart, OutputSchema] | None = None) -> WorkUnit:
    """The WorkUnit of offsets `[start, end)`, named by cluster, topic identity, partition, range (and output schemas:
    a range read again into another schema is another file); it keeps the topic's identity with the partition's
    watermark (the topic id, or the range's first record), or clears an earlier one when the range is empty."""
    schemas = schemas or {}
    schema_part = tuple(f"{part.id_tag}:{out.schema_id}" + (f"+{out.fingerprint}" if out.merged else "")
                        for part, out in schemas.items())
    wu_id = workunit_id(f"{tp.topic[:TOPIC_PREFIX_CHARS]}.{tp.partition}.{start}-{end}", "kafka", identity.cluster_id,
                        tp.topic, identity.of(tp, start), tp.partition, start, end, *schema_part)
    key = str(tp.partition)
    topic_id = identity.topic_ids.get(tp.topic)
    if topic_id:
        kept = {f"state.{KEPT_IDS}": {key: topic_id}}
    else:
        first = identity.first_records.get((tp.topic, tp.partition))
        kept = {f"state.{KEPT_FIRST}": {key: list(first) if first else None}}
    for part, out in schemas.items():
        kept.update(part.props(out))
    return WorkUnit(id=wu_id, dataset=tp.topic, watermark_key=key, low_watermark=start,
                    expected_high_watermark=end, props={"topic": tp.topic, "partition": tp.partition, **kept})
