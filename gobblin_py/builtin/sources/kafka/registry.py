"""Values in Confluent's wire format (magic byte 0, a 4-byte big-endian schema id, an Avro datum) and the schema
registry that holds their schemas, through confluent-kafka's `SchemaRegistryClient` (which caches what it fetched).

A run reads every value of a topic into one output schema, planned once, kept in each WorkUnit's split and the
dataset's state (and so every key, under `metadata_key: confluent_avro`, from the key subject): the subject's latest version, or
under `schema_evolution: evolve`, when an earlier version does not read into it losslessly, the merge of all its
versions (`evolution.merged`, named by its fingerprint). Each value is decoded with its own writer schema (fetched by
id) and resolved into the output schema by Avro's rules. A writer schema that is a version of the subject and does
not read into the output losslessly (a field dropped, a type narrowed, a field without default) follows
`schema_evolution`: `fail` (and `evolve`, for a version registered after planning) fails the range with an
`IncompatibleVersion` naming the subject, both versions and the offset; `dead_letter` makes its values bad records.
Never a silent null. A writer schema that is no version of the subject is a producer's mistake: its values are bad
records where Avro cannot resolve them, and a `LossyRead` where fields would be dropped.
"""

from __future__ import annotations

import importlib
import io
import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from gobblin_py.builtin.sources.kafka.evolution import MergeError, fingerprint, losses, merge_versions
from gobblin_py.builtin.sources.kafka.settings import SchemaRegistrySettings
from gobblin_py.errors import (
    ConfigError,
    PermanentTaskError,
    RetriableTaskError,
    SourceError,
    UnreachableError,
    describe,
)

MAGIC = 0
HEADER = struct.Struct(">bI")  # magic byte, schema id
REGISTRY_REMEDY = ("Check that the schema registry is running and `source.schema_registry.url` is right; the next run "
                   "resumes from the committed offsets.")


class UndecodableValue(ValueError):
    """A value that is not in Confluent's wire format, names a schema the registry does not have, or does not
    decode into the output schema: a bad record (its reason names the schema id)."""


class LossyRead(PermanentTaskError, SourceError):
    """A value whose writer schema has fields the output schema lacks, and is no version of the subject up to the
    output schema's (whose evolution would have removed them): read into it, those fields would be lost for good once
    its offset is committed, so the task fails instead and nothing of its range is published. Not retried: the run's
    output schema is planned, so every attempt would meet the same value (the extractor prefixes its location)."""


class IncompatibleVersion(LossyRead):
    """A value written in a version of the subject that does not read into the output schema without loss, under
    `schema_evolution: fail` (or, under `evolve`, a version registered after the run was planned): the range fails,
    naming the subject, both versions and schema ids, and the offset."""


@dataclass(frozen=True)
class OutputSchema:
    """A subject's version that a run reads every value into: where it came from and the Avro record schema."""

    subject: str
    version: int
    schema_id: int
    schema: dict[str, Any]
    merged: tuple[int, ...] = ()
    """Under `schema_evolution: evolve`, the subject's versions merged into `schema` (empty: `schema` is the version's)."""
    fingerprint: str | None = None
    """The merged schema's fingerprint (`evolution.fingerprint`), which names it in output names and the state."""

    def identity(self) -> dict[str, Any]:
        """What the dataset's state keeps of it, so the next plan can tell the schema changed."""
        return {"subject": self.subject, "version": self.version, "id": self.schema_id}

    def evolved(self) -> dict[str, Any] | None:
        """What the dataset's state keeps of a merged schema (None for a version's own): the versions, the fingerprint."""
        return {"versions": list(self.merged), "fingerprint": self.fingerprint} if self.merged else None

    def describe(self) -> str:
        own = f"subject {self.subject!r} version {self.version} (schema id {self.schema_id})"
        if not self.merged:
            return own
        return (f"{own} merged with its earlier versions {', '.join(map(str, self.merged[:-1]))} (schema_evolution: "
                f"evolve; fingerprint {self.fingerprint})")


