"""Reads exactly one partition's offset range: assign + seek, large fetches, no offset commits.

`KafkaExtractor` uses kafka-python; the client-specific part is `_chunks()`, which yields the range's
offsets and values a poll at a time, and everything else (decoding, rejects, watermark) is shared
with the confluent-kafka extractor.
"""

from __future__ import annotations

import bisect
import dataclasses
import importlib.util
import io
import itertools
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from gobblin_py.api import BatchExtractor, RawBatch, SourceMessage, TaskContext, WorkUnit
from gobblin_py.api.types import Record, Schema, WatermarkValue
from gobblin_py.builtin.sources.kafka.metadata import (
    DELETED,
    PREFIX,
    BadMetadata,
    MessageDetails,
    metadata_fields,
    metadata_of,
    with_metadata,
)
from gobblin_py.builtin.sources.kafka.registry import HEADER, LossyRead, UndecodableValue
from gobblin_py.builtin.sources.kafka.settings import KafkaSettings, open_consumer, unreachable
from gobblin_py.builtin.sources.kafka.split import KafkaSplit
from gobblin_py.errors import PermanentTaskError, RetriableTaskError, SourceError, describe

log = logging.getLogger(__name__)

def value_schema(settings: KafkaSettings, split: KafkaSplit) -> dict[str, Any] | None:
    """The Avro record schema values are decoded into: `avro_schema`'s, or the one planned for `confluent_avro` (or
    derived for `confluent_protobuf`)."""
    if settings.deserializer in ("confluent_avro", "confluent_protobuf"):
        return split.planned("value").schema
    if settings.deserializer == "avro":
        from gobblin_py.builtin.schemas.avro_files import load_avro_schema

        return load_avro_schema(settings.avro_schema)
    return None


def _decoder(settings: KafkaSettings, split: KafkaSplit, schema: dict[str, Any] | None) -> Callable[[bytes], Any]:
    kind = settings.deserializer
    if kind == "json":
        return orjson.loads
    if kind == "string":
        return lambda raw: {"value": raw.decode("utf-8")}
    if kind == "bytes":
        return lambda raw: {"value": raw}
    if kind == "confluent_json":
        from gobblin_py.builtin.sources.kafka.json_schema import ValidatingJsonDecoder
        from gobblin_py.builtin.sources.kafka.registry import ConfluentJsonDecoder

        assert settings.schema_registry is not None
        return (ValidatingJsonDecoder if settings.validates_json else ConfluentJsonDecoder)(settings.schema_registry)
    if kind == "confluent_avro":
        from gobblin_py.builtin.sources.kafka.registry import ConfluentAvroDecoder

        assert settings.schema_registry is not None and schema is not None
        return ConfluentAvroDecoder.of(settings.schema_registry, split.planned("value"), settings.schema_evolution)
    if kind == "confluent_protobuf":
        from gobblin_py.builtin.sources.kafka.protobuf import ConfluentProtobufDecoder

        assert settings.schema_registry is not None
        return ConfluentProtobufDecoder(settings.schema_registry, split.planned("value"))
    import fastavro

    parsed = fastavro.parse_schema(schema)
    return lambda raw: fastavro.schemaless_reader(io.BytesIO(raw), parsed)


@dataclass(frozen=True)
class OffsetBatch(RawBatch):
    """A poll's values, the offsets of its first and last, and functions giving every value's offset (for
    `location()` on the row path; worked out only then, as a columnar batch never needs them) and its key, timestamp
    and headers (for `metadata_columns`: asked only then)."""

    first: int = 0
    last: int = 0
    offsets: Callable[[], Sequence[int]] = list
    details: Callable[[], Sequence[MessageDetails]] = list
    raw: Sequence[bytes | None] | None = None  # the values as read, where `values` are their JSON documents
    originals: Callable[[int], MessageDetails] | None = None  # the i-th message's key, timestamp and headers, for rejects


