"""The `kafka` source's settings and how to reach the brokers: shared by the planner (`source.py`) and the
readers (`extractor.py`, `confluent.py`), so neither imports the other."""

from __future__ import annotations

import os
import re
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from gobblin_py.api import Settings
from gobblin_py.api.secrets import ENV_NAME, url_secret
from gobblin_py.builtin.extras import require
from gobblin_py.errors import ConfigError, SourceError, UnreachableError, describe
from gobblin_py.fs.paths import ExistingFile

TOPIC_PREFIX_CHARS = 40
"""How much of the topic name the readable part of an output name keeps (the hash covers all of it)."""


class SchemaRegistrySettings(Settings):
    """Where a Confluent schema registry is and how to log in: the password only through an environment variable."""

    url: str = Field(description="http(s)://host:port of the registry (a comma-separated list: tried in turn); no "
                                 "password in it: see password_env")
    basic_auth_user: str | None = Field(default=None, description="the user for HTTP basic auth (Confluent Cloud: the API key)")
    password_env: str | None = Field(default=None, description="the environment variable holding the basic-auth password "
                                                               "(Confluent Cloud: the API secret); never the password itself")
    ssl_ca_location: ExistingFile | None = Field(default=None, description="a CA bundle to check the registry's certificate")
    timeout_s: float = Field(default=10.0, gt=0, description="how long one request to the registry may take")
    max_retries: int = Field(default=2, ge=0, description="retries of a request that failed to connect or got a 5xx/429")

    @model_validator(mode="after")
    def _url_and_login(self) -> SchemaRegistrySettings:
        """Checked here, where an error does not echo the url (which might hold a password)."""
        why = url_secret(self.url)
        if why is not None:
            raise ValueError(f"url holds a secret ({why}): give the user in basic_auth_user and name the variable holding "
                             "the password in password_env")
        for one in self.url.split(","):
            parts = urlsplit(one.strip())
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"url {one.strip()!r}: give http(s)://host:port")
        if self.password_env is not None and not ENV_NAME.fullmatch(self.password_env):
            raise ValueError("password_env must name an environment variable (letters, digits and _), not hold the password")
        if (self.basic_auth_user is None) != (self.password_env is None):
            raise ValueError("basic auth needs both basic_auth_user and password_env (or neither)")
        if self.password_env is not None and self.password_env not in os.environ:
            raise ValueError("password_env: the environment variable it names is not set (its value is not repeated: it must be "
                             "the variable's name, not the password)")
        return self

    @property
    def endpoint(self) -> str:
        """The registry as messages and the run's retry budget name it: its URL(s), which hold no secret."""
        return f"schema registry {self.url}"

    def password(self) -> str | None:
        """The password from `password_env` (None without one); read where the client is made, never stored."""
        if self.password_env is None:
            return None
        value = os.environ.get(self.password_env)
        if value is None:
            raise ConfigError(f"source.schema_registry.password_env: the environment variable {self.password_env} is not "
                              "set here (on a cluster, pass it to the executors: spark.conf: {spark.executorEnv."
                              f"{self.password_env}: ...}})")
        return value