@dataclass(frozen=True)
class SchemaPart:
    """A part of a message read in Confluent's wire format (its value, or its key): the setting naming its subject, and
    the names under which a WorkUnit's id names its output schema and the dataset's state keeps its identity (the
    schema itself travels in the WorkUnit's `KafkaSplit`)."""

    part: str  # "value" or "key"
    setting: str  # the source setting naming the subject
    id_tag: str  # how the WorkUnit id names the schema id

    @property
    def kept(self) -> str:
        """The dataset state's key for the identity last committed (`state.<kept>`)."""
        return f"{self.part}_schema"

    @property
    def kept_evolved(self) -> str:
        """The dataset state's key for a merged output schema's versions and fingerprint (absent for a version's own)."""
        return f"{self.part}_schema_evolved"

    def state_props(self, out: OutputSchema) -> dict[str, Any]:
        """The WorkUnit props that keep `out`'s identity (and a merged schema's versions) in the dataset's state."""
        props: dict[str, Any] = {f"state.{self.kept}": out.identity()}
        if out.merged:
            props[f"state.{self.kept_evolved}"] = out.evolved()
        return props


VALUE = SchemaPart("value", "subject", "schema")
KEY = SchemaPart("key", "key_subject", "key-schema")


def registry_client(s: SchemaRegistrySettings) -> Any:
    """confluent-kafka's client for the registry; the password is read from its variable here and kept nowhere else."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    conf: dict[str, Any] = {"url": s.url, "timeout": s.timeout_s, "max.retries": s.max_retries,
                            "retries.wait.ms": 200, "retries.max.wait.ms": 2000}
    password = s.password()
    if s.basic_auth_user is not None and password is not None:
        conf["basic.auth.user.info"] = f"{s.basic_auth_user}:{password}"
    if s.ssl_ca_location is not None:
        conf["ssl.ca.location"] = str(s.ssl_ca_location)
    return SchemaRegistryClient(conf)


def _transport_errors() -> tuple[type[BaseException], ...]:
    """What the client's HTTP library raises for a registry it cannot reach: confluent-kafka uses httpx2 where it is
    installed, else httpx (either or both may be)."""
    found: list[type[BaseException]] = [OSError]
    for name in ("httpx2", "httpx"):
        try:
            found.append(importlib.import_module(name).TransportError)
        except ImportError:
            continue
    return tuple(found)


def ask(s: SchemaRegistrySettings, what: str, call: Callable[[], Any]) -> Any:
    """`call()` against the registry; a registry that cannot be reached is an UnreachableError naming its URL, a refused
    login a ConfigError naming the user and the variable. Its own answers (`SchemaRegistryError`, a 404 say) pass."""
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    try:
        return call()
    except SchemaRegistryError as exc:
        if exc.http_status_code in (401, 403):
            raise ConfigError(f"{s.endpoint} refused {what} (HTTP {exc.http_status_code}): check source.schema_registry."
                              f"basic_auth_user ({s.basic_auth_user!r}) and the password in "
                              f"${s.password_env or '(no password_env given)'}") from None
        if exc.http_status_code >= 500 or exc.http_status_code == 429:
            raise RetriableTaskError(f"{s.endpoint}: {what} failed: {exc}") from None
        raise
    except _transport_errors() as exc:
        raise UnreachableError(f"cannot reach {s.endpoint} for {what}: {describe(exc)}", s.endpoint,
                               REGISTRY_REMEDY) from None


def latest_schema(s: SchemaRegistrySettings, client: Any, subject: str, topic: str, part: SchemaPart = VALUE) -> OutputSchema:
    """The subject's latest version, which must be an Avro schema without references, and for values a record
    (planning)."""
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    try:
        found = ask(s, f"the latest version of subject {subject!r}", lambda: client.get_latest_version(subject))
    except SchemaRegistryError as exc:
        if exc.http_status_code == 404:
            raise SourceError(f"topic {topic!r}: subject {subject!r} is not in {s.endpoint} ({exc.error_message}); "
                              f"produce with a Confluent serializer first, or set source.{part.setting} to the subject that "
                              f"holds the topic's {part.part} schemas") from None
        raise SourceError(f"topic {topic!r}: {s.endpoint} answered {exc} for subject {subject!r}") from None
    where = f"topic {topic!r}: subject {subject!r} version {found.version} (schema id {found.schema_id})"
    kind = found.schema.schema_type or "AVRO"
    if kind != "AVRO":
        raise SourceError(f"{where} is a {kind} schema; confluent_avro reads Avro {part.part}s only")
    if found.schema.references:
        raise SourceError(f"{where} references other subjects' schemas, which confluent_avro does not resolve yet")
    schema = json.loads(found.schema.schema_str)
    if part is VALUE and not _is_record(schema):
        raise SourceError(f"{where} is not an Avro record schema: the avro and parquet writers need one")
    return OutputSchema(subject, int(found.version), int(found.schema_id), schema)


def evolved(s: SchemaRegistrySettings, client: Any, latest: OutputSchema, topic: str, part: SchemaPart = VALUE) -> OutputSchema:
    """Under `schema_evolution: evolve`, the output schema: `latest` when every earlier Avro version of its subject reads
    into it losslessly (a compatible evolution), else the merge of all of them (planning). A set of versions that cannot
    be merged fails the topic, naming them."""
    subject = latest.subject
    numbers = ask(s, f"the versions of subject {subject!r}", lambda: client.get_versions(subject))
    earlier: list[tuple[int, int, Any]] = []
    for number in sorted(int(v) for v in numbers if int(v) < latest.version):
        found = ask(s, f"version {number} of subject {subject!r}", lambda number=number: client.get_version(subject, number))
        if (found.schema.schema_type or "AVRO") == "AVRO" and not found.schema.references:
            earlier.append((number, int(found.schema_id), json.loads(found.schema.schema_str)))
    if not any(losses(schema, latest.schema) for _, _, schema in earlier):
        return latest
    labelled = [(f"version {v} (schema id {i})", schema) for v, i, schema in earlier]
    try:
        schema = merge_versions([*labelled, (f"version {latest.version} (schema id {latest.schema_id})", latest.schema)])
    except MergeError as exc:
        raise SourceError(f"topic {topic!r}: the {part.part} schemas of subject {subject!r} cannot be merged into one "
                          f"output schema (schema_evolution: evolve): {exc}. Nothing of the topic was read. Register a "
                          "version that every earlier one reads into, or set source.schema_evolution: dead_letter to "
                          "divert the values that do not fit the latest version") from None
    return OutputSchema(subject, latest.version, latest.schema_id, schema,
                        (*(v for v, _, _ in earlier), latest.version), fingerprint(schema))


def version_in(s: SchemaRegistrySettings, client: Any, subject: str, schema_id: int, schema: Any) -> int | None:
    """The version of `subject` that holds `schema` (the registry's schema id `schema_id`); None when none does (or the
    one that did was deleted)."""
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    try:
        found = ask(s, f"schema id {schema_id} under subject {subject!r}", lambda: client.lookup_schema(subject, schema))
    except SchemaRegistryError as exc:
        if exc.http_status_code == 404:
            return None
        raise RetriableTaskError(f"{s.endpoint} answered {exc} for schema id {schema_id} under subject {subject!r}") from None
    return int(found.version)


class Unusable(str):
    """Why a schema id's values cannot be read (a str subclass: a parsed primitive schema, such as a key's "string",
    is a str too)."""


class _WireFormat:
    """Values in Confluent's wire format: the header checked, each schema id's schema fetched once per task and taken
    only if it is of this decoder's `kind` (`_accept` makes it usable, or says why not)."""

    kind = "AVRO"
    wanted = "Avro"  # what the reason for another kind names

    def __init__(self, s: SchemaRegistrySettings) -> None:
        self.settings = s
        self.client = registry_client(s)
        self.schemas: dict[int, Any] = {}  # schema id → what `_accept` made of it, or the reason it cannot be used

    def schema(self, schema_id: int) -> Any:
        """What `_accept` made of `schema_id`'s schema, or UndecodableValue saying why there is none."""
        found = self.schemas.get(schema_id)
        if found is None:
            found = self.schemas[schema_id] = self._fetch(schema_id)
        if isinstance(found, Unusable):
            raise UndecodableValue(f"schema id {schema_id}: {found}")
        return found

    def _fetch(self, schema_id: int) -> Any:
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        try:
            schema = ask(self.settings, f"schema id {schema_id}", lambda: self.client.get_schema(schema_id))
        except SchemaRegistryError as exc:
            if exc.http_status_code == 404:
                return Unusable(f"not in {self.settings.endpoint} ({exc.error_message})")
            raise RetriableTaskError(f"{self.settings.endpoint} answered {exc} for schema id {schema_id}") from None
        kind = schema.schema_type or "AVRO"
        if kind != self.kind:
            return Unusable(f"{'an' if kind[:1] in 'AEIOU' else 'a'} {kind} schema, not {self.wanted}")
        if schema.references:
            return Unusable(f"{self.wanted} with references to other subjects, which are not resolved yet")
        return self._accept(schema)

    def _accept(self, schema: Any) -> Any:
        return schema

    @staticmethod
    def schema_id(raw: bytes) -> int:
        """The schema id in the value's header; UndecodableValue for a value not in the wire format."""
        if len(raw) < HEADER.size or raw[0] != MAGIC:
            raise UndecodableValue(f"not in Confluent's wire format: it starts with {raw[:HEADER.size].hex() or 'nothing'}, "
                                   f"not magic byte 0 and a 4-byte schema id")
        return int(HEADER.unpack_from(raw)[1])


