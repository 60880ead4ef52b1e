"""Values in Confluent's wire format (magic byte 0, a 4-byte big-endian schema id, an Avro datum) and the schema
registry that holds their schemas, through confluent-kafka's `SchemaRegistryClient` (which caches what it fetched).

A run reads every value of a topic into one output schema: the subject's latest version when the run was planned,
kept in each WorkUnit and the dataset's state (and so every key, under `metadata_key: confluent_avro`, from the key
subject). Each value is decoded with its own writer schema (fetched by id) and
resolved into that output schema by Avro's rules (fields added with defaults, fields removed, int→long→float→double,
string↔bytes); a value that cannot be is a bad record naming its schema id. A writer schema with fields the output
schema lacks is read only when it is a version of the subject up to the output's (`LossyRead` otherwise): no field's
values are dropped that the subject's own evolution did not remove.
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

from gobblin_py.builtin.sources.kafka.settings import SchemaRegistrySettings
from gobblin_py.errors import ConfigError, RetriableTaskError, SourceError, UnreachableError, describe

MAGIC = 0
HEADER = struct.Struct(">bI")  # magic byte, schema id
REGISTRY_REMEDY = ("Check that the schema registry is running and `source.schema_registry.url` is right; the next run "
                   "resumes from the committed offsets.")


class UndecodableValue(ValueError):
    """A value that is not in Confluent's wire format, names a schema the registry does not have, or does not
    decode into the output schema: a bad record (its reason names the schema id)."""


class LossyRead(SourceError):
    """A value whose writer schema has fields the output schema lacks, and is no version of the subject up to the
    output schema's (whose evolution would have removed them): read into it, those fields would be lost for good once
    its offset is committed, so the task fails instead and nothing of its range is published."""


@dataclass(frozen=True)
class OutputSchema:
    """A subject's version that a run reads every value into: where it came from and the Avro record schema."""

    subject: str
    version: int
    schema_id: int
    schema: dict[str, Any]

    def identity(self) -> dict[str, Any]:
        """What the dataset's state keeps of it, so the next plan can tell the schema changed."""
        return {"subject": self.subject, "version": self.version, "id": self.schema_id}

    def describe(self) -> str:
        return f"subject {self.subject!r} version {self.version} (schema id {self.schema_id})"


@dataclass(frozen=True)
class SchemaPart:
    """A part of a message read in Confluent's wire format (its value, or its key): the setting naming its subject, and
    the names under which a WorkUnit carries its output schema and the dataset's state keeps its identity."""

    part: str  # "value" or "key"
    setting: str  # the source setting naming the subject
    subject_prop: str  # the WorkUnit prop holding the subject
    id_tag: str  # how the WorkUnit id names the schema id

    @property
    def schema_prop(self) -> str:
        """The WorkUnit prop holding the planned Avro schema (with `<part>_schema_id` and `<part>_schema_version`)."""
        return f"{self.part}_schema"

    @property
    def kept(self) -> str:
        """The dataset state's key for the identity last committed (`state.<kept>`)."""
        return f"{self.part}_schema"

    def props(self, out: OutputSchema) -> dict[str, Any]:
        """The WorkUnit props carrying `out` to the task, and its identity to the dataset's state."""
        return {self.schema_prop: out.schema, f"{self.part}_schema_id": out.schema_id,
                f"{self.part}_schema_version": out.version, self.subject_prop: out.subject,
                f"state.{self.kept}": out.identity()}

    def read(self, props: dict[str, Any]) -> OutputSchema:
        """The output schema a WorkUnit's `props` carry (see `props`)."""
        return OutputSchema(props[self.subject_prop], int(props[f"{self.part}_schema_version"]),
                            int(props[f"{self.part}_schema_id"]), props[self.schema_prop])


VALUE = SchemaPart("value", "subject", "subject", "schema")
KEY = SchemaPart("key", "key_subject", "key_subject", "key-schema")


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
    task)."""

    def __init__(self, s: SchemaRegistrySettings, reader: Any, reader_id: int, subject: str, reader_version: int) -> None:
        import fastavro

        super().__init__(s)
        self.subject = subject
        self.reader = fastavro.parse_schema(reader)
        self.reader_id = reader_id
        self.reader_version = reader_version

    @classmethod
    def of(cls, s: SchemaRegistrySettings, out: OutputSchema) -> ConfluentAvroDecoder:
        """A decoder into the planned output schema `out` (a value's record, or a key's schema of any type)."""
        return cls(s, out.schema, out.schema_id, out.subject, out.version)

    def _fetch(self, schema_id: int) -> Any:
        if schema_id == self.reader_id:
            return self.reader
        found = super()._fetch(schema_id)
        if isinstance(found, Unusable):
            return found
        lost = dropped_fields(found, self.reader) if _is_record(found) and _is_record(self.reader) else []
        if not lost:
            return found
        version = self._version_of(schema_id)
        if version is not None and version <= self.reader_version:
            return found  # an older version: the subject's evolution removed those fields
        what = f"version {version} of subject {self.subject!r}" if version is not None else f"no version of subject {self.subject!r}"
        return LossyRead(f"schema id {schema_id} ({what}) has field(s) {', '.join(lost)} that the output schema (version "
                         f"{self.reader_version}, schema id {self.reader_id}) lacks: read into it they would be lost, so "
                         "nothing of this range is published. Register the writer's schema as the subject's newest "
                         "version (the next run reads into it), or correct the producer")

    def _version_of(self, schema_id: int) -> int | None:
        """The subject's version of schema `schema_id`; None when it is none of them (or one deleted)."""
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        schema = ask(self.settings, f"schema id {schema_id}", lambda: self.client.get_schema(schema_id))
        try:
            found = ask(self.settings, f"schema id {schema_id} under subject {self.subject!r}",
                        lambda: self.client.lookup_schema(self.subject, schema))
        except SchemaRegistryError as exc:
            if exc.http_status_code == 404:
                return None
            raise RetriableTaskError(f"{self.settings.endpoint} answered {exc} for schema id {schema_id} under "
                                     f"subject {self.subject!r}") from None
        return int(found.version)

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
        if type(writer) is LossyRead:
            raise LossyRead(str(writer))
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
