"""`quality.dead_letter: {topic: …}`: each bad record of a committed range sent to a Kafka topic, once.

Each record goes with its original key, value and headers where the extractor kept the message (Kafka sources: the
value as read, not decoded), else with its entry's record as a JSON value; provenance headers say where it came from
and why it was rejected (`gobblin.error.*`).

Exactly once without transactions: the step runs after the dataset's watermarks, so it runs only for a committed range,
and a crash in it is replayed by the next run. Before it produces anything it durably keeps the topic's end offsets
and its topic id (KIP-516), its mark; every record carries `gobblin.error.id` = `<commit id>#<file>:<line>`; a replay
(and `verify`) reads the topic from the mark and produces only the ids it does not find. The topic deleted and
created again since the mark (another topic id) is read from its start instead: what was sent to the old topic went
with it and is sent again, once, and what reached the new one is found there (the old offsets mean nothing in it;
the step used to stop for good on a re-created topic). A broker without topic ids gets the offsets' check alone: a
topic whose offsets now lie below the mark stops the step, named. Transactions are not used: a transaction committed
just before a crash could not be told apart from one never committed without this very scan, and a broker that returns
aborted records (Tansu) would show them twice.

kafka-python is the client (a core dependency), with an idempotent producer (`acks=all`), so its own retries add no
copy within one attempt.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import orjson
from pydantic import Field, field_validator

from gobblin_py import checked_json, crashpoints
from gobblin_py.api import CommitStep, Settings, SourceMessage
from gobblin_py.api.dead_letter import DeadLetterDelivery, DeadLetters
from gobblin_py.errors import CommitError, ConfigError, UnreachableError, describe
from gobblin_py.fs import Location, filesystem_for
from gobblin_py.fs.conditional import Conflict
from gobblin_py.fs.records import RecordFiles, read_record, record_files

log = logging.getLogger(__name__)

ID_HEADER = "gobblin.error.id"
PREFIX = "gobblin.error."
_SECRET_KEY = re.compile(r"password|secret|jaas|token|sasl_plain|ssl_key", re.IGNORECASE)


class KafkaDeadLetterSettings(Settings):
    topic: str = Field(description="the dead-letter topic; it must exist (it is not created), and the job's source "
                                   "must not read it (refused at validation: exclude it from topic_pattern)")
    bootstrap_servers: str | list[str] = Field(
        description="host:port of its brokers (unset: the kafka source's bootstrap_servers)")
    producer_config: dict[str, Any] = Field(
        default_factory=dict, description="extra kafka-python producer and consumer settings (security_protocol, "
                                          "ssl_cafile, …); no secret: they are kept in the commit record")
    request_timeout_ms: int = Field(default=30_000, ge=1000, description="how long a request to the brokers may take")

    @field_validator("topic")
    @classmethod
    def _topic_name(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9._-]{1,249}", value) or value in (".", ".."):
            raise ValueError(f"{value!r} is not a Kafka topic name (up to 249 letters, digits, '.', '_' and '-')")
        return value

    @field_validator("producer_config")
    @classmethod
    def _no_secret(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in value:
            if _SECRET_KEY.search(key):
                raise ValueError(f"{key}: a secret cannot be given here (the commit record keeps these settings to "
                                 "replay the step); use a client that reads it from the environment")
        return value

    @property
    def brokers(self) -> str:
        servers = self.bootstrap_servers
        return servers if isinstance(servers, str) else ",".join(servers)


class KafkaDeadLetters(DeadLetters):
    """Sends a committed range's bad records to `topic`, once (see the module's docstring)."""

    Settings = KafkaDeadLetterSettings

    def __init__(self, settings: KafkaDeadLetterSettings) -> None:
        self.settings = settings

    def commit_step(self, delivery: DeadLetterDelivery) -> CommitStep:
        s = self.settings
        name = hashlib.sha256(delivery.commit_id.encode()).hexdigest()[:32]
        return KafkaDeadLetterStep(
            brokers=s.brokers, topic=s.topic, client_config=dict(s.producer_config), timeout_ms=s.request_timeout_ms,
            commit_id=delivery.commit_id, dataset=delivery.dataset, job=delivery.job,
            files=[[f.path, f.records] for f in delivery.files],
            mark=str(Location(delivery.mark_dir) / f"{name}.json"))

    def topics(self) -> list[str]:
        return [self.settings.topic]

    def check(self) -> None:
        """The topic exists on brokers that answer (a run fails before it reads anything otherwise)."""
        s = self.settings
        with _Client(s.brokers, s.topic, dict(s.producer_config), s.request_timeout_ms) as client:
            client.partitions(f"quality.dead_letter: topic {s.topic!r}")


@dataclass
class KafkaDeadLetterStep(CommitStep):
    """Produces each entry of `files` (published error files) to `topic` once: see the module's docstring."""

    type_name: ClassVar[str] = "kafka_dead_letter"

    brokers: str
    topic: str
    commit_id: str
    dataset: str
    job: str
    files: list[list[Any]]  # [path, entries]
    mark: str  # the durable record (a path, or a URL on the work directory's store) keeping the topic's end offsets
    # before the first record was produced
    client_config: dict[str, Any] = field(default_factory=dict)
    timeout_ms: int = 30_000

    def paths(self) -> list[str]:
        return [self.mark, *(str(p) for p, _ in self.files)]

    def describe(self) -> str:
        n = sum(int(c) for _, c in self.files)
        return f"send {n} bad record(s) of {self.dataset} to dead-letter topic {self.topic} on {self.brokers}"

    def _ids(self) -> list[str]:
        return [f"{self.commit_id}#{i}:{j}" for i, (_, count) in enumerate(self.files) for j in range(int(count))]

    def verify(self) -> bool:
        found = self._read_mark()
        if found is None:
            return False  # nothing was produced: the mark is kept before the first record
        with self._client() as client:
            (mark, topic_id), _ = found
            if client.recreated_since(topic_id, self.describe()):
                return False  # execute reads the new topic from its start
            return set(self._ids()) <= client.ids_since(mark, self.commit_id)

    def execute(self) -> None:
        with self._client() as client:
            found = self._read_mark()
            if found is not None:
                (mark, topic_id), version = found
                if client.recreated_since(topic_id, self.describe()):
                    log.warning("dead-letter topic %s was deleted and created again (topic id %s, now %s) while commit %s "
                                "was sending: what it sent to the old topic went with it; the new topic is read from its "
                                "start and what is missing sent, once", self.topic, topic_id,
                                client.topic_id(self.describe()), self.commit_id)
                    mark = self._write_mark(client, client.beginning_offsets(self.describe()), version)
            else:
                self._forget_older()
                mark = self._write_mark(client, client.end_offsets(self.describe()), None)
            there = client.ids_since(mark, self.commit_id)
            missing = [(i, j, entry) for i, j, entry in self._entries() if f"{self.commit_id}#{i}:{j}" not in there]
            if there:
                log.info("dead-letter topic %s holds %d of commit %s's %d record(s) already; sending the other %d",
                         self.topic, len(there), self.commit_id, len(there) + len(missing), len(missing))
            client.send([self._message(i, j, entry) for i, j, entry in missing], self.describe())

    def _client(self) -> _Client:
        return _Client(self.brokers, self.topic, self.client_config, self.timeout_ms)

    def _marks(self) -> tuple[RecordFiles, str]:
        """The folder of the dataset's marks (on the work directory's store, shared by every host), and this one's key."""
        where = Location(self.mark)
        return record_files(where.parent), where.name

    def _write_mark(self, client: _Client, offsets: dict[int, int], version: str | None) -> dict[int, int]:
        """Keep `offsets` and the topic's id durably as the mark, before anything (more) is produced: created only if
        absent, or replacing only the `version` read. Another driver's mark written first is the one kept and used:
        what it sent lies past it."""
        files, key = self._marks()
        body = checked_json.encode({"topic": self.topic, "commit_id": self.commit_id,
                                    "topic_id": client.topic_id(self.describe()),
                                    "offsets": {str(p): o for p, o in offsets.items()}})
        try:
            if version is None:
                files.create(key, body)
            else:
                files.swap(key, body, version)
        except Conflict:
            found = self._read_mark()
            if found is None:
                raise CommitError(f"{self.describe()}: its mark {files.locate(key)} was removed while written; "
                                  "nothing more is sent, the next run tries again") from None
            return found[0][0]
        return offsets

    def _read_mark(self) -> tuple[tuple[dict[int, int], str | None], str] | None:
        """The mark's offsets and the topic id they belong to (None: a broker without topic ids, or an older mark),
        with the mark's version; None when no mark was kept."""
        files, key = self._marks()
        found = read_record(files, key, CommitError, "dead-letter mark", "the step cannot tell what it sent; nothing "
                                                                        "more is sent")
        if found is None:
            return None
        body, version = found
        return ({int(p): int(o) for p, o in body["offsets"].items()}, body.get("topic_id")), version

    def _forget_older(self) -> None:
        """The marks of the dataset's earlier commits: their sequences are done (a dataset has one pending at most)."""
        files, key = self._marks()
        for name in files.names(""):
            if name != key and name.endswith(".json"):
                files.delete(name)

    def _entries(self) -> Iterator[tuple[int, int, dict[str, Any]]]:
        for i, (path, count) in enumerate(self.files):
            where = Location(str(path))
            try:
                with filesystem_for(where).open_read(where) as f:
                    lines = f.read().splitlines()
            except OSError as exc:
                raise CommitError(f"{self.describe()}: cannot read the error file {path}: {describe(exc)}") from None
            if len(lines) != int(count):
                raise CommitError(f"{self.describe()}: the error file {path} holds {len(lines)} entries, not the "
                                  f"{count} published; it changed after the commit, nothing more is sent")
            for j, line in enumerate(lines):
                yield i, j, orjson.loads(line)

    def _message(self, i: int, j: int, entry: dict[str, Any]) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]:
        """The record to produce: the original message's key, value and headers, then the provenance headers."""
        original = SourceMessage.from_json(entry["message"]) if isinstance(entry.get("message"), dict) else None
        if original is not None:
            key, value, headers = original.key, original.value, [(k, v or b"") for k, v in original.headers]
            source = [("topic", original.topic), ("partition", str(original.partition)), ("offset", str(original.offset))]
        else:
            key, value, headers = None, orjson.dumps(entry.get("record"), default=repr), []
            source = []
        provenance = [*source, ("location", entry.get("location", "")), ("stage", entry.get("stage", "")),
                      ("reason", entry.get("reason", "")), ("job", self.job), ("dataset", self.dataset)]
        if entry.get("branch") is not None:
            provenance.append(("branch", entry["branch"]))
        headers += [(PREFIX + k, str(v).encode("utf-8")) for k, v in provenance]
        headers.append((ID_HEADER, f"{self.commit_id}#{i}:{j}".encode()))
        return key, value, headers


