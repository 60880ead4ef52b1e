"""The one table of what an Apache Gobblin job file means in gobblin-py: Gobblin classes and keys → the job model.

Every class a Gobblin job may name is here with what it becomes and, where gobblin-py's behaviour differs, how;
a class not here (or here with `becomes=None`) is refused at validation. Keys are here as mapped (with their
gobblin-py key path), known but not applied (with the reason, a warning), or refused (an error). Anything else a
job file sets is an unused key: a warning, an error with `--strict`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Role(str, enum.Enum):
    """Where in a job a Gobblin class sits."""

    SOURCE = "source"
    CONVERTER = "converter"
    WRITER = "writer"
    PUBLISHER = "publisher"
    FORK = "fork operator"
    ROW_POLICY = "row policy"
    TASK_POLICY = "task policy"
    PARTITIONER = "writer partitioner"


class Parse(str, enum.Enum):
    """What a converter that only parses text does; gobblin-py's source parses instead (no converter)."""

    CSV = "csv"
    JSON = "json"
    NOTHING = "nothing"


@dataclass(frozen=True)
class GobblinClass:
    """A Gobblin class, what it becomes (`None`: refused) and how its behaviour differs (empty: it does not)."""

    name: str
    role: Role
    becomes: str | None
    note: str = ""
    parses: Parse | None = None  # a converter absorbed into the source's parsing
    injects_schema: bool = False  # StringSchemaInjector: the converters after it see INJECTED_SCHEMA's schema


INJECTED_SCHEMA = "gobblin.converter.schemaInjector.schema"
"""The key whose schema StringSchemaInjector hands the converters after it, in place of source.schema."""


_G = "org.apache.gobblin."
_KAFKA = _G + "source.extractor.extract.kafka."