class KafkaExtractor(BatchExtractor):
    """Yields the decoded values of offsets `[low, high)` of one partition; undecodable ones are rejected.
    Its raw batches (one per poll) let a `json_to_avro` → `parquet` task take the columnar path, and a `confluent_avro`
    task without converters, whose batches it makes Arrow itself (`to_arrow`, see `columnar`)."""

    _columnar = False  # set by `columnar_path`
    _current: tuple[Callable[[int, int, bytes | None], SourceMessage | None], int, bytes | None] | None = None

    def __init__(self, settings: KafkaSettings, workunit: WorkUnit, context: TaskContext) -> None:
        self.settings = settings
        self.context = context
        split = KafkaSplit.of(workunit)
        self.topic = split.topic
        self.partition = split.partition
        self.low = int(workunit.low_watermark or 0)
        self.high = int(workunit.expected_high_watermark or 0)
        self.offset = self.low
        self.next_offset = self.low
        self.consumer: Any = None
        self.where = f"{self.topic}/{self.partition} on {settings.brokers}"
        self._value_schema = value_schema(settings, split)
        self._decode = _decoder(settings, split, self._value_schema)
        self._key_schema = split.planned("key") if settings.avro_keys else None
        self._metadata = metadata_of(settings, self.topic, self.partition, self._key_decoder())
        self._headers = "headers" in settings.metadata_columns  # read from each message only then
        self._arrow = self._columns() if settings.deserializer in ("confluent_avro", "confluent_protobuf") else None
        self.makes_arrow = self._arrow is not None

    def _key_decoder(self) -> Callable[[bytes], Any] | None:
        """`metadata_key: confluent_avro`: keys decoded into the key subject's version planned."""
        if self._key_schema is None:
            return None
        from gobblin_py.builtin.sources.kafka.registry import ConfluentAvroDecoder

        assert self.settings.schema_registry is not None
        return ConfluentAvroDecoder.of(self.settings.schema_registry, self._key_schema, self.settings.schema_evolution)

    def _columns(self) -> Any:
        """`confluent_avro` (or `confluent_protobuf`) values → Arrow (`columnar.ConfluentAvroColumns`,
        `ConfluentProtobufColumns`), for a flat value schema; else None, as
        where numpy or pyarrow is not installed (`pip install 'gobblin-py[schema-registry]'` alone: the row path)."""
        if importlib.util.find_spec("numpy") is None or importlib.util.find_spec("pyarrow") is None:
            return None
        from gobblin_py.builtin.sources.kafka.columnar import ConfluentAvroColumns, ConfluentProtobufColumns

        if self.settings.deserializer == "confluent_protobuf":
            return ConfluentProtobufColumns.of_protobuf(self.settings, self._value_schema, self.get_schema(),
                                                        self._decode, self.topic, self.partition)
        return ConfluentAvroColumns.of(self.settings, self._value_schema, self.get_schema(), self._decode, self.topic,
                                       self.partition)

    def to_arrow(self, batch: RawBatch) -> Any | None:
        """A `confluent_avro` batch as one Arrow record batch when every value decodes straight into the output schema
        (see `columnar`); None for the row path."""
        if self._arrow is None or not isinstance(batch, OffsetBatch) or batch.format not in ("confluent_avro", "confluent_protobuf"):
            return None
        return self._arrow(batch.values, batch.offsets, batch.details)

    def location(self) -> str:
        return f"{self.topic}/{self.partition}@{self.offset}"

    def get_schema(self) -> Schema:
        """The Avro record schema of `avro` and `confluent_avro` values (with any metadata fields), which the avro and
        parquet writers write; JSON, text and bytes carry none (`confluent_json` names the metadata fields it adds)."""
        key_schema = self._key_schema.schema if self._key_schema is not None else None
        if self._value_schema is not None:
            return with_metadata(self.settings, self._value_schema, key_schema)
        schema: dict[str, Any] = {"type": "kafka", "topic": self.topic, "deserializer": self.settings.deserializer}
        if self.settings.metadata_columns:  # `confluent_json`: the converter's schema must have these (json_to_avro checks)
            schema["adds_fields"] = metadata_fields(self.settings, key_schema)
        return schema

    def actual_high_watermark(self) -> WatermarkValue:
        return self.next_offset

    def columnar_path(self) -> None:
        self._columnar = True

    def read_batches(self) -> Iterator[RawBatch]:
        if self.low >= self.high:
            return
        # metadata fields are added record by record: a `confluent_json` task asking for them takes the row path
        unwrap = self._columnar and self.settings.deserializer == "confluent_json" and self._metadata is None
        for batch in self._chunks():
            self.offset = batch.first
            yield self._documents(batch) if unwrap else batch
            self.offset = batch.last
            self.next_offset = batch.last + 1

    def _documents(self, batch: OffsetBatch) -> OffsetBatch:
        """A `confluent_json` batch as its JSON documents (format `json`, for the columnar path), when every value has
        the header and a schema id of the registry's JSON Schemas (and, under `json_schema_validation`, validates);
        else as it is, for the row path to judge each."""
        values = batch.values
        try:
            if None in values:
                return batch
            for header in {v[:HEADER.size] for v in values}:  # type: ignore[index]  # no None: checked above
                self._decode.schema(self._decode.schema_id(header))
        except UndecodableValue:
            return batch
        if self.settings.validates_json and not self._decode.all_valid(values):
            return batch  # the row path rejects the documents that do not validate, each with its offset
        return dataclasses.replace(batch, format="json", values=[v[HEADER.size:] for v in values], raw=values)  # type: ignore[index]

    def records_of(self, batch: RawBatch) -> Iterator[Record]:
        assert isinstance(batch, OffsetBatch)
        decode = self._decode
        reject = self.context.reject
        kind = self.settings.deserializer
        metadata = self._metadata
        binary = kind in ("avro", "confluent_avro", "confluent_json", "confluent_protobuf")
        details = batch.details() if metadata is not None else itertools.repeat(None)
        values = batch.raw if batch.raw is not None else batch.values
        original = self._original(batch)
        tombstones = self.settings.tombstones == "delete"
        for i, (offset, value, detail) in enumerate(zip(batch.offsets(), values, details)):
            self.offset = offset
            self.next_offset = offset + 1
            if value is None:
                deleted = self._deleted(metadata, offset, detail) if tombstones else None
                if deleted is None:
                    reject(None, "tombstone (null value)" if not tombstones else "tombstone (null value) without a key: "
                           "no key to delete", self.location(), original(i, offset, value))
                    continue
                if isinstance(deleted, BadMetadata):
                    reject(None, str(deleted), self.location(), original(i, offset, value))
                    continue
                self._current = (original, i, value)
                yield deleted
                continue
            try:
                record = decode(value)
            except LossyRead as exc:
                raise LossyRead(f"{self.location()}: {exc}") from None
            except (ValueError, TypeError, EOFError, UnicodeDecodeError, orjson.JSONDecodeError) as exc:
                shown = value if binary else value.decode("utf-8", "replace")  # Avro's bytes kept (as their repr)
                reject(shown, f"cannot decode as {kind}: {exc}", self.location(), original(i, offset, value))
                continue
            if type(record) is not dict:
                reject(record, f"expected a JSON object, got {type(record).__name__}", self.location(),
                       original(i, offset, value))
                continue
            if metadata is not None:
                try:
                    record.update(metadata(offset, detail))
                except BadMetadata as exc:
                    reject(record, str(exc), self.location(), original(i, offset, value))
                    continue
                except LossyRead as exc:
                    raise LossyRead(f"{self.location()}: the key: {exc}") from None
            self._current = (original, i, value)
            yield record

    def _deleted(self, metadata: Any, offset: int, detail: Any) -> dict[str, Any] | BadMetadata | None:
        """A tombstone under `tombstones: delete` as its record: every value field null, the metadata fields, and
        `_kafka_deleted` true; None for one without a key (nothing to delete), BadMetadata for a key that cannot be read."""
        try:
            fields = metadata(offset, detail)
        except BadMetadata as exc:
            return exc
        if fields.get(PREFIX + "key") is None:
            return None
        names = [f["name"] for f in self.get_schema().get("fields", [])]
        return {**dict.fromkeys(names), **fields, DELETED: True}

    def current_message(self) -> SourceMessage | None:
        """The message of the record last yielded (a later stage rejects it), as read."""
        if self._current is None:
            return None
        original, i, value = self._current
        return original(i, self.offset, value)

    def _original(self, batch: OffsetBatch) -> Callable[[int, int, bytes | None], SourceMessage | None]:
        """For a rejected message: it as read (key, value, headers), kept with the bad record for a dead-letter topic."""
        def original(i: int, offset: int, value: bytes | None) -> SourceMessage | None:
            if batch.originals is None:
                return None
            d = batch.originals(i)
            headers = d.headers if isinstance(d.headers, list) else []  # headers it cannot read: the message without them
            timestamp = d.timestamp if d.timestamp is not None and d.timestamp >= 0 else None
            return SourceMessage(self.topic, self.partition, offset, timestamp, d.key, value, headers)
        return original

    def _stalled(self, since: float, highwater: int | None) -> None:
        """Fail a read that makes no progress: the partition ends early, or the broker stopped answering."""
        if highwater is not None and highwater <= self.next_offset:
            raise SourceError(f"{self.where} ends at offset {highwater}, before the planned end {self.high} "
                              "(truncated by the broker?); nothing of this range is published")
        if time.monotonic() - since > self.settings.idle_timeout_s:
            message = (f"no data from Kafka broker(s) {self.settings.brokers} for {self.topic}/{self.partition} "
                       f"at offset {self.next_offset} (range ends at {self.high}) for {self.settings.idle_timeout_s:.0f} s")
            if self._disconnected():
                raise unreachable(self.settings, f"{message}, and no connection to any broker")
            raise RetriableTaskError(message)

    def _disconnected(self) -> bool:
        """True when the client holds no connection to any broker of the cluster (it is down, or hangs)."""
        try:
            client = self.consumer._client  # kafka-python keeps its connections there
            return not any(client.connected(b.node_id) for b in client.cluster.brokers())
        except AttributeError:  # another kafka-python: say only that no data came
            return False

    def _chunks(self) -> Iterator[OffsetBatch]:
        """The range's values, a poll at a time (the client-specific part)."""
        from kafka import TopicPartition
        from kafka.errors import CorruptRecordError, KafkaError, OffsetOutOfRangeError

        s = self.settings
        tp = TopicPartition(self.topic, self.partition)
        self.consumer = consumer = open_consumer(s, in_task=True)
        consumer.assign([tp])
        consumer.seek(tp, self.low)
        high = self.high
        last_progress = time.monotonic()
        while self.next_offset < high:
            try:
                batches = consumer.poll(timeout_ms=1000, max_records=s.max_poll_records)
            except OffsetOutOfRangeError:
                self._reset_out_of_range(consumer.beginning_offsets([tp])[tp], lambda target: consumer.seek(tp, target))
                continue
            except CorruptRecordError as exc:
                if "UnicodeDecodeError" not in str(exc):
                    raise RetriableTaskError(f"reading {self.where} at offset {self.next_offset}: {describe(exc)}") from None
                raise PermanentTaskError(f"{self.topic}/{self.partition}@{self.next_offset}: a message at or after this offset has "
                                         "a header key that is not UTF-8, which kafka-python cannot read (it fails the whole "
                                         "fetch); set client: confluent, which reads it (a bad record only where "
                                         f"metadata_columns has headers). {describe(exc)}") from None
            except KafkaError as exc:
                raise RetriableTaskError(f"reading {self.where} at offset {self.next_offset}: {describe(exc)}") from None
            records = batches.get(tp, ())
            if not records:
                position = consumer.position(tp)
                if position is not None and position >= high:
                    self.next_offset = high  # the rest of the range held no data records (control batches)
                    return
                self._stalled(last_progress, consumer.highwater(tp))
                continue
            last_progress = time.monotonic()
            if records[-1].offset >= high:  # the poll went past the planned end: keep the range, and stop
                records = records[:bisect.bisect_left([r.offset for r in records], high)]
                if records:
                    yield self._batch(records, [r.value for r in records], lambda r: r.offset)
                self.next_offset = high
                return
            yield self._batch(records, [r.value for r in records], lambda r: r.offset)

    def _batch(self, messages: list[Any], values: list[bytes | None], offset_of: Callable[[Any], int]) -> OffsetBatch:
        """A poll's messages (non-empty, in offset order) and their values as a batch; `offset_of(message)`."""
        details: list[list[MessageDetails]] = []
        originals: dict[int, MessageDetails] = {}

        def all_details() -> list[MessageDetails]:
            if not details:
                details.append([self._details(m) for m in messages])
            return details[0]

        def original(i: int) -> MessageDetails:
            """The i-th message's details with its headers, each asked of the client once (confluent-kafka's
            message keeps a broken header list after a first failed read)."""
            if self._headers:
                return all_details()[i]
            if i not in originals:
                originals[i] = self._details(messages[i], headers=True)
            return originals[i]

        return OffsetBatch(self.settings.deserializer, values, offset_of(messages[0]), offset_of(messages[-1]),
                           lambda: [offset_of(m) for m in messages], all_details, originals=original)

    def _details(self, message: Any, headers: bool = False) -> MessageDetails:
        """A kafka-python message's key, timestamp (ms) and headers (a list of (str, bytes or None)), read when
        `metadata_columns` or `headers` ask."""
        return MessageDetails(message.key, message.timestamp, message.headers if self._headers or headers else None)

    def _reset_out_of_range(self, begin: int, seek: Callable[[int], None]) -> None:
        """The broker no longer has `next_offset` (retention ran mid-read): reset per the policy, loudly."""
        s = self.settings
        if s.reset_on_offset_out_of_range == "fail" or begin <= self.next_offset:
            error = PermanentTaskError if s.reset_on_offset_out_of_range == "fail" else SourceError  # fail: chosen, repeats
            raise error(f"{self.where}: offset {self.next_offset} is out of range (the partition starts at {begin}) while "
                        "reading; nothing of this range is published. Set reset_on_offset_out_of_range: earliest to go "
                        "on past offsets deleted by retention (they are lost, and the log names them)")
        target = min(begin, self.high) if s.reset_on_offset_out_of_range == "earliest" else self.high
        log.warning("%s: offset %d was deleted while reading; offsets %d..%d (%d records) are lost (skipped)",
                    self.where, self.next_offset, self.next_offset, target - 1, target - self.next_offset)
        self.next_offset = target
        if target < self.high:
            seek(target)

    def close(self) -> None:
        if self.consumer is not None:
            self.consumer.close()
            self.consumer = None
