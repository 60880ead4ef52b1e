"""Resolved Gobblin settings → the job document the YAML loader validates (the same sections, the same keys).

Each gobblin-py key remembers the Gobblin key it came from, so a validation problem names what the user wrote.
The mapping itself is `mapping.py`; this module applies it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gobblin_py.config.gobblin.mapping import (CLASSES, INJECTED_SCHEMA, RULES, SUFFIXED, Parse, Role, canonical_class,
                                              rule_for)
from gobblin_py.config.gobblin.resolve import REQUIRED_KEY, TEMPLATE_KEY, Resolved
from gobblin_py.config.gobblin.compaction import compaction_problems, is_compaction_job
from gobblin_py.config.gobblin.schema import avro_schema
from gobblin_py.config.model import MAX_NAME

PASSTHROUGH = "gobblin-py."
_DEFAULT_WRITER = "org.apache.gobblin.writer.AvroDataWriterBuilder"
_DEFAULT_PUBLISHER = "org.apache.gobblin.publisher.BaseDataPublisher"
_GRANULARITY_PATTERNS = {"MINUTE": "yyyy/MM/dd/HH/mm", "HOUR": "yyyy/MM/dd/HH", "DAY": "yyyy/MM/dd", "MONTH": "yyyy/MM", "YEAR": "yyyy"}
_CODECS = {"deflate": "deflate", "snappy": "snappy", "null": "null", "nocompression": "null", "none": "null",
           "zstandard": "zstandard", "zstd": "zstandard"}
_PARQUET_CODECS = {"snappy": "snappy", "gzip": "gzip", "zstd": "zstd", "uncompressed": "none", "none": "none"}
_DESERIALIZERS = {"GSON": "json", "STRING": "string", "BYTE_ARRAY": "bytes", "CONFLUENT_AVRO": "confluent_avro",
                  "CONFLUENT_JSON": "confluent_json", "CONFLUENT_PROTOBUF": "confluent_protobuf"}
_REGISTRY_URLS = ("kafka.schema.registry.url", "schema.registry.url")  # Gobblin's registry key; the one Confluent's deserializer reads
_OUTPUT_FORMATS = {"AVRO", "PARQUET", "PROTOBUF", "JSON", "ORC", "CSV", "TXT"}  # Gobblin's WriterOutputFormat
_UTC = {"UTC", "GMT", "ETC/UTC", "Z"}


MAX_BRANCHES = 64
"""More fork branches than this is a typo, not a job: each branch is a writer and a publisher per task."""


@dataclass
class Translation:
    """The job document, where each of its keys came from, and what the user should hear about."""

    document: dict[str, Any]
    origins: dict[str, str]                 # gobblin-py key path → "gobblin.key (file:line)"
    warnings: list[str] = field(default_factory=list)
    unused: list[str] = field(default_factory=list)   # warnings, errors under --strict
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)    # how a mapped class behaves differently, once per class
    schemas: list[tuple[dict[str, Any], dict[str, Any], str]] = field(default_factory=list)  # (converter, schema, name)


class _Props:
    """The resolved settings, read through one place that records which keys were used."""

    def __init__(self, resolved: Resolved, out: Translation) -> None:
        self.settings = resolved.settings
        self.used: set[str] = {TEMPLATE_KEY, REQUIRED_KEY}
        self.out = out

    def where(self, key: str) -> str:
        setting = self.settings.get(key)
        return f"{key} ({setting.origin})" if setting else key

    def get(self, key: str, strip: bool = True) -> str | None:
        setting = self.settings.get(key)
        if setting is None:
            return None
        self.used.add(key)
        if setting.problem:
            self.problem(key, setting.problem)
            return None
        return setting.value.strip() if strip else setting.value

    @staticmethod
    def branch_key(key: str, branch: int | None) -> str:
        """`key.N` for branch N of a forked job, `key` otherwise: Gobblin's ForkOperatorUtils reads no other."""
        return key if branch is None else f"{key}.{branch}"

    def problem(self, key: str, message: str) -> None:
        self.out.problems.append(f"{self.where(key)}: {message}")

    def warn(self, key: str, message: str) -> None:
        self.out.warnings.append(f"{self.where(key)}: {message}")

    def integer(self, key: str) -> int | None:
        value = self.get(key)
        if value is None:
            return None
        try:
            return int(value)
        except ValueError:
            self.problem(key, f"expected a whole number, got {value!r}")
            return None

    def boolean(self, key: str) -> bool | None:
        """Java's Boolean.parseBoolean: `true` in any case is true, anything else false."""
        value = self.get(key)
        return None if value is None else value.lower() == "true"

    def listed(self, key: str) -> list[str]:
        value = self.get(key)
        return [v.strip() for v in value.split(",") if v.strip()] if value else []