CLASSES: dict[str, GobblinClass] = {c.name: c for c in (
    # sources
    GobblinClass(_KAFKA + "KafkaSimpleSource", Role.SOURCE, "kafka",
                 "each topic is a dataset, each partition's next offset its watermark; records are the message bytes "
                 "until a converter parses them (BytesToJsonConverter: deserializer json); a message with no value "
                 "(a tombstone) is a bad record, in the error file"),
    GobblinClass(_KAFKA + "KafkaDeserializerSource", Role.SOURCE, "kafka",
                 "kafka.deserializer.type GSON → deserializer json, STRING → string, BYTE_ARRAY → bytes, "
                 "CONFLUENT_AVRO → confluent_avro, CONFLUENT_JSON → confluent_json, CONFLUENT_PROTOBUF → "
                 "confluent_protobuf (with kafka.schema.registry.url)"),
    GobblinClass(_G + "source.extractor.filebased.TextFileBasedSource", Role.SOURCE, "files",
                 "the files directly in source.filebased.data.directory are the dataset extract.table.name; a file "
                 "is read once, its watermark the bytes ingested, and one that changes afterwards is reported, not "
                 "skipped; the format comes from the file's extension (.csv, .json/.jsonl, optionally compressed), "
                 "so CSV files must end in .csv; sub-directories are datasets of their own"),
    GobblinClass(_G + "source.extractor.hadoop.AvroFileSource", Role.SOURCE, None,
                 "the files source reads JSON-lines and CSV files, not Avro files"),
    GobblinClass(_G + "example.simplejson.SimpleJsonSource", Role.SOURCE, None,
                 "it reads the files listed in source.filebased.files.to.pull; use TextFileBasedSource over a "
                 "directory of .json files with JsonStringToJsonIntermediateConverter"),
    # converters
    GobblinClass(_G + "converter.csv.CsvToJsonConverterV2", Role.CONVERTER, None,
                 "the files source parses CSV itself (\"-quoted fields as RFC 4180 reads them); with "
                 "source.skip.first.record=true the header row names the columns (Gobblin names them by the schema's "
                 "order): it must hold the schema's column names; unset or false, every row is a record and the "
                 "schema (source.schema, or StringSchemaInjector's) names its columns in order, as in Gobblin; a row "
                 "with more or fewer fields than columns goes to the error file (Gobblin drops or nulls them), and "
                 "the text null stays text (an empty field of a nullable column is null)", parses=Parse.CSV),
    GobblinClass(_G + "converter.csv.CsvToJsonConverter", Role.CONVERTER, None,
                 "as CsvToJsonConverterV2", parses=Parse.CSV),
    GobblinClass(_G + "converter.json.JsonStringToJsonIntermediateConverter", Role.CONVERTER, None,
                 "the source parses JSON itself (files: .json/.jsonl, Kafka: deserializer json)", parses=Parse.JSON),
    GobblinClass(_G + "converter.json.BytesToJsonConverter", Role.CONVERTER, None,
                 "the Kafka source parses JSON itself (deserializer json)", parses=Parse.JSON),
    GobblinClass(_G + "converter.IdentityConverter", Role.CONVERTER, None, "", parses=Parse.NOTHING),
    GobblinClass(_G + "converter.StringSchemaInjector", Role.CONVERTER, None,
                 "its schema, gobblin.converter.schemaInjector.schema, is the one the converters after it use in place "
                 "of source.schema: the CSV columns' names and JsonIntermediateToAvroConverter's schema",
                 parses=Parse.NOTHING, injects_schema=True),
    GobblinClass(_G + "converter.avro.JsonIntermediateToAvroConverter", Role.CONVERTER, "json_to_avro",
                 "the schema is source.schema (JSON-intermediate or Avro), written to an .avsc; date and timestamp "
                 "columns are longs with logicalType timestamp-millis and take ISO-8601 text or epoch millis "
                 "(converter.avro.*.format patterns are refused); "
                 "input fields the schema lacks are dropped and counted"),
    GobblinClass(_G + "converter.filter.AvroFieldsPickConverter", Role.CONVERTER, "select_fields",
                 "converter.avro.fields, top-level fields only"),
    # writers
    GobblinClass(_G + "writer.AvroDataWriterBuilder", Role.WRITER, "avro",
                 "files are named `<readable prefix>-<128-bit hash of their input>.avro`, not `part.task_….avro`"),
    GobblinClass(_G + "writer.SimpleDataWriterBuilder", Role.WRITER, "bytes",
                 "writes each record's bytes as they are, as Gobblin's does; records must be what the Kafka source "
                 "reads with no converter (KafkaSimpleSource, or KafkaDeserializerSource BYTE_ARRAY, or STRING: "
                 "written as UTF-8 where Gobblin's takes only bytes), so a job with converters is refused; "
                 "simple.writer.delimiter must start with an ASCII character (Gobblin writes the first byte of any "
                 "value); the extension follows writer.output.format as in Gobblin; files are named `<readable "
                 "prefix>-<128-bit hash of their input>.<extension>`, not `part.task_…`; writer.codec.type "
                 "(compression) is refused"),
    GobblinClass(_G + "writer.ParquetDataWriterBuilder", Role.WRITER, "parquet",
                 "needs the tables extra; the Avro schema is mapped to Arrow types"),
    # publishers
    GobblinClass(_G + "publisher.BaseDataPublisher", Role.PUBLISHER, "fs",
                 "publishes exactly once through a commit log, never replacing a file it did not write"),
    GobblinClass(_G + "publisher.TimePartitionedDataPublisher", Role.PUBLISHER, "fs",
                 "as BaseDataPublisher: the writer's partition directories are kept"),
    GobblinClass(_G + "publisher.BaseDataPublisherWithHiveRegistration", Role.PUBLISHER, None,
                 "Hive registration is not supported"),
    GobblinClass(_G + "publisher.HiveRegistrationPublisher", Role.PUBLISHER, None, "Hive registration is not supported"),
    # fork
    GobblinClass(_G + "fork.IdentityForkOperator", Role.FORK, "identity"),
    # quality
    GobblinClass(_G + "policies.count.RowCountPolicy", Role.TASK_POLICY, "row_count",
                 "compares the records that reached the writer with those written (records a converter filtered "
                 "out do not fail it)"),
    GobblinClass(_G + "policies.count.RowCountRangePolicy", Role.TASK_POLICY, "row_count_range",
                 "qualitychecker.row.count.range → range"),
    GobblinClass(_G + "policies.schema.SchemaRowCheckPolicy", Role.ROW_POLICY, "schema_check"),
    GobblinClass(_G + "policies.schema.SchemaCompatibilityPolicy", Role.TASK_POLICY, None,
                 "there is no previous schema to compare against"),
    # writer partitioning
    GobblinClass(_G + "writer.partitioner.TimeBasedAvroWriterPartitioner", Role.PARTITIONER, "partition",
                 "one column (writer.partition.columns), epoch millis, in UTC: writer.partition.timezone must be UTC "
                 "(Gobblin's default is America/Los_Angeles); prefix and suffix are refused"),
)}