class ConfluentAvroDecoder(_WireFormat):
    """Decodes one value (or key) into the output schema `reader`: its writer schema fetched by id (once per id and
    task) and judged once, losslessly readable or not, per `policy` (`schema_evolution`)."""

    def __init__(self, s: SchemaRegistrySettings, reader: Any, reader_id: int, subject: str, reader_version: int,
                 policy: str = "fail", merged: tuple[int, ...] = (), reader_fingerprint: str | None = None) -> None:
        import fastavro

        super().__init__(s)
        self.subject = subject
        self.reader = fastavro.parse_schema(reader)
        self.reader_id = reader_id
        self.reader_version = reader_version
        self.policy = policy
        self.output = OutputSchema(subject, reader_version, reader_id, reader, merged, reader_fingerprint)

    @classmethod
    def of(cls, s: SchemaRegistrySettings, out: OutputSchema, policy: str = "fail") -> ConfluentAvroDecoder:
        """A decoder into the planned output schema `out` (a value's record, or a key's schema of any type)."""
        return cls(s, out.schema, out.schema_id, out.subject, out.version, policy, out.merged, out.fingerprint)

    def _fetch(self, schema_id: int) -> Any:
        if schema_id == self.reader_id and not self.output.merged:
            return self.reader
        found = super()._fetch(schema_id)
        if isinstance(found, Unusable):
            return found
        problems = losses(found, self.reader)
        if not problems:
            return found
        version = self._version_of(schema_id)
        if version is None:  # no version of the subject: a producer's mistake, not the subject's evolution
            lost = dropped_fields(found, self.reader) if _is_record(found) and _is_record(self.reader) else []
            if not lost:
                return found  # what Avro cannot resolve is a bad record, value by value
            return LossyRead(f"schema id {schema_id} (no version of subject {self.subject!r}) has field(s) "
                             f"{', '.join(lost)} that the output schema (version {self.reader_version}, schema id "
                             f"{self.reader_id}) lacks: read into it they would be lost, so nothing of this range is "
                             "published. Register the writer's schema as the subject's newest version (the next run "
                             "reads into it), or correct the producer")
        what = (f"subject {self.subject!r} version {version} (schema id {schema_id}) does not read into the output "
                f"schema, {self.output.describe().removeprefix(f'subject {self.subject!r} ')}, without loss: "
                f"{'; '.join(problems)}")
        if version > self.reader_version:  # under every policy: its values are no mistake, the next run plans with it
            return IncompatibleVersion(
                f"{what}. That version was registered after this run was planned; nothing of this range is published, "
                "and the next run plans its output schema with it" + (
                    "" if self.policy != "fail" else ". If it still cannot read every earlier version without loss, "
                    "set source.schema_evolution: evolve or dead_letter"))
        if self.policy == "dead_letter":
            return Unusable(f"{what} (schema_evolution: dead_letter)")
        return IncompatibleVersion(
            f"{what}; nothing of this range is published (schema_evolution: {self.policy}). Register a version of "
            f"{self.subject!r} that every earlier one reads into (fields removed or added only with defaults, types "
            "only widened), or set source.schema_evolution: evolve (the output keeps every field, nullable where a "
            "version lacks it) or dead_letter (values of such versions go to the error file)")

    def writes_output(self, schema_id: int) -> bool:
        """Whether values of `schema_id` are written in the output schema itself, so their datums decode straight into
        it with nothing to resolve (the output's own id, or an id of the identical schema; none for a merged output
        schema); UndecodableValue for an id without a usable schema."""
        found = self.schema(schema_id)
        return found is self.reader or (isinstance(found, dict) and found == self.reader)

    def _version_of(self, schema_id: int) -> int | None:
        """The subject's version of schema `schema_id`; None when it is none of them (or one deleted)."""
        schema = ask(self.settings, f"schema id {schema_id}", lambda: self.client.get_schema(schema_id))
        return version_in(self.settings, self.client, self.subject, schema_id, schema)

    def _accept(self, schema: Any) -> Any:
        import fastavro

        try:
            return fastavro.parse_schema(json.loads(schema.schema_str))
        except Exception as exc:  # noqa: BLE001 - any schema fastavro refuses makes the values of this id unreadable
            return Unusable(f"an Avro schema fastavro cannot parse ({describe(exc)})")

    def __call__(self, raw: bytes) -> Any:
        import fastavro
        from fastavro._read_common import SchemaResolutionError

        schema_id = self.schema_id(raw)
        writer = self.schema(schema_id)
        if isinstance(writer, LossyRead):
            raise type(writer)(str(writer))
        buf = io.BytesIO(raw)
        buf.seek(HEADER.size)
        try:
            if writer is self.reader:
                return fastavro.schemaless_reader(buf, writer, None)
            return fastavro.schemaless_reader(buf, writer, self.reader)
        except SchemaResolutionError as exc:
            raise UndecodableValue(f"schema id {schema_id} cannot be read as {self.subject!r} schema id {self.reader_id} "
                                   f"(the output schema): {exc}") from None
        except (ValueError, TypeError, EOFError, IndexError, KeyError, UnicodeDecodeError, OverflowError) as exc:
            raise UndecodableValue(f"schema id {schema_id}: the Avro payload does not decode ({describe(exc)})") from None