def translate(resolved: Resolved) -> Translation:
    """The gobblin-py job document for a resolved Gobblin job; problems, warnings and unused keys alongside."""
    out = Translation(document={}, origins={}, warnings=list(resolved.warnings), problems=list(resolved.problems))
    if is_compaction_job(resolved.settings):  # refused as what it is, not for the ingestion keys it lacks
        out.problems += compaction_problems(resolved.settings)
        return out
    props = _Props(resolved, out)
    translator = _Translator(props, out, resolved.file.stem if resolved.file else "")
    translator.run()
    _leftovers(props, out, translator.branches)
    return out


def job_name_of(stem: str) -> str:
    """A job name from a file name: what a job name may not hold becomes `-` (`my job.conf` → `my-job`)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "-", stem).lstrip("._-")[:MAX_NAME]
    return name or "job"


class _Translator:
    def __init__(self, props: _Props, out: Translation, file_stem: str = "") -> None:
        self.file_stem = file_stem
        self.p = props
        self.out = out
        self.doc = out.document
        self.parse: Parse | None = None
        self.branches = 1
        self.schema_key = "source.schema"  # where the schema the converters see is written (StringSchemaInjector: its key)

    def set(self, path: str, value: Any, key: str) -> None:
        """Set `a.b.c` in the document and remember the Gobblin key it came from."""
        node = self.doc
        *parents, last = path.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
        self.out.origins[path] = self.p.where(key)

    def copy(self, key: str, *, required: str = "", convert: Callable[[str], Any] = str) -> None:
        """Set the gobblin-py key the mapping table names for `key` from its value; a missing required key is a problem."""
        value = self.p.get(key)
        if value is not None:
            self.set(RULES[key].target, convert(value), key)
        elif required and key not in self.p.settings:
            self.out.problems.append(f"{key}: required: {required}")

    def gobblin_class(self, key: str, role: Role, default: str | None = None) -> tuple[str, Any] | None:
        """The mapping of the class a key names, or a problem naming the key; None when unset without default."""
        raw = self.p.get(key) or default
        if raw is None:
            return None
        name = canonical_class(raw)
        mapped = CLASSES.get(name)
        if mapped is None:
            self.p.problem(key, f"unsupported Gobblin {role.value} class {raw!r}: gobblin-py has no equivalent "
                                "(see `gobblin-py convert --help` for the classes it maps)")
            return None
        if mapped.role is not role:
            self.p.problem(key, f"{raw!r} is a Gobblin {mapped.role.value}, not a {role.value}")
            return None
        if mapped.becomes is None and mapped.parses is None:
            self.p.problem(key, f"unsupported Gobblin {role.value} class {raw!r}: {mapped.note}")
            return None
        self.note(mapped)
        return raw, mapped

    def note(self, mapped: Any) -> None:
        """Say once how a mapped class behaves differently from Gobblin's."""
        line = f"{mapped.name.rsplit('.', 1)[-1]} → {mapped.becomes or 'parsed by the source'}: {mapped.note}"
        if mapped.note and line not in self.out.notes:
            self.out.notes.append(line)

    def run(self) -> None:
        self.job()
        branches = self.p.integer("fork.branches") or 1
        if not 1 <= branches <= MAX_BRANCHES:
            self.p.problem("fork.branches", f"expected 1 to {MAX_BRANCHES}, got {branches}")
            branches = 1
        self.branches = branches
        converters = self.converters("converter.classes", pre_fork=True)
        self.source()
        if converters:
            self.set("converters", converters, "converter.classes")
        quality = self.quality(None, "quality") if branches == 1 else {}  # forked: each branch has its own
        if quality:
            self.doc["quality"] = quality
        if branches == 1:
            if "fork.operator.class" in self.p.settings:  # Gobblin runs it with one branch too: an unsupported one is named
                self.gobblin_class("fork.operator.class", Role.FORK)
            self.writer(None, "writer")
            self.publisher(None, "publisher")
        else:
            self.fork(branches)
        self.passthrough()

    # --- job ------------------------------------------------------------------------------------
    def job(self) -> None:
        p = self.p
        if "job.name" in p.settings or not self.file_stem:
            self.copy("job.name", required="the job's name (its state, lock and commits are kept under it)")
        else:
            name = job_name_of(self.file_stem)
            self.set("job.name", name, "job.name")
            self.out.origins["job.name"] = "job.name, not set: named after the file"
            self.out.warnings.append(f"job.name is not set: the job is named {name!r} after its file name (its state, "
                                     "lock and commits are kept under that name; set job.name to keep them when the "
                                     "file is renamed)")
        for key in ("job.description", "job.schedule", "mr.job.root.dir"):
            self.copy(key)
        self.copy("writer.output.dir", convert=lambda path: self.on_fs(path, "writer.fs.uri"))
        lock = p.boolean("job.lock.enabled")
        if lock is not None:  # off (as in Gobblin's Kafka quick start) would be refused under exactly-once: kept on
            if not lock:
                p.warn("job.lock.enabled", "false is translated to job.lock: true: gobblin-py delivers exactly once, and "
                                           "without the lock two overlapping runs would publish the same records twice "
                                           "(with it, a run started while another holds it exits 1 and publishes nothing)")
            self.set("job.lock", True, "job.lock.enabled")
        retries = p.integer("task.maxretries")
        if retries is not None:
            self.set("job.max_task_retries", retries, "task.maxretries")
        policy = p.get("job.commit.policy")
        if policy is not None:
            named = {"full": "full", "commit_on_full_success": "full", "successful": "successful",
                     "commit_successful_tasks": "successful"}.get(policy.lower())
            if named is None:
                p.problem("job.commit.policy", f"{policy!r} is not supported: full (COMMIT_ON_FULL_SUCCESS) or "
                                               "successful (COMMIT_SUCCESSFUL_TASKS); partial would publish failed tasks' data")
            else:
                self.set("job.commit_policy", named, "job.commit.policy")

    def on_fs(self, path: str, *uri_keys: str) -> str:
        """`path` on the filesystem the first set URI key (or fs.uri) names; local paths stay paths."""
        uris = [self.p.get(k) for k in (*uri_keys, "fs.uri")]  # each read, so none is reported unused
        uri = next((u for u in uris if u), None)
        if not uri or uri.startswith("file:") or "://" in path:
            return path
        return f"{uri.rstrip('/')}/{path.lstrip('/')}"

    # --- source ---------------------------------------------------------------------------------
    def source(self) -> None:
        found = self.gobblin_class("source.class", Role.SOURCE)
        if found is None:
            if "source.class" not in self.p.settings:
                self.out.problems.append("source.class: required: the Gobblin source class (for example "
                                         "org.apache.gobblin.source.extractor.extract.kafka.KafkaSimpleSource)")
            return
        raw, mapped = found
        self.set("source.class", mapped.becomes, "source.class")
        if mapped.becomes == "kafka":
            self.kafka(raw)
        else:
            self.files()

    def kafka(self, raw: str) -> None:
        p = self.p
        self.copy("kafka.brokers", convert=lambda brokers: [b.strip() for b in brokers.split(",") if b.strip()])
        patterns = p.listed("topic.whitelist")
        for pattern in patterns + p.listed("topic.blacklist"):
            try:
                re.compile(pattern)
            except re.error as exc:
                p.problem("topic.whitelist" if pattern in patterns else "topic.blacklist", f"{pattern!r} is not a valid regular expression: {exc}")
        self.set("source.topic_pattern", "|".join(f"(?:{x})" for x in patterns) if patterns else ".*", "topic.whitelist")
        excluded = p.listed("topic.blacklist")
        if excluded:
            self.set("source.exclude_topics", excluded, "topic.blacklist")
        for key, path, allowed in (("bootstrap.with.offset", "source.bootstrap_with_offset", ("earliest", "latest")),
                                   ("reset.on.offset.out.of.range", "source.reset_on_offset_out_of_range", ("earliest", "latest"))):
            value = p.get(key)
            if value is None:
                continue
            if value.lower() not in allowed:
                p.problem(key, f"{value!r} is not supported: {' or '.join(allowed)}")
            else:
                self.set(path, value.lower(), key)
        mappers = p.integer("mr.job.max.mappers")
        if mappers is not None:
            self.set("source.max_workunits", mappers, "mr.job.max.mappers")
        if canonical_class(raw).endswith("KafkaDeserializerSource"):
            kind = p.get("kafka.deserializer.type")
            deserializer = _DESERIALIZERS.get((kind or "").upper())
            if deserializer is None:
                p.problem("kafka.deserializer.type" if kind else "source.class",
                          f"KafkaDeserializerSource needs kafka.deserializer.type GSON, STRING, BYTE_ARRAY, CONFLUENT_AVRO, "
                          f"CONFLUENT_JSON or CONFLUENT_PROTOBUF; got {kind!r}")
                return
            self.set("source.deserializer", deserializer, "kafka.deserializer.type")
            if deserializer.startswith("confluent_"):
                self.schema_registry()
        else:
            self.set("source.deserializer", "json" if self.parse is Parse.JSON else "bytes", "converter.classes")
        if self.parse is Parse.CSV:
            self.p.problem("converter.classes", "a CSV converter over a Kafka source is not supported")

    def schema_registry(self) -> None:
        """CONFLUENT_AVRO, CONFLUENT_JSON and CONFLUENT_PROTOBUF: the registry's url (`kafka.schema.registry.url`, else `schema.registry.url`); values are read
        into their subject's latest schema (`<topic>-value`), as Confluent's deserializer with Gobblin's
        ConfluentKafkaSchemaRegistry resolves them."""
        key = next((k for k in _REGISTRY_URLS if self.p.get(k)), None)
        if key is None:
            self.p.problem("kafka.schema.registry.url", "CONFLUENT_AVRO, CONFLUENT_JSON and CONFLUENT_PROTOBUF need the schema registry's url "
                                                        "(kafka.schema.registry.url=http://host:8081)")
            return
        self.set("source.schema_registry.url", self.p.get(key), key)
        registry = self.p.get("kafka.schema.registry.class")
        if registry and not registry.endswith(".ConfluentKafkaSchemaRegistry"):
            self.p.problem("kafka.schema.registry.class", f"{registry}: only ConfluentKafkaSchemaRegistry is supported "
                                                          "(Confluent values carry a Confluent schema id)")

    def files(self) -> None:
        from gobblin_py.builtin.sources.files.settings import COMPRESSION_SUFFIXES

        p = self.p
        self.copy("source.filebased.data.directory", required="the directory of input files",
                  convert=lambda path: self.on_fs(path, "source.filebased.fs.uri"))
        self.copy("extract.table.name")
        if self.parse is None or self.parse is Parse.NOTHING:
            p.problem("source.class", "TextFileBasedSource reads lines of text: name CsvToJsonConverterV2 or "
                                      "JsonStringToJsonIntermediateConverter first in converter.classes")
            return
        extensions = (".csv",) if self.parse is Parse.CSV else (".json", ".jsonl", ".ndjson")
        self.set("source.include", [f"*{e}{c}" for e in extensions for c in COMPRESSION_SUFFIXES], "converter.classes")
        if self.parse is Parse.CSV:
            self.copy("converter.csv.to.json.delimiter")
            if not p.boolean("source.skip.first.record"):
                self.csv_columns()

    def csv_columns(self) -> None:
        """Headerless CSV (source.skip.first.record unset or false): the columns are the schema's, in order, as
        Gobblin's CsvToJsonConverter names them."""
        p = self.p
        text = p.get(self.schema_key)
        skip = "source.skip.first.record"
        if text is None:
            p.problem(skip if skip in p.settings else "converter.classes",
                      f"CSV files with no header row (source.skip.first.record unset or false) take their column names "
                      f"from {self.schema_key}, which is not set: set it (a JSON-intermediate list of columns or an Avro "
                      f"record schema), or set source.skip.first.record=true for files whose first row names the columns")
            return
        schema, problems = avro_schema(text, "columns", None)
        if problems:
            return  # reported where the schema is read for JsonIntermediateToAvroConverter
        columns = [f["name"] for f in schema.get("fields", [])]
        self.set("source.csv_columns", columns, self.schema_key)
        self.out.notes.append(f"{skip} is not true: every row of the CSV files is a record, its columns named by "
                              f"{self.schema_key} in order ({', '.join(columns)})")

    # --- converters and quality -----------------------------------------------------------------
    def converters(self, key: str, pre_fork: bool) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for position, raw in enumerate(self.p.listed(key)):
            mapped = CLASSES.get(canonical_class(raw))
            if mapped is None or mapped.role is not Role.CONVERTER or (mapped.becomes is None and mapped.parses is None):
                why = mapped.note if mapped is not None and mapped.role is Role.CONVERTER else "gobblin-py has no equivalent"
                self.p.problem(key, f"unsupported Gobblin converter class {raw!r}: {why}")
                continue
            self.note(mapped)
            if mapped.injects_schema:
                if any(c["class"] == "json_to_avro" for c in out):
                    self.p.problem(key, f"{raw!r} must come before JsonIntermediateToAvroConverter, which writes the "
                                        "schema it injects")
                self.schema_key = INJECTED_SCHEMA
                continue
            if mapped.parses is not None:
                if mapped.parses is Parse.NOTHING:
                    continue
                if not pre_fork or out:
                    self.p.problem(key, f"{raw!r} parses the source's text, so it must come first in converter.classes")
                self.parse = mapped.parses
                continue
            if mapped.becomes == "json_to_avro":
                out.append(self.json_to_avro(key))
            elif mapped.becomes == "select_fields":
                fields = self.p.listed("converter.avro.fields")
                if not fields or any("." in f for f in fields):
                    self.p.problem("converter.avro.fields" if fields else key,
                                   "AvroFieldsPickConverter needs converter.avro.fields: top-level field names")
                out.append({"class": "select_fields", "fields": fields})
        return out

    def json_to_avro(self, key: str) -> dict[str, Any]:
        converter: dict[str, Any] = {"class": "json_to_avro", "schema": None}
        for fmt in ("converter.avro.date.format", "converter.avro.timestamp.format", "converter.avro.time.format"):
            if self.p.get(fmt) is not None:
                self.p.problem(fmt, "date and time patterns are not supported: gobblin-py reads ISO-8601 text or epoch millis")
        text = self.p.get(self.schema_key)
        if text is None:
            self.p.problem(key, f"JsonIntermediateToAvroConverter needs {self.schema_key} (JSON-intermediate or an Avro "
                                "record schema)")
            return converter
        table = self.p.settings.get("extract.table.name")
        name = table.value if table else (self.p.settings["job.name"].value if "job.name" in self.p.settings else "record")
        namespace = self.p.settings.get("extract.namespace")
        schema, problems = avro_schema(text, name, namespace.value if namespace else None)
        for problem in problems:
            self.p.problem(self.schema_key, problem)
        if not problems:
            self.out.schemas.append((converter, schema, name))
        return converter

    def quality(self, branch: int | None, path: str) -> dict[str, Any]:
        """The `quality:` section of the job (branch None) or of fork branch N, from qualitychecker.* keys."""
        section: dict[str, Any] = {}
        for level, role in (("row", Role.ROW_POLICY), ("task", Role.TASK_POLICY)):
            key = self.p.branch_key(f"qualitychecker.{level}.policies", branch)
            types_key = self.p.branch_key(f"qualitychecker.{level}.policy.types", branch)
            classes, types = self.p.listed(key), self.p.listed(types_key)
            if not classes:
                continue
            if len(types) != len(classes):
                self.p.problem(types_key, f"names {len(types)} type(s) for the {len(classes)} policies of {key}")
                continue
            policies = []
            for raw, kind in zip(classes, types):
                mapped = CLASSES.get(canonical_class(raw))
                if mapped is None or mapped.role is not role or mapped.becomes is None:
                    why = mapped.note if mapped is not None and mapped.role is role else f"gobblin-py has no such {role.value}"
                    self.p.problem(key, f"unsupported Gobblin {role.value} class {raw!r}: {why}")
                    continue
                self.note(mapped)
                policy: dict[str, Any] = {"class": mapped.becomes, "type": kind.upper()}
                if mapped.becomes == "row_count_range":
                    spread = self.p.get("qualitychecker.row.count.range")
                    if spread is not None:
                        policy["range"] = spread
                policies.append(policy)
            if policies:
                section[level] = policies
                self.out.origins[f"{path}.{level}"] = self.p.where(key)
        return section

    # --- fork, writer, publisher ----------------------------------------------------------------
    def fork(self, count: int) -> None:
        found = self.gobblin_class("fork.operator.class", Role.FORK, "org.apache.gobblin.fork.IdentityForkOperator")
        branches: list[dict[str, Any]] = []
        self.out.notes.append(f"fork.branches={count}: each branch's files go to <its final dir>/<table>/<branch name>/…; "
                              "Gobblin leaves out the branch name when each branch has its own final dir")
        self.set("fork", {"class": found[1].becomes if found else "identity", "branches": branches}, "fork.branches")
        for i in range(count):
            name_key = f"fork.branch.name.{i}"
            branch: dict[str, Any] = {"name": self.p.get(name_key) or f"fork_{i}"}
            branches.append(branch)
            base = f"fork.branches[{i}]"
            self.out.origins[f"{base}.name"] = self.p.where(name_key)
            convs = self.converters(f"converter.classes.{i}", pre_fork=False)
            if convs:
                branch["converters"] = convs
                self.out.origins[f"{base}.converters"] = self.p.where(f"converter.classes.{i}")
            quality = self.quality(i, f"{base}.quality")
            if quality:
                branch["quality"] = quality
            branch["writer"] = self.writer_section(i, f"{base}.writer", converted=bool(convs))
            branch["publisher"] = self.publisher_section(i, f"{base}.publisher")

    def writer(self, branch: int | None, path: str) -> None:
        self.doc["writer"] = self.writer_section(branch, path, converted=False)

    def publisher(self, branch: int | None, path: str) -> None:
        self.doc["publisher"] = self.publisher_section(branch, path)

    def writer_section(self, branch: int | None, path: str, converted: bool) -> dict[str, Any]:
        """The writer of the job (branch None) or of fork branch N; `converted`: the branch has converters of its own."""
        p = self.p
        key = p.branch_key("writer.builder.class", branch)
        found = self.gobblin_class(key, Role.WRITER, _DEFAULT_WRITER)
        if found is None:
            self.partition(branch)  # checked all the same, so one validation names every unsupported class
            return {}
        alias = found[1].becomes
        writer: dict[str, Any] = {"class": alias}
        self.out.origins[f"{path}.class"] = p.where(key)
        fmt_key = p.branch_key("writer.output.format", branch)
        if alias == "bytes":
            self.bytes_writer(writer, path, key, fmt_key, converted or bool(self.doc.get("converters")))
        else:
            fmt = p.get(fmt_key)
            if fmt is not None and fmt.lower() != alias:
                p.problem(fmt_key, f"{fmt!r} is not what {found[0].rsplit('.', 1)[-1]} writes ({alias.upper()})")
        codec_key = p.branch_key("writer.codec.type", branch)
        codec = p.get(codec_key)
        if codec is not None and alias == "bytes":
            p.problem(codec_key, "SimpleDataWriterBuilder's files cannot be compressed in gobblin-py")
        elif codec is not None:
            codecs = _CODECS if alias == "avro" else _PARQUET_CODECS
            if codec.lower() not in codecs:
                p.problem(codec_key, f"codec {codec!r} is not supported (one of {', '.join(sorted(codecs))})")
            else:
                writer["codec" if alias == "avro" else "compression"] = codecs[codec.lower()]
        level = p.integer(p.branch_key("writer.deflate.level", branch))
        if level is not None and alias == "avro":
            writer["codec_level"] = level
        partition = self.partition(branch)
        if partition is not None:
            writer["partition"] = partition
            self.out.origins[f"{path}.partition"] = p.where(p.branch_key("writer.partitioner.class", branch))
        return writer

    def bytes_writer(self, writer: dict[str, Any], path: str, key: str, fmt_key: str, converted: bool) -> None:
        """SimpleDataWriterBuilder (named by `key`): the extension and framing of its files; its records must be the
        message bytes. `fmt_key`: the branch's writer.output.format; `converted`: converters change the records."""
        p = self.p
        source = self.doc.get("source", {})
        if source.get("class") and (source.get("class") != "kafka" or source.get("deserializer") not in ("bytes", "string")
                                    or converted):
            p.problem(key, "SimpleDataWriterBuilder writes each record's bytes as they are: it needs the messages of a Kafka "
                           "source with no converters (KafkaSimpleSource, or KafkaDeserializerSource with BYTE_ARRAY or "
                           "STRING)")
        # Gobblin's file extension: a WriterOutputFormat name lower-cased, any other value as written, unset none
        fmt = p.get(fmt_key)
        writer["extension"] = (fmt.lower() if fmt.upper() in _OUTPUT_FORMATS else fmt) if fmt else ""
        self.out.origins[f"{path}.extension"] = p.where(fmt_key)
        delimiter = p.get("simple.writer.delimiter", strip=False)  # "\t", " ": whitespace is a delimiter here
        if delimiter:
            if not delimiter[0].isascii():
                p.problem("simple.writer.delimiter", f"{delimiter!r}: give one ASCII character (Gobblin would write only "
                                                     "the first byte of its UTF-8 encoding)")
            else:
                if len(delimiter) > 1:
                    p.warn("simple.writer.delimiter", f"only the first character of {delimiter!r} is written after "
                                                      "each record, as in Gobblin")
                writer["delimiter"] = delimiter[0]
                self.out.origins[f"{path}.delimiter"] = p.where("simple.writer.delimiter")
        prepend = p.boolean("simple.writer.prepend.size")
        if prepend is not None:
            writer["prepend_size"] = prepend
            self.out.origins[f"{path}.prepend_size"] = p.where("simple.writer.prepend.size")

    def partition(self, branch: int | None) -> dict[str, Any] | None:
        p = self.p
        key = p.branch_key("writer.partitioner.class", branch)
        if self.gobblin_class(key, Role.PARTITIONER) is None:
            return None
        cols_key = p.branch_key("writer.partition.columns", branch)
        columns = p.listed(cols_key)
        if len(columns) != 1:
            p.problem(cols_key, f"TimeBasedAvroWriterPartitioner in gobblin-py takes exactly one column; got {columns or 'none'}")
            return None
        gran_key = p.branch_key("writer.partition.granularity", branch)
        granularity = (p.get(gran_key) or "HOUR").upper()
        if granularity not in _GRANULARITY_PATTERNS:
            p.problem(gran_key, f"{granularity!r}: expected one of {', '.join(_GRANULARITY_PATTERNS)}")
            return None
        tz_key = p.branch_key("writer.partition.timezone", branch)
        zone = p.get(tz_key)
        if zone is None:
            p.warn(key, "partitions are cut in UTC; Gobblin's default zone is America/Los_Angeles: set "
                        "writer.partition.timezone=UTC to state it")
        elif zone.upper() not in _UTC:
            p.problem(tz_key, f"{zone!r}: gobblin-py partitions in UTC only")
        pattern = p.get(p.branch_key("writer.partition.pattern", branch)) or _GRANULARITY_PATTERNS[granularity]
        return {"column": columns[0], "granularity": granularity, "pattern": pattern}

    def publisher_section(self, branch: int | None, path: str) -> dict[str, Any]:
        p = self.p
        found = self.gobblin_class("data.publisher.type", Role.PUBLISHER, _DEFAULT_PUBLISHER)
        publisher: dict[str, Any] = {"class": found[1].becomes} if found else {}
        self.out.origins[f"{path}.class"] = p.where("data.publisher.type")
        replace_key = p.branch_key("data.publisher.replace.final.dir", branch)
        if p.boolean(replace_key):
            p.problem(replace_key, "replacing the final directory is not supported: gobblin-py never deletes what it did not write")
        key = p.branch_key("data.publisher.final.dir", branch)
        final = p.get(key)
        if final is None:
            p.problem(key, "required: where the published files go")
            return publisher
        final = self.on_fs(final, p.branch_key("data.publisher.fs.uri", branch), p.branch_key("writer.fs.uri", branch))
        type_key = p.branch_key("writer.file.path.type", branch)
        path_type = (p.get(type_key) or "default").lower()
        namespace = p.get("extract.namespace")
        if path_type in ("namespace_table", "default") and namespace:
            final = f"{final.rstrip('/')}/{namespace.replace('.', '/')}"
        if path_type == "default":
            p.warn(type_key, "files go to <final dir>/<namespace>/<table>/…; Gobblin's default writer.file.path.type "
                             "adds a directory per extract under it (set writer.file.path.type=namespace_table or tablename)")
        elif path_type not in ("tablename", "namespace_table"):
            p.problem(type_key, f"{path_type!r} is not supported: tablename, namespace_table or default")
        publisher["final_dir"] = final
        self.out.origins[f"{path}.final_dir"] = p.where(key)
        return publisher

    # --- gobblin-py's own settings in a Gobblin file --------------------------------------------
    def passthrough(self) -> None:
        for key in sorted(k for k in self.p.settings if k.startswith(PASSTHROUGH)):
            value = self.p.get(key)
            rest = key[len(PASSTHROUGH):]
            section, _, sub = rest.partition(".")
            if not sub or value is None:
                self.p.problem(key, f"expected {PASSTHROUGH}<section>.<key>, e.g. gobblin-py.spark.master")
                continue
            if section == "spark" and sub.startswith("conf."):
                self.doc.setdefault("spark", {}).setdefault("conf", {})[sub[5:]] = value
                self.out.origins[f"spark.conf.{sub[5:]}"] = self.p.where(key)
            else:
                self.set(rest, value, key)