class _Client:
    """kafka-python's producer and consumer on the dead-letter topic, for one step's attempt."""

    def __init__(self, brokers: str, topic: str, config: dict[str, Any], timeout_ms: int) -> None:
        self.brokers, self.topic, self.config, self.timeout_ms = brokers, topic, config, timeout_ms
        self._consumer: Any = None
        self._producer: Any = None

    def __enter__(self) -> _Client:
        return self

    def __exit__(self, *exc: object) -> None:
        for client in (self._producer, self._consumer):
            if client is not None:
                client.close()

    def _unreachable(self, what: str, exc: BaseException) -> UnreachableError:
        return UnreachableError(f"{what}: cannot reach Kafka broker(s) {self.brokers}: {describe(exc)}",
                                f"Kafka broker {self.brokers}",
                                "Check that the dead-letter topic's brokers are running; the next run sends what is "
                                "missing, once.")

    def consumer(self, what: str) -> Any:
        if self._consumer is None:
            from kafka import KafkaConsumer
            from kafka.errors import KafkaError

            try:
                self._consumer = KafkaConsumer(
                    bootstrap_servers=self.brokers, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest",
                    request_timeout_ms=self.timeout_ms, fetch_max_wait_ms=100, isolation_level="read_uncommitted",
                    allow_auto_create_topics=False,
                    **self.config)
            except KafkaError as exc:
                raise self._unreachable(what, exc) from None
        return self._consumer

    def partitions(self, what: str) -> list[int]:
        found = self.consumer(what).partitions_for_topic(self.topic)
        if not found:
            raise ConfigError(f"{what}: the topic does not exist on {self.brokers} (create it; gobblin-py does not)")
        return sorted(found)

    def end_offsets(self, what: str) -> dict[int, int]:
        from kafka import TopicPartition

        tps = [TopicPartition(self.topic, p) for p in self.partitions(what)]
        return {tp.partition: int(o) for tp, o in self.consumer(what).end_offsets(tps).items()}

    def beginning_offsets(self, what: str) -> dict[int, int]:
        from kafka import TopicPartition

        tps = [TopicPartition(self.topic, p) for p in self.partitions(what)]
        return {tp.partition: int(o) for tp, o in self.consumer(what).beginning_offsets(tps).items()}

    def topic_id(self, what: str) -> str | None:
        """The topic's id (KIP-516) from the metadata the consumer fetched; None from a broker without topic ids."""
        self.partitions(what)  # fetches the topic's metadata
        cluster = getattr(getattr(self.consumer(what), "_client", None), "cluster", None)
        found = cluster.topic_id(self.topic) if cluster is not None and hasattr(cluster, "topic_id") else None
        return None if found is None or str(found) in ("", "00000000-0000-0000-0000-000000000000") else str(found)

    def recreated_since(self, topic_id: str | None, what: str) -> bool:
        """Whether the topic is not the one whose id a mark kept (never, where either has no id)."""
        now = self.topic_id(what) if topic_id is not None else None
        return topic_id is not None and now is not None and now != topic_id

    def ids_since(self, mark: dict[int, int], commit_id: str) -> set[str]:
        """The `gobblin.error.id`s of `commit_id` in the topic from `mark` (a partition made since: from its start).
        Reads until a poll brings nothing more at or past each partition's end offset: a broker that reports a
        batch's end short (Tansu) is read to its real end."""
        from kafka import TopicPartition

        what = f"reading dead-letter topic {self.topic}"
        consumer = self.consumer(what)
        tps = [TopicPartition(self.topic, p) for p in self.partitions(what)]
        consumer.assign(tps)
        begins = consumer.beginning_offsets(tps)
        ends = consumer.end_offsets(tps)
        for tp in tps:
            start = mark.get(tp.partition, 0)
            if ends[tp] < start or begins[tp] > start:
                raise CommitError(f"dead-letter topic {self.topic} partition {tp.partition} now holds offsets "
                                  f"{begins[tp]}..{ends[tp]}, and this commit's mark was {start}: it was deleted, "
                                  "re-created or truncated since the commit began sending, so what it sent cannot be "
                                  "checked; nothing more is sent. Inspect the topic, then `recover` the dataset")
            consumer.seek(tp, start)
        prefix = f"{commit_id}#".encode()
        found: set[str] = set()
        quiet = 0
        deadline = time.monotonic() + self.timeout_ms / 1000 * 4
        while quiet < 2:
            batches = consumer.poll(timeout_ms=200, max_records=50_000)
            for records in batches.values():
                for r in records:
                    for k, v in reversed(r.headers or []):  # the last: an original message may carry one of its own
                        if k == ID_HEADER:
                            if v is not None and v.startswith(prefix):
                                found.add(v.decode())
                            break
            at_end = all(consumer.position(tp) >= ends[tp] for tp in tps)
            quiet = quiet + 1 if (not batches and at_end) else 0
            if time.monotonic() > deadline:
                raise CommitError(f"{what}: it did not reach its end offsets {ends} in time; retried next run")
        return found

    def send(self, messages: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]], what: str) -> None:
        if not messages:
            return
        from kafka import KafkaProducer
        from kafka.errors import KafkaError

        try:
            self._producer = producer = KafkaProducer(
                bootstrap_servers=self.brokers, acks="all", enable_idempotence=True, linger_ms=5,
                request_timeout_ms=self.timeout_ms, **self.config)
            futures = []
            half = len(messages) // 2
            for n, (key, value, headers) in enumerate(messages):
                futures.append(producer.send(self.topic, key=key, value=value, headers=headers))
                if n + 1 == half:
                    producer.flush()
                    crashpoints.crash_point("dead_letter.midway")
            producer.flush()
            for f in futures:
                f.get(timeout=self.timeout_ms / 1000)
        except KafkaError as exc:
            raise CommitError(f"{what}: {describe(exc)}; the next run sends what is missing") from None


KafkaDeadLetters.step_types = (KafkaDeadLetterStep,)
