"""The `fork:`, `writer:` and `publisher:` sections of a translated Gobblin job: one writer and publisher, or one a branch.

Where the records go: Gobblin's writer builders, partitioners and publishers, and a fork's branch keys (`key.N`)."""

from __future__ import annotations

from typing import Any

from gobblin_py.config.gobblin.converters import converters_section, quality_section
from gobblin_py.config.gobblin.draft import Draft
from gobblin_py.config.gobblin.mapping import Role

_DEFAULT_WRITER = "org.apache.gobblin.writer.AvroDataWriterBuilder"
_DEFAULT_PUBLISHER = "org.apache.gobblin.publisher.BaseDataPublisher"
_GRANULARITY_PATTERNS = {"MINUTE": "yyyy/MM/dd/HH/mm", "HOUR": "yyyy/MM/dd/HH", "DAY": "yyyy/MM/dd", "MONTH": "yyyy/MM", "YEAR": "yyyy"}
_CODECS = {"deflate": "deflate", "snappy": "snappy", "null": "null", "nocompression": "null", "none": "null",
           "zstandard": "zstandard", "zstd": "zstandard"}
_PARQUET_CODECS = {"snappy": "snappy", "gzip": "gzip", "zstd": "zstd", "uncompressed": "none", "none": "none"}
_OUTPUT_FORMATS = {"AVRO", "PARQUET", "PROTOBUF", "JSON", "ORC", "CSV", "TXT"}  # Gobblin's WriterOutputFormat
_UTC = {"UTC", "GMT", "ETC/UTC", "Z"}


def fork_section(d: Draft, count: int) -> None:
    """`fork:` with `count` branches, each with its own converters, quality, writer and publisher."""
    found = d.gobblin_class("fork.operator.class", Role.FORK, "org.apache.gobblin.fork.IdentityForkOperator")
    branches: list[dict[str, Any]] = []
    d.out.notes.append(f"fork.branches={count}: each branch's files go to <its final dir>/<table>/<branch name>/…; "
                       "Gobblin leaves out the branch name when each branch has its own final dir")
    d.set("fork", {"class": found[1].becomes if found else "identity", "branches": branches}, "fork.branches")
    for i in range(count):
        name_key = f"fork.branch.name.{i}"
        branch: dict[str, Any] = {"name": d.p.get(name_key) or f"fork_{i}"}
        branches.append(branch)
        base = f"fork.branches[{i}]"
        d.out.origins[f"{base}.name"] = d.p.where(name_key)
        convs = converters_section(d, f"converter.classes.{i}", pre_fork=False)
        if convs:
            branch["converters"] = convs
            d.out.origins[f"{base}.converters"] = d.p.where(f"converter.classes.{i}")
        quality = quality_section(d, i, f"{base}.quality")
        if quality:
            branch["quality"] = quality
        branch["writer"] = writer_section(d, i, f"{base}.writer", converted=bool(convs))
        branch["publisher"] = publisher_section(d, i, f"{base}.publisher")


def writer_section(d: Draft, branch: int | None, path: str, converted: bool) -> dict[str, Any]:
    """The writer of the job (branch None) or of fork branch N; `converted`: the branch has converters of its own."""
    p = d.p
    key = p.branch_key("writer.builder.class", branch)
    found = d.gobblin_class(key, Role.WRITER, _DEFAULT_WRITER)
    if found is None:
        _partition(d, branch)  # checked all the same, so one validation names every unsupported class
        return {}
    alias = found[1].becomes
    writer: dict[str, Any] = {"class": alias}
    d.out.origins[f"{path}.class"] = p.where(key)
    fmt_key = p.branch_key("writer.output.format", branch)
    if alias == "bytes":
        _bytes_writer(d, writer, path, key, fmt_key, converted or bool(d.doc.get("converters")))
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
    partition = _partition(d, branch)
    if partition is not None:
        writer["partition"] = partition
        d.out.origins[f"{path}.partition"] = p.where(p.branch_key("writer.partitioner.class", branch))
    return writer


def _bytes_writer(d: Draft, writer: dict[str, Any], path: str, key: str, fmt_key: str, converted: bool) -> None:
    """SimpleDataWriterBuilder (named by `key`): the extension and framing of its files; its records must be the
    message bytes. `fmt_key`: the branch's writer.output.format; `converted`: converters change the records."""
    p = d.p
    source = d.doc.get("source", {})
    if source.get("class") and (source.get("class") != "kafka" or source.get("deserializer") not in ("bytes", "string")
                                or converted):
        p.problem(key, "SimpleDataWriterBuilder writes each record's bytes as they are: it needs the messages of a Kafka "
                       "source with no converters (KafkaSimpleSource, or KafkaDeserializerSource with BYTE_ARRAY or "
                       "STRING)")
    # Gobblin's file extension: a WriterOutputFormat name lower-cased, any other value as written, unset none
    fmt = p.get(fmt_key)
    writer["extension"] = (fmt.lower() if fmt.upper() in _OUTPUT_FORMATS else fmt) if fmt else ""
    d.out.origins[f"{path}.extension"] = p.where(fmt_key)
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
            d.out.origins[f"{path}.delimiter"] = p.where("simple.writer.delimiter")
    prepend = p.boolean("simple.writer.prepend.size")
    if prepend is not None:
        writer["prepend_size"] = prepend
        d.out.origins[f"{path}.prepend_size"] = p.where("simple.writer.prepend.size")


def _partition(d: Draft, branch: int | None) -> dict[str, Any] | None:
    p = d.p
    key = p.branch_key("writer.partitioner.class", branch)
    if d.gobblin_class(key, Role.PARTITIONER) is None:
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


def publisher_section(d: Draft, branch: int | None, path: str) -> dict[str, Any]:
    """The publisher of the job (branch None) or of fork branch N: its class and final directory."""
    p = d.p
    found = d.gobblin_class("data.publisher.type", Role.PUBLISHER, _DEFAULT_PUBLISHER)
    publisher: dict[str, Any] = {"class": found[1].becomes} if found else {}
    d.out.origins[f"{path}.class"] = p.where("data.publisher.type")
    replace_key = p.branch_key("data.publisher.replace.final.dir", branch)
    if p.boolean(replace_key):
        p.problem(replace_key, "replacing the final directory is not supported: gobblin-py never deletes what it did not write")
    key = p.branch_key("data.publisher.final.dir", branch)
    final = p.get(key)
    if final is None:
        p.problem(key, "required: where the published files go")
        return publisher
    final = d.on_fs(final, p.branch_key("data.publisher.fs.uri", branch), p.branch_key("writer.fs.uri", branch))
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
    d.out.origins[f"{path}.final_dir"] = p.where(key)
    return publisher