_CLASS_KEYS = {"source.class": Role.SOURCE, "converter.classes": Role.CONVERTER, "writer.builder.class": Role.WRITER,
               "data.publisher.type": Role.PUBLISHER, "fork.operator.class": Role.FORK,
               "qualitychecker.row.policies": Role.ROW_POLICY, "qualitychecker.task.policies": Role.TASK_POLICY,
               "writer.partitioner.class": Role.PARTITIONER}
"""Keys (and their branch variants `.N`) whose value names Gobblin classes."""


def _unsupported_classes(key: str, value: str, branches: int) -> list[str]:
    """What is wrong with each class a key nobody read names (a branch key of an unforked job, say): so one
    validation names every unsupported class of the file, wherever it is written."""
    base, dot, last = key.rpartition(".")
    branch_key = bool(dot) and last.isdigit() and base in _CLASS_KEYS
    role = _CLASS_KEYS.get(base if branch_key else key)
    if role is None:
        return []
    if branch_key and branches <= 1:
        read = f" (a branch key: with fork.branches unset or 1, {base} is read, not {key})"
    elif branch_key:
        read = f" (a branch key; the job has {branches} branches, numbered from 0)"
    else:
        read = ""
    out = []
    for raw in (v.strip() for v in value.split(",")):
        mapped = CLASSES.get(canonical_class(raw)) if raw else None
        if not raw or (mapped is not None and mapped.role is role and (mapped.becomes or mapped.parses)):
            continue
        why = (mapped.note if mapped is not None and mapped.role is role else
               f"it is a Gobblin {mapped.role.value}, not a {role.value}" if mapped is not None else "gobblin-py has no equivalent")
        out.append(f"unsupported Gobblin {role.value} class {raw!r}: {why}{read}")
    return out


