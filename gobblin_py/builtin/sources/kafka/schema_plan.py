"""The output schemas a plan reads each topic into, from the schema registry (the value's, and the key's), checked
against the metadata columns once in the driver so every task of the run writes the same schema."""

from __future__ import annotations

import logging
from typing import Any

from gobblin_py.api import SourceState
from gobblin_py.builtin.sources.kafka.metadata import clashes, with_metadata
from gobblin_py.builtin.sources.kafka.registry import (
    KEY,
    VALUE,
    OutputSchema,
    SchemaPart,
    evolved,
    latest_schema,
    registry_client,
)
from gobblin_py.builtin.sources.kafka.settings import KafkaSettings
from gobblin_py.errors import ConfigError, SourceError, describe

log = logging.getLogger(__name__)


def output_schemas(s: KafkaSettings, topics: list[str], state: SourceState) -> dict[str, dict[SchemaPart, OutputSchema]]:
    """Each topic's output schemas from the registry: the value's under `confluent_avro`, the key's under
    `metadata_key: confluent_avro`, each its subject's latest version now (the same for every task of the run), or
    under `schema_evolution: evolve` the merge of its versions where an earlier one does not read into the latest
    losslessly; an output schema other than the last commit's is named in the run's summary. Metadata fields must clash with no value
    field (of `avro_schema` too)."""
    from_file = None
    if s.deserializer == "avro" and s.metadata_columns:
        from gobblin_py.builtin.schemas.avro_files import load_avro_schema

        from_file = load_avro_schema(s.avro_schema)
        check_clashes(s, from_file, f"avro_schema {s.avro_schema}")
    parts = [(part, subject_of) for part, subject_of, wanted in (
        (VALUE, s.subject_of, s.deserializer in ("confluent_avro", "confluent_protobuf")),
        (KEY, s.key_subject_of, s.avro_keys)) if wanted]
    if not parts or not topics:
        return {}
    assert s.schema_registry is not None
    client = registry_client(s.schema_registry)
    found: dict[str, dict[SchemaPart, OutputSchema]] = {}
    for topic in topics:
        planned = found[topic] = {part: latest(s, client, subject_of(topic), topic, part) for part, subject_of in parts}
        if s.schema_evolution == "evolve":
            planned = found[topic] = {part: evolved(s.schema_registry, client, out, topic, part)
                                      for part, out in planned.items()}
        value = planned[VALUE].schema if VALUE in planned else from_file
        if VALUE in planned:
            check_clashes(s, value, planned[VALUE].describe())
        if KEY in planned and value is not None:
            check_key_names(s, value, planned[KEY])
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



def latest(s: KafkaSettings, client: Any, subject: str, topic: str, part: SchemaPart) -> OutputSchema:
    """The subject's latest version as the output schema: Avro's own, or derived from a Protobuf message."""
    assert s.schema_registry is not None
    if part is VALUE and s.deserializer == "confluent_protobuf":
        from gobblin_py.builtin.sources.kafka.protobuf import latest_protobuf_schema

        return latest_protobuf_schema(s.schema_registry, client, subject, topic, s.protobuf_message)
    return latest_schema(s.schema_registry, client, subject, topic, part)


def check_clashes(s: KafkaSettings, schema: dict[str, Any], where: str) -> None:
    """Metadata columns named like a field the value schema already has are refused (ConfigError)."""
    taken = clashes(s, schema)
    if taken:
        raise ConfigError(f"source.metadata_columns: {where} already has field(s) {', '.join(taken)}; drop them from "
                          "metadata_columns")


def check_key_names(s: KafkaSettings, value: dict[str, Any], key: OutputSchema) -> None:
    """The key's schema inside the value's record: a named type both define makes the output schema invalid."""
    import fastavro

    try:
        fastavro.parse_schema(with_metadata(s, value, key.schema))
    except Exception as exc:  # noqa: BLE001 - any schema fastavro refuses is one no writer can write
        raise SourceError(f"the key schema ({key.describe()}) cannot be a field of the value's record: "
                          f"{describe(exc)}. Give the key's and the value's named types different names or "
                          "namespaces") from None