class ConfluentJsonDecoder(_WireFormat):
    """Decodes one value written by Confluent's JSON Schema serializer: its header checked, its schema id one of the
    registry's JSON Schemas, the document after it parsed as `deserializer: json` parses one (the job's `json_to_avro`
    schema, not the JSON Schema, shapes the records; `json_schema.ValidatingJsonDecoder` also validates each value
    against it, under `json_schema_validation`)."""

    kind = "JSON"
    wanted = "a JSON Schema"

    def __call__(self, raw: bytes) -> Any:
        self.schema(self.schema_id(raw))
        return orjson.loads(memoryview(raw)[HEADER.size:])


def dropped_fields(writer: Any, reader: Any, path: str = "") -> list[str]:
    """The fields of the record schema `writer` (parsed) that Avro's resolution into `reader` would drop: no reader
    field has their name or an alias of it; nested records compared the same way (not records inside unions,
    arrays or maps, whose resolution is left to Avro's rules)."""
    known: dict[str, Any] = {}
    for field in reader.get("fields", []):
        for name in (field["name"], *field.get("aliases", [])):
            known[name] = field
    lost = []
    for field in writer.get("fields", []):
        match = known.get(field["name"])
        name = f"{path}{field['name']}"
        if match is None:
            lost.append(name)
        elif _is_record(field["type"]) and _is_record(match["type"]):
            lost.extend(dropped_fields(field["type"], match["type"], f"{name}."))
    return lost


def _is_record(avro_type: Any) -> bool:
    return isinstance(avro_type, dict) and avro_type.get("type") == "record"