def canonical_class(name: str) -> str:
    """`gobblin.x.Y` (Gobblin before Apache) and `org.apache.gobblin.x.Y` name the same class."""
    name = name.strip()
    return "org.apache." + name if name.startswith("gobblin.") else name


@dataclass(frozen=True)
class KeyRule:
    """A Gobblin key: the gobblin-py key it sets (`target`), or why it is not applied (`ignored`) or refused."""

    key: str
    target: str = ""
    note: str = ""
    ignored: str = ""   # known, no effect in gobblin-py: a warning with this reason
    refused: str = ""   # a setting gobblin-py cannot honour: an error with this reason


KEYS: tuple[KeyRule, ...] = (
    KeyRule("job.name", "job.name", "unset: the job file's name (csvToAvro.conf → csvToAvro), with a warning"),
    KeyRule("job.description", "job.description"),
    KeyRule("job.schedule", "job.schedule", "Quartz cron, as Gobblin's"),
    KeyRule("job.lock.enabled", "job.lock", "false is kept on, with a warning: without the lock two overlapping runs would "
            "publish the same records twice"),
    KeyRule("job.commit.policy", "job.commit_policy", "full (COMMIT_ON_FULL_SUCCESS) or successful "
            "(COMMIT_SUCCESSFUL_TASKS); partial is refused"),
    KeyRule("task.maxretries", "job.max_task_retries", "retries inside the run"),
    KeyRule("mr.job.root.dir", "job.work_dir", "gobblin-py keeps staging, task output, state, commit log and lock under it"),
    KeyRule("writer.output.dir", "job.task_output_dir", "finished task output until the commit (per branch: not applied)"),
    KeyRule("data.publisher.final.dir", "publisher.final_dir", "per branch with .N; with writer.file.path.type "
            "namespace_table or the default, extract.namespace (dots as /) is appended"),
    KeyRule("writer.file.path.type", "", "tablename: `<final dir>/<table>/…`; namespace_table and the default: "
            "`<final dir>/<namespace as dirs>/<table>/…` (Gobblin's default adds a directory per extract: not kept, a warning says so)"),
    KeyRule("fs.uri", "", "prefixes the paths of source, writer and publisher when not file:///"),
    KeyRule("writer.fs.uri", "", "prefixes writer.output.dir"),
    KeyRule("data.publisher.fs.uri", "", "prefixes data.publisher.final.dir"),
    KeyRule("source.filebased.fs.uri", "", "prefixes source.filebased.data.directory"),
    KeyRule("source.filebased.data.directory", "source.path"),
    KeyRule("extract.table.name", "source.root_dataset", "the files source's dataset name"),
    KeyRule("extract.namespace", "", "a directory level of the output with namespace_table"),
    KeyRule("source.skip.first.record", "source.csv_columns", "true: the CSV files' first row is a header naming "
            "the columns; unset or false: every row is a record, its columns named by the schema (source.schema or "
            "gobblin.converter.schemaInjector.schema) in order"),
    KeyRule("converter.csv.to.json.delimiter", "source.csv_delimiter"),
    KeyRule("source.schema", "converters[].schema", "JSON-intermediate ([{columnName, dataType, isNullable}]) or an "
            "Avro record schema, written to an .avsc file"),
    KeyRule(INJECTED_SCHEMA, "converters[].schema", "StringSchemaInjector's schema, in place of source.schema: "
            "JSON-intermediate or Avro, written to an .avsc file; names the columns of headerless CSV"),
    KeyRule("converter.classes", "converters", "per branch with .N"),
    KeyRule("converter.avro.fields", "select_fields.fields"),
    KeyRule("kafka.brokers", "source.bootstrap_servers"),
    KeyRule("topic.whitelist", "source.topics", "plain topic names become `topics: [..]`; regexes (each matching a whole "
            "topic name) `topic_pattern`, as does a whitelist with a topic.blacklist; unset: every topic"),
    KeyRule("topic.blacklist", "source.exclude_topics"),
    KeyRule("bootstrap.with.offset", "source.bootstrap_with_offset", "earliest or latest"),
    KeyRule("reset.on.offset.out.of.range", "source.reset_on_offset_out_of_range", "earliest or latest (nearest is "
            "refused; unset, gobblin-py restarts an out-of-range partition from its earliest offset with a warning)"),
    KeyRule("kafka.deserializer.type", "source.deserializer"),
    KeyRule("kafka.schema.registry.url", "source.schema_registry.url", "CONFLUENT_AVRO/JSON/PROTOBUF: the registry's url (or "
            "schema.registry.url, which Confluent's deserializer reads); a login goes in basic_auth_user and password_env"),
    KeyRule("schema.registry.url", "source.schema_registry.url", "as kafka.schema.registry.url"),
    KeyRule("kafka.schema.registry.class", "", "ConfluentKafkaSchemaRegistry (or unset): the Confluent-compatible registry "
            "the url names; another registry class (its own wire format) is refused"),
    KeyRule("mr.job.max.mappers", "source.max_workunits", "Kafka: partitions are packed into at most this many tasks"),
    KeyRule("writer.builder.class", "writer.class", "per branch with .N"),
    KeyRule("writer.output.format", "", "AVRO (or PARQUET) as the writer writes; with SimpleDataWriterBuilder the "
            "files' extension (writer.extension), as in Gobblin: TXT, CSV, JSON … lower-cased, another value as "
            "written, unset: none"),
    KeyRule("writer.codec.type", "writer.codec", "deflate, snappy, zstandard, null/nocompression (refused with "
            "SimpleDataWriterBuilder)"),
    KeyRule("simple.writer.delimiter", "writer.delimiter", "SimpleDataWriterBuilder: its first character, which must be "
            "ASCII, after each record, as Gobblin writes its first byte (escapes such as \\n as Java reads them); "
            "unset or empty: none"),
    KeyRule("simple.writer.prepend.size", "writer.prepend_size", "SimpleDataWriterBuilder: an 8-byte big-endian size "
            "of the record and its delimiter before each record; default false"),
    KeyRule("writer.deflate.level", "writer.codec_level"),
    KeyRule("writer.partitioner.class", "writer.partition"),
    KeyRule("writer.partition.columns", "writer.partition.column", "one column"),
    KeyRule("writer.partition.granularity", "writer.partition.granularity", "default HOUR, as Gobblin's"),
    KeyRule("writer.partition.pattern", "writer.partition.pattern", "default from the granularity (HOUR: yyyy/MM/dd/HH)"),
    KeyRule("writer.partition.timezone", "", "must be UTC"),
    KeyRule("writer.partition.prefix", refused="partition prefixes are not supported"),
    KeyRule("writer.partition.suffix", refused="partition suffixes are not supported"),
    KeyRule("data.publisher.type", "publisher.class"),
    KeyRule("data.publisher.replace.final.dir", "", "false only: gobblin-py never replaces what it did not write"),
    KeyRule("fork.branches", "fork.branches", "N branches named fork.branch.name.N or fork_N"),
    KeyRule("fork.operator.class", "fork.class"),
    KeyRule("fork.branch.name", "fork.branches[].name"),
    KeyRule("qualitychecker.task.policies", "quality.task", "per branch with .N"),
    KeyRule("qualitychecker.task.policy.types", "quality.task[].type", "FAIL or OPTIONAL"),
    KeyRule("qualitychecker.row.policies", "quality.row", "per branch with .N"),
    KeyRule("qualitychecker.row.policy.types", "quality.row[].type", "FAIL, OPTIONAL or ERR_FILE"),
    KeyRule("qualitychecker.row.count.range", "quality.task[].range"),
    KeyRule("job.template", "", "a template file (properties, or HOCON if .conf) under the job's keys"),
    KeyRule("gobblin.template.required_attributes", "", "keys the job file must set"),
    KeyRule("gobblin-py.<section>.<key>", "<section>.<key>", "sets any gobblin-py setting directly, e.g. "
            "gobblin-py.spark.master=local[2]"),
    KeyRule("job.group", ignored="gobblin-py names a job by job.name alone"),
    KeyRule("launcher.type", ignored="gobblin-py runs on Spark: give the master with --master or gobblin-py.spark.master"),
    KeyRule("state.store.dir", ignored="state is kept under job.work_dir (from mr.job.root.dir)"),
    KeyRule("state.store.fs.uri", ignored="state is kept under job.work_dir (from mr.job.root.dir)"),
    KeyRule("writer.staging.dir", ignored="staging is under job.work_dir (from mr.job.root.dir)"),
    KeyRule("task.data.root.dir", ignored="staging and task output are under job.work_dir (from mr.job.root.dir)"),
    KeyRule("writer.destination.type", ignored="the destination is what the final directory's URL names"),
    KeyRule("extract.table.type", ignored="every run appends the new records"),
    KeyRule("qualitychecker.row.err.file", ignored="bad records go to `<final dir>/<dataset>/_errors/`"),
    KeyRule("kafka.workunit.packer.type", ignored="partitions are always packed worst-fit by last run's size"),
    KeyRule("metrics.", ignored="metrics are written with --metrics-json / --metrics-prom"),
    KeyRule("source.filebased.files.to.pull", refused="the files source reads directories (source.filebased.data.directory)"),
)

