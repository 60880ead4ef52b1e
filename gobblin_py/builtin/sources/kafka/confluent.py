"""The same range reader on confluent-kafka (librdkafka): records are parsed in C, so a Kafka → Parquet task costs
about a quarter of the CPU per record it does on kafka-python (scripts/bench_kafka_cpu.py: 1.7 µs against 6.7)."""

from __future__ import annotations

import bisect
import operator
import time
from collections.abc import Iterator
from typing import Any

from gobblin_py.builtin.sources.kafka.extractor import KafkaExtractor, OffsetBatch
from gobblin_py.builtin.sources.kafka.metadata import BadMetadata, MessageDetails
from gobblin_py.errors import RetriableTaskError, SourceError, describe


def _offset(message: Any) -> int:
    return message.offset()


_HEADERS = operator.methodcaller("headers")
"""`message.headers()` through the C API's checked call. confluent-kafka makes each header key a str and, for one that
is not UTF-8, returns a list holding NULL with the UnicodeDecodeError still set: a checked call turns that into a
SystemError here, where CPython 3.11's specialized call of `message.headers()` (once that line ran often) would let it
escape at some later call, and leave the NULL to crash whatever reads the list."""


def _headers(message: Any) -> list[tuple[str, bytes | None]] | BadMetadata:
    """A message's headers ([] for none); a header key that is not UTF-8 makes the message a bad record (its headers
    are asked only once: confluent-kafka keeps the broken list)."""
    try:
        return _HEADERS(message) or []
    except SystemError as exc:
        cause = exc.__cause__ or exc.__context__
        return BadMetadata(f"a header key is not UTF-8: {describe(cause) if cause is not None else exc}")


def confluent_settings(s: Any, group: str) -> dict[str, Any]:
    """librdkafka settings: assign only (the group id is never joined), no offset commits or stores."""
    conf: dict[str, Any] = {
        "bootstrap.servers": s.brokers,
        "group.id": group,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",
        "enable.partition.eof": True,
        "isolation.level": "read_committed",  # librdkafka's default, said here: records of committed transactions only
        "fetch.max.bytes": s.fetch_max_bytes,
        "message.max.bytes": min(1_000_000, s.fetch_max_bytes),  # librdkafka wants fetch.max.bytes >= this
        "max.partition.fetch.bytes": s.max_partition_fetch_bytes,
        "fetch.wait.max.ms": s.fetch_max_wait_ms,
        "socket.timeout.ms": s.request_timeout_ms,
        "queued.max.messages.kbytes": 32768,  # prefetch cap per consumer: memory stays flat however long the range
        # once that prefetch is full, fetch again as soon as the task has taken some, not after librdkafka's default
        # 1 s: with the default a task reading faster than one fetch stood idle ~1 s per 100k records (2.3 s, not 1.3 s,
        # for 250k records from a local broker)
        "fetch.queue.backoff.ms": 10,
        "log_level": 0,
    }
    for key, value in s.consumer_config.items():
        conf[key.replace("_", ".")] = value
    return conf


class ConfluentKafkaExtractor(KafkaExtractor):
    """`client: confluent`: assign at the low offset, consume in batches, stop at the planned end."""

    _down = False  # librdkafka reported every broker down since the last record

    def _chunks(self) -> Iterator[OffsetBatch]:
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        s = self.settings
        conf = confluent_settings(s, f"gobblin-py-{self.context.job_name}")
        conf["error_cb"] = self._on_error
        try:
            self.consumer = consumer = Consumer(conf)
        except KafkaException as exc:
            raise SourceError(f"cannot create a confluent-kafka consumer for {s.brokers}: {exc}") from None
        tp = TopicPartition(self.topic, self.partition, self.low)
        consumer.assign([tp])
        high = self.high
        last_progress = time.monotonic()
        while self.next_offset < high:
            # consume() waits for all `num_messages` (or the timeout): never ask for more than the range still holds
            wanted = min(s.max_poll_records, 100_000, max(1, high - self.next_offset))
            messages = consumer.consume(num_messages=wanted, timeout=1.0)
            good = [m for m in messages if m.error() is None]
            stop: Any = None  # "end" of the range, "reset" after an out-of-range offset, or an error to raise
            if len(good) != len(messages):  # an end-of-partition event, or an error: the poll message by message
                good, stop = self._before_error(messages, high)
            if good and good[-1].offset() >= high:
                good, stop = good[:bisect.bisect_left([m.offset() for m in good], high)], "end"
            if good:  # what came before a stop is read first, so the watermark never passes it
                yield self._batch(good, [m.value() for m in good], _offset)
                last_progress = time.monotonic()
                self._down = False
            if stop == "end":
                self.next_offset = high
                return
            if stop == "reset":
                begin, _ = consumer.get_watermark_offsets(TopicPartition(self.topic, self.partition), timeout=s.request_timeout_ms / 1000)
                self._reset_out_of_range(begin, lambda target: consumer.seek(TopicPartition(self.topic, self.partition, target)))
                continue
            if stop is not None:
                raise RetriableTaskError(f"reading {self.where} at offset {self.next_offset}: {stop.str()}")
            if good:
                continue
            (position,) = consumer.position([TopicPartition(self.topic, self.partition)])
            if position.offset >= high:  # the rest of the range held no data records (transaction markers)
                self.next_offset = high
                return
            _, highwater = consumer.get_watermark_offsets(TopicPartition(self.topic, self.partition), cached=True)
            self._stalled(last_progress, highwater if highwater is not None and highwater >= 0 else None)

    @staticmethod
    def _before_error(messages: list[Any], high: int) -> tuple[list[Any], Any]:
        """The data messages of a poll up to the first error that stops the read, and that stop: "end" for the end of
        the partition at or past `high` (the offsets left held only transaction markers or aborted records), "reset" for
        an offset out of range, the error for one that will not pass; other errors that pass are skipped."""
        from confluent_kafka import KafkaError

        good = []
        for msg in messages:
            err = msg.error()
            if err is None:
                good.append(msg)
                continue
            code = err.code()
            if code == KafkaError._PARTITION_EOF:
                if msg.offset() >= high:  # the next fetch offset: every offset before it was delivered or is no record
                    return good, "end"
                continue
            if code == KafkaError.OFFSET_OUT_OF_RANGE:
                return good, "reset"
            if not err.retriable() and code != KafkaError._TRANSPORT:
                return good, err
        return good, None

    def _details(self, message: Any, headers: bool = False) -> MessageDetails:
        """A confluent-kafka message's key, timestamp (ms; None when the message has none) and headers (read when
        `metadata_columns` or `headers` ask)."""
        kind, timestamp = message.timestamp()
        return MessageDetails(message.key(), timestamp if kind != 0 else None,  # 0: TIMESTAMP_NOT_AVAILABLE
                              _headers(message) if self._headers or headers else None)

    def _on_error(self, err: Any) -> None:
        """librdkafka reports a lost cluster here, not through `consume()`."""
        from confluent_kafka import KafkaError

        if err.code() == KafkaError._ALL_BROKERS_DOWN:
            self._down = True

    def _disconnected(self) -> bool:
        return self._down

    def close(self) -> None:
        if self.consumer is not None:
            self.consumer.close()
            self.consumer = None
