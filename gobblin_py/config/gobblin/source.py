"""The `source:` section of a translated Gobblin job: Kafka (topics, offsets, deserializers, registry) or files.

A section translate.py writes; it reads what the converters decided (how text is parsed, where the schema is)."""

from __future__ import annotations

import re

from gobblin_py.config.gobblin.draft import Draft
from gobblin_py.config.gobblin.mapping import Parse, Role, canonical_class
from gobblin_py.config.gobblin.schema import avro_schema

_DESERIALIZERS = {"GSON": "json", "STRING": "string", "BYTE_ARRAY": "bytes", "CONFLUENT_AVRO": "confluent_avro",
                  "CONFLUENT_JSON": "confluent_json", "CONFLUENT_PROTOBUF": "confluent_protobuf"}
_REGISTRY_URLS = ("kafka.schema.registry.url", "schema.registry.url")  # Gobblin's registry key; the one Confluent's deserializer reads


def source_section(d: Draft) -> None:
    """`source.class` and the settings of the source it maps to."""
    found = d.gobblin_class("source.class", Role.SOURCE)
    if found is None:
        if "source.class" not in d.p.settings:
            d.out.problems.append("source.class: required: the Gobblin source class (for example "
                                  "org.apache.gobblin.source.extractor.extract.kafka.KafkaSimpleSource)")
        return
    raw, mapped = found
    d.set("source.class", mapped.becomes, "source.class")
    if mapped.becomes == "kafka":
        _kafka(d, raw)
    else:
        _files(d)


_PLAIN_TOPIC = re.compile(r"^[A-Za-z0-9_-]+$")
"""A whitelist entry no regex character in it: a topic's name (Gobblin matches each entry against a whole name)."""


def _kafka(d: Draft, raw: str) -> None:
    p = d.p
    d.copy("kafka.brokers", convert=lambda brokers: [b.strip() for b in brokers.split(",") if b.strip()])
    patterns = p.listed("topic.whitelist")
    for pattern in patterns + p.listed("topic.blacklist"):
        try:
            re.compile(pattern)
        except re.error as exc:
            p.problem("topic.whitelist" if pattern in patterns else "topic.blacklist", f"{pattern!r} is not a valid regular expression: {exc}")
    excluded = p.listed("topic.blacklist")
    if patterns and not excluded and all(_PLAIN_TOPIC.match(x) for x in patterns):  # names, not patterns: say them so
        d.set("source.topics", patterns, "topic.whitelist")
    else:
        d.set("source.topic_pattern", "|".join(f"(?:{x})" for x in patterns) if patterns else ".*", "topic.whitelist")
    if excluded:
        d.set("source.exclude_topics", excluded, "topic.blacklist")
    for key, path, allowed in (("bootstrap.with.offset", "source.bootstrap_with_offset", ("earliest", "latest")),
                               ("reset.on.offset.out.of.range", "source.reset_on_offset_out_of_range", ("earliest", "latest"))):
        value = p.get(key)
        if value is None:
            continue
        if value.lower() not in allowed:
            p.problem(key, f"{value!r} is not supported: {' or '.join(allowed)}")
        else:
            d.set(path, value.lower(), key)
    mappers = p.integer("mr.job.max.mappers")
    if mappers is not None:
        d.set("source.max_workunits", mappers, "mr.job.max.mappers")
    if canonical_class(raw).endswith("KafkaDeserializerSource"):
        kind = p.get("kafka.deserializer.type")
        deserializer = _DESERIALIZERS.get((kind or "").upper())
        if deserializer is None:
            p.problem("kafka.deserializer.type" if kind else "source.class",
                      f"KafkaDeserializerSource needs kafka.deserializer.type GSON, STRING, BYTE_ARRAY, CONFLUENT_AVRO, "
                      f"CONFLUENT_JSON or CONFLUENT_PROTOBUF; got {kind!r}")
            return
        d.set("source.deserializer", deserializer, "kafka.deserializer.type")
        if deserializer.startswith("confluent_"):
            _schema_registry(d)
    else:
        d.set("source.deserializer", "json" if d.parse is Parse.JSON else "bytes", "converter.classes")
    if d.parse is Parse.CSV:
        d.p.problem("converter.classes", "a CSV converter over a Kafka source is not supported")


def _schema_registry(d: Draft) -> None:
    """CONFLUENT_AVRO, CONFLUENT_JSON and CONFLUENT_PROTOBUF: the registry's url (`kafka.schema.registry.url`, else `schema.registry.url`); values are read
    into their subject's latest schema (`<topic>-value`), as Confluent's deserializer with Gobblin's
    ConfluentKafkaSchemaRegistry resolves them."""
    key = next((k for k in _REGISTRY_URLS if d.p.get(k)), None)
    if key is None:
        d.p.problem("kafka.schema.registry.url", "CONFLUENT_AVRO, CONFLUENT_JSON and CONFLUENT_PROTOBUF need the schema registry's url "
                                                    "(kafka.schema.registry.url=http://host:8081)")
        return
    d.set("source.schema_registry.url", d.p.get(key), key)
    registry = d.p.get("kafka.schema.registry.class")
    if registry and not registry.endswith(".ConfluentKafkaSchemaRegistry"):
        d.p.problem("kafka.schema.registry.class", f"{registry}: only ConfluentKafkaSchemaRegistry is supported "
                                                      "(Confluent values carry a Confluent schema id)")


def _files(d: Draft) -> None:
    from gobblin_py.builtin.sources.files.settings import COMPRESSION_SUFFIXES

    p = d.p
    d.copy("source.filebased.data.directory", required="the directory of input files",
           convert=lambda path: d.on_fs(path, "source.filebased.fs.uri"))
    d.copy("extract.table.name")
    if d.parse is None or d.parse is Parse.NOTHING:
        p.problem("source.class", "TextFileBasedSource reads lines of text: name CsvToJsonConverterV2 or "
                                  "JsonStringToJsonIntermediateConverter first in converter.classes")
        return
    extensions = (".csv",) if d.parse is Parse.CSV else (".json", ".jsonl", ".ndjson")
    d.set("source.include", [f"*{e}{c}" for e in extensions for c in COMPRESSION_SUFFIXES], "converter.classes")
    if d.parse is Parse.CSV:
        d.copy("converter.csv.to.json.delimiter")
        if not p.boolean("source.skip.first.record"):
            _csv_columns(d)


def _csv_columns(d: Draft) -> None:
    """Headerless CSV (source.skip.first.record unset or false): the columns are the schema's, in order, as
    Gobblin's CsvToJsonConverter names them."""
    p = d.p
    text = p.get(d.schema_key)
    skip = "source.skip.first.record"
    if text is None:
        p.problem(skip if skip in p.settings else "converter.classes",
                  f"CSV files with no header row (source.skip.first.record unset or false) take their column names "
                  f"from {d.schema_key}, which is not set: set it (a JSON-intermediate list of columns or an Avro "
                  f"record schema), or set source.skip.first.record=true for files whose first row names the columns")
        return
    schema, problems = avro_schema(text, "columns", None)
    if problems:
        return  # reported where the schema is read for JsonIntermediateToAvroConverter
    columns = [f["name"] for f in schema.get("fields", [])]
    d.set("source.csv_columns", columns, d.schema_key)
    d.out.notes.append(f"{skip} is not true: every row of the CSV files is a record, its columns named by "
                       f"{d.schema_key} in order ({', '.join(columns)})")