def _leftovers(props: _Props, out: Translation, branches: int) -> None:
    """Keys nobody read: refused ones are errors, known ones without effect are warnings, the rest unused."""
    for key in props.settings:
        if key in props.used:
            continue
        unsupported = _unsupported_classes(key, props.settings[key].value, branches)
        if unsupported:
            out.problems += [f"{key} ({props.settings[key].origin}): {u}" for u in unsupported]
            continue
        base, dot, last = key.rpartition(".")
        if branches <= 1 and dot and last.isdigit() and base.startswith(SUFFIXED):
            out.unused.append(f"{key} ({props.settings[key].origin}): not used: a branch key; with fork.branches unset "
                              f"or 1, {base} is read, not {key}")
            continue
        if branches > 1 and key.startswith(SUFFIXED) and not key.rpartition(".")[2].isdigit():
            out.unused.append(f"{key} ({props.settings[key].origin}): not used: with fork.branches={branches} each "
                              f"branch N reads {key}.N (as in Gobblin)")
            continue
        rule = rule_for(key)
        origin = props.settings[key].origin
        if rule is not None and rule.refused:
            out.problems.append(f"{key} ({origin}): not supported: {rule.refused}")
        elif rule is not None and rule.ignored:
            out.warnings.append(f"{key} ({origin}): not applied: {rule.ignored}")
        else:
            out.unused.append(f"{key} ({origin}): not used by gobblin-py"
                              + (f" ({rule.note})" if rule is not None and rule.note else ""))