RULES: dict[str, KeyRule] = {r.key: r for r in KEYS}

SUFFIXED = ("writer.", "data.publisher.", "converter.classes", "qualitychecker.", "fork.branch.name")
"""Keys that take a branch suffix `.N` in a job with fork.branches ≥ 2."""


def rule_for(key: str) -> KeyRule | None:
    """The rule of a key as written (`writer.output.dir.1` → `writer.output.dir`; `metrics.x` → `metrics.`)."""
    if key in RULES:
        return RULES[key]
    base, dot, last = key.rpartition(".")
    if dot and last.isdigit() and base in RULES:
        return RULES[base]
    return next((r for k, r in RULES.items() if k.endswith(".") and key.startswith(k)), None)


def markdown_tables() -> str:
    """The README's tables of classes and keys, made from this module."""
    lines = ["| Gobblin class | gobblin-py | how it differs |", "|---|---|---|"]
    for c in CLASSES.values():
        becomes = (f"`{c.becomes}`" if c.becomes else "parsed by the source" if c.parses not in (None, Parse.NOTHING)
                   else "nothing (dropped)" if c.parses else "**refused**")
        lines.append(f"| `{c.name.removeprefix(_G)}` ({c.role.value}) | {becomes} | {c.note} |")
    lines += ["", "| Gobblin key | gobblin-py | notes |", "|---|---|---|"]
    for r in KEYS:
        where = f"`{r.target}`" if r.target else ("not applied" if r.ignored else "**refused**" if r.refused else "(see notes)")
        lines.append(f"| `{r.key}` | {where} | {r.note or r.ignored or r.refused} |")
    return "\n".join(lines)