class KafkaSettings(Settings):
    bootstrap_servers: str | list[str] = Field(description="host:port, or a list of them (Gobblin kafka.brokers)")
    topics: list[str] | None = Field(default=None, description="the topics to read, one dataset each (this or topic_pattern)")
    topic_pattern: str | None = Field(default=None, description="a regex over the broker's topics (this or topics; Gobblin topic.whitelist)")
    exclude_topics: list[str] = Field(default_factory=list, description="regexes (Gobblin topic.blacklist)")
    bootstrap_with_offset: Literal["earliest", "latest"] = Field(
        default="earliest", description="where a partition never seen starts (Gobblin bootstrap.with.offset)")
    reset_on_offset_out_of_range: Literal["earliest", "latest", "fail"] = Field(
        default="earliest", description="a committed offset the broker no longer has (retention deleted it, or the partition "
        "is shorter): earliest/latest go on from that end and name the lost offsets in the run's summary; fail stops the run")
    on_topic_recreated: Literal["fail", "earliest"] = Field(
        default="fail", description="the topic was deleted and created again since the last commit (its id changed; its "
        "offsets start at 0 again): fail skips the topic, names both ids and exits 1; earliest reads the new topic from its "
        "first offset, and the summary says so. The committed offsets never carry over to the new topic")
    max_workunits: int = Field(default=8, ge=1, description="partitions are bin-packed (by last run's bytes per record) into at most this many tasks")
    min_records_per_workunit: int = Field(
        default=50_000, ge=1, description="fewer tasks for a small run or checkpoint: each reads at least this many records where it can (a task costs Spark ~0.1 s)")
    deserializer: Literal["json", "avro", "confluent_avro", "confluent_json", "confluent_protobuf", "string", "bytes"] = Field(
        default="json", description="json, avro (a schemaless datum of avro_schema), confluent_avro (Confluent's wire "
        "format: magic byte 0, the schema id, an Avro datum; schemas from schema_registry), confluent_json (the same "
        "header before a JSON document whose id names a JSON Schema; records as json's), confluent_protobuf (the same "
        "header, the message indexes and a Protobuf message; records in an Avro schema derived from protobuf_message), "
        "string or bytes (as {\"value\": ...})")
    protobuf_message: str | None = Field(
        default=None, description="for deserializer confluent_protobuf: the message of the subject's schema that values "
                                  "are (its full name, pkg.Msg, or a top-level message's name); unset: the file's first")
    schema_registry: SchemaRegistrySettings | None = Field(
        default=None, description="for deserializer confluent_avro, confluent_json or confluent_protobuf, and metadata_key "
                                  "confluent_avro: "
                                  "{url, basic_auth_user, password_env, ssl_ca_location, timeout_s, max_retries}")
    json_schema_validation: bool | None = Field(
        default=None, description="deserializer confluent_json: validate each value against its writer's JSON Schema "
        "(by its schema id; the draft its $schema names, draft-07 without one), as Confluent's JSONDeserializer does; "
        "a value that does not validate is a bad record naming the schema id, the JSON path and the error (unset: "
        "true)")
    subject: str = Field(
        default="{topic}-value", description="the registry subject of a topic's values: {topic} stands for the topic's name "
                                             "(Confluent's TopicNameStrategy, the default), or one fixed subject")
    key_subject: str = Field(
        default="{topic}-key", description="the registry subject of a topic's keys, for metadata_key confluent_avro: "
                                           "{topic} stands for the topic's name, as in subject")
    schema_evolution: Literal["fail", "evolve", "dead_letter"] = Field(
        default="fail", description="confluent_avro: a value written in a version of the subject that does not read into "
        "the output schema without loss (a field removed, a type narrowed, a field added without default). The output "
        "schema is the subject's latest version when every earlier one reads into it losslessly. fail stops the topic "
        "naming the subject, both versions and the offset, nothing of the range committed; evolve writes the merge of "
        "all versions (fields a version lacks nullable, the wider of two types); dead_letter makes those values bad "
        "records (the error file). Never a silent null")
    metadata_columns: list[Literal["key", "topic", "partition", "offset", "timestamp", "headers"]] = Field(
        default_factory=list, description="add each message's key, topic, partition, offset, timestamp and/or headers "
        "to its record and the output schema as _kafka_<name> (deserializer avro, confluent_avro or confluent_protobuf; "
        "confluent_json: to its record, and json_to_avro's schema must list them); headers are an "
        "array of {key, value} records in the message's order, repeats kept, value null for a header without one")
    metadata_key: Literal["string", "bytes", "confluent_avro"] = Field(
        default="string", description="the type of _kafka_key (null for a message without a key); a key that is not "
                                      "UTF-8 under string is a bad record; confluent_avro: keys in Confluent's wire "
                                      "format, read into key_subject's latest version as values are (needs "
                                      "schema_registry)")
    tombstones: Literal["reject", "delete"] = Field(
        default="reject", description="a message with a null value (a tombstone, Kafka's delete of its key): reject makes it "
        "a bad record (the error file); delete makes it a record whose value fields are null and _kafka_deleted true (every "
        "other record has it false, and the value fields become nullable), for an Iceberg upsert publisher's "
        "delete_when: {column: _kafka_deleted, equals: [true]}. Needs metadata_columns with key (a tombstone without a key "
        "is a bad record) and deserializer avro, confluent_avro or confluent_protobuf")
    client: Literal["kafka-python", "confluent"] = Field(
        default="kafka-python", description="confluent: librdkafka, a quarter of kafka-python's CPU per record (pip install 'gobblin-py[confluent]')")
    avro_schema: ExistingFile | None = Field(default=None, description="the .avsc file for deserializer: avro")
    fetch_max_bytes: int = Field(default=64 * 1024 * 1024, ge=1024, description="bytes one fetch may return: large for throughput")
    max_partition_fetch_bytes: int = Field(default=16 * 1024 * 1024, ge=1024, description="bytes one fetch may return per partition")
    fetch_max_wait_ms: int = Field(default=200, ge=1, description="never 0: some brokers spin and return nothing")
    max_poll_records: int = Field(default=20_000, ge=1, description="records per poll")
    request_timeout_ms: int = Field(default=30_000, ge=1000, description="how long a request to the broker may take")
    idle_timeout_s: float = Field(default=60.0, gt=0, description="give up when a partition makes no progress this long")
    consumer_config: dict[str, Any] = Field(default_factory=dict, description="extra kafka-python consumer settings (security, …)")
    commit_offsets_to_group: str | None = Field(
        default=None, min_length=1, description="a consumer group (group.id) that gets a copy of the committed offsets after each run's "
        "commits, so lag tools that read consumer groups (Burrow, Kafka UIs, Datadog) see the job. Best effort: a "
        "failure is a warning and a GroupCommitFailed event, never a failed run; the group is never read back (the job's "
        "watermarks stay the truth) and must have no active members. Unset: no group is written")

    @field_validator("topics")
    @classmethod
    def _topic_names(cls, value: list[str] | None) -> list[str] | None:
        """A topic's name is its dataset's directory name: Kafka's legal names only (never `..` nor a `/`)."""
        for topic in value or []:
            if not re.fullmatch(r"[A-Za-z0-9._-]{1,249}", topic) or topic in (".", ".."):
                raise ValueError(f"topic {topic!r} is not a Kafka topic name (up to 249 letters, digits, '.', '_' and '-'; "
                                 "not '.' or '..'); its name becomes the dataset's directory")
        return value

    @field_validator("topic_pattern")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression: {exc}") from None
        return value

    @field_validator("exclude_topics")
    @classmethod
    def _regexes(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"{pattern!r} is not a valid regular expression: {exc}") from None
        return value

    @model_validator(mode="after")
    def _one_selection(self) -> KafkaSettings:
        if (self.topics is None) == (self.topic_pattern is None):
            raise ValueError("give exactly one of topics: [..] or topic_pattern: REGEX")
        if self.deserializer == "avro" and self.avro_schema is None:
            raise ValueError("deserializer avro needs avro_schema: PATH.avsc")
        needs = [f"{k} {v}" for k, v in (("deserializer", self.deserializer), ("metadata_key", self.metadata_key))
                 if v in ("confluent_avro", "confluent_json", "confluent_protobuf")]
        if bool(needs) != (self.schema_registry is not None):
            raise ValueError(f"{needs[0]} needs schema_registry: {{url: http://host:8081}}" if needs else
                             "schema_registry is read only with deserializer: confluent_avro, confluent_json or "
                             "confluent_protobuf, or metadata_key: confluent_avro")
        if self.protobuf_message is not None and self.deserializer != "confluent_protobuf":
            raise ValueError("protobuf_message is read only with deserializer: confluent_protobuf")
        if self.deserializer == "confluent_protobuf":
            require("google.protobuf", "deserializer confluent_protobuf needs the protobuf package", "schema-registry")
        if needs:
            require("confluent_kafka.schema_registry", f"{needs[0]} needs confluent-kafka's schema registry client",
                    "schema-registry")
            for name in ("subject", "key_subject"):
                try:
                    getattr(self, name).format(topic="t")
                except (KeyError, IndexError, ValueError) as exc:
                    raise ValueError(f"{name} {getattr(self, name)!r}: only {{topic}} may stand in it "
                                     f"({describe(exc)})") from None
        if self.json_schema_validation is not None and self.deserializer != "confluent_json":
            raise ValueError("json_schema_validation applies to deserializer confluent_json only")
        if self.metadata_columns and self.deserializer not in ("avro", "confluent_avro", "confluent_protobuf", "confluent_json"):
            raise ValueError("metadata_columns needs deserializer avro, confluent_avro or confluent_protobuf, whose output "
                             "schema gains the _kafka_* fields, or confluent_json, whose json_to_avro schema must list them")
        if len(set(self.metadata_columns)) != len(self.metadata_columns):
            raise ValueError("metadata_columns names a column twice")
        if self.tombstones == "delete" and ("key" not in self.metadata_columns or self.deserializer not in (
                "avro", "confluent_avro", "confluent_protobuf")):
            raise ValueError("tombstones: delete needs metadata_columns with key (the deleted key; add it, and use "
                             "_kafka_key as the upsert publisher's key) and deserializer avro, confluent_avro or "
                             "confluent_protobuf (whose output schema gains _kafka_deleted)")
        for key in ("isolation_level", "isolation.level"):
            if self.consumer_config.get(key, "read_committed") != "read_committed":
                raise ValueError(f"consumer_config {key}: {self.consumer_config[key]!r} would read records of aborted and "
                                 "open transactions as data; remove it (the source reads read_committed)")
        if self.client == "confluent":
            require("confluent_kafka", "client confluent needs the confluent-kafka package", "confluent")
        return self

    def selects(self, topic: str) -> str | None:
        """The setting under which the source reads `topic` (`topics` or `topic_pattern`), None when it does not.
        Judged by the name alone, as planning selects from the broker's topics: it holds for a topic made later too."""
        if self.topics is not None:
            key = "topics" if topic in self.topics else None
        else:  # matched whole; internal topics (`__consumer_offsets` …) never
            key = "topic_pattern" if re.fullmatch(self.topic_pattern or "", topic) and not topic.startswith("__") else None
        if key is None or any(re.fullmatch(x, topic) for x in self.exclude_topics):
            return None
        return key

    @property
    def validates_json(self) -> bool:
        """Whether confluent_json values are validated against their JSON Schema (the default)."""
        return self.json_schema_validation is not False

    def subject_of(self, topic: str) -> str:
        """The registry subject holding `topic`'s value schemas."""
        return self.subject.format(topic=topic)

    def key_subject_of(self, topic: str) -> str:
        """The registry subject holding `topic`'s key schemas."""
        return self.key_subject.format(topic=topic)

    @property
    def avro_keys(self) -> bool:
        """Whether `_kafka_key` holds keys read from Confluent's wire format (its type the key subject's schema)."""
        return self.metadata_key == "confluent_avro" and "key" in self.metadata_columns

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
        "isolation_level": "read_committed",  # a transaction's records once it commits; end offsets stop at an open one
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
