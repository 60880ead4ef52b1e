"""The plugin registry: a `class:` value is a built-in alias or a dotted path to a user's class."""

from __future__ import annotations

import enum
import importlib

from gobblin_py.errors import PluginNotFoundError


class Kind(str, enum.Enum):
    """The constructs a job file can name, with the base class each must extend."""

    SOURCE = "source"
    CONVERTER = "converter"
    ROW_POLICY = "row policy"
    TASK_POLICY = "task policy"
    FORK = "fork operator"
    WRITER = "writer"
    PUBLISHER = "publisher"
    DEAD_LETTER = "dead-letter sink"


_BASES: dict[Kind, str] = {
    Kind.SOURCE: "gobblin_py.api.source:Source",
    Kind.CONVERTER: "gobblin_py.api.converter:Converter",
    Kind.ROW_POLICY: "gobblin_py.api.quality:RowPolicy",
    Kind.TASK_POLICY: "gobblin_py.api.quality:TaskPolicy",
    Kind.FORK: "gobblin_py.api.fork:ForkOperator",
    Kind.WRITER: "gobblin_py.api.writer:DataWriter",
    Kind.PUBLISHER: "gobblin_py.api.committer:Committer",
    Kind.DEAD_LETTER: "gobblin_py.api.dead_letter:DeadLetters",
}

BUILTINS: dict[Kind, dict[str, str]] = {
    Kind.SOURCE: {
        "files": "gobblin_py.builtin.sources.files.source:FilesSource",
        "kafka": "gobblin_py.builtin.sources.kafka.source:KafkaSource",
        "jdbc": "gobblin_py.builtin.sources.jdbc.source:JdbcSource",
        "postgres_cdc": "gobblin_py.builtin.sources.postgres_cdc.source:PostgresCdcSource",
        "mysql_cdc": "gobblin_py.builtin.sources.mysql_cdc.source:MysqlCdcSource",
    },
    Kind.CONVERTER: {
        "json_to_avro": "gobblin_py.builtin.converters.json_to_avro:JsonToAvroConverter",
        "select_fields": "gobblin_py.builtin.converters.fields:SelectFieldsConverter",
        "rename_fields": "gobblin_py.builtin.converters.fields:RenameFieldsConverter",
        "filter": "gobblin_py.builtin.converters.filter:FilterConverter",
        "explode": "gobblin_py.builtin.converters.fields:ExplodeConverter",
    },
    Kind.ROW_POLICY: {
        "required_fields": "gobblin_py.builtin.quality:RequiredFieldsPolicy",
        "schema_check": "gobblin_py.builtin.quality:SchemaCheckPolicy",
    },
    Kind.TASK_POLICY: {
        "row_count": "gobblin_py.builtin.quality:RowCountPolicy",
        "row_count_range": "gobblin_py.builtin.quality:RowCountRangePolicy",
    },
    Kind.FORK: {
        "identity": "gobblin_py.builtin.forks:IdentityFork",
        "by_field": "gobblin_py.builtin.forks:ByFieldFork",
    },
    Kind.WRITER: {
        "avro": "gobblin_py.builtin.writers.avro:AvroWriter",
        "bytes": "gobblin_py.builtin.writers.bytes:BytesWriter",
        "jsonl": "gobblin_py.builtin.writers.jsonl:JsonLinesWriter",
        "parquet": "gobblin_py.builtin.writers.parquet:ParquetWriter",
    },
    Kind.PUBLISHER: {
        "fs": "gobblin_py.builtin.publishers.fs:FsPublisher",
        "iceberg": "gobblin_py.builtin.publishers.iceberg.publisher:IcebergPublisher",
        "delta": "gobblin_py.builtin.publishers.delta.publisher:DeltaPublisher",
    },
    Kind.DEAD_LETTER: {
        "kafka": "gobblin_py.builtin.dead_letter.kafka:KafkaDeadLetters",
    },
}


MOVED: dict[str, str] = {
    "gobblin_py.builtin.files_source": "gobblin_py.builtin.sources.files.source",
    "gobblin_py.builtin.kafka_source": "gobblin_py.builtin.sources.kafka.source",
    "gobblin_py.builtin.jdbc_source": "gobblin_py.builtin.sources.jdbc.source",
    "gobblin_py.builtin.json_to_avro": "gobblin_py.builtin.converters.json_to_avro",
    "gobblin_py.builtin.field_converters": "gobblin_py.builtin.converters.fields",
    "gobblin_py.builtin.filter_converter": "gobblin_py.builtin.converters.filter",
    "gobblin_py.builtin.row_policies": "gobblin_py.builtin.quality",
    "gobblin_py.builtin.task_policies": "gobblin_py.builtin.quality",
    "gobblin_py.builtin.avro_writer": "gobblin_py.builtin.writers.avro",
    "gobblin_py.builtin.bytes_writer": "gobblin_py.builtin.writers.bytes",
    "gobblin_py.builtin.jsonl_writer": "gobblin_py.builtin.writers.jsonl",
    "gobblin_py.builtin.parquet_writer": "gobblin_py.builtin.writers.parquet",
    "gobblin_py.builtin.fs_publisher": "gobblin_py.builtin.publishers.fs",
    "gobblin_py.builtin.iceberg_publisher": "gobblin_py.builtin.publishers.iceberg.publisher",
}
"""Where the built-in plugins' modules were before `builtin/` was laid out by the job file's sections: commit and
compaction records name a publisher by `module:Class`, and one written before the move must still replay."""


def _import(path: str) -> object:
    module_name, _, attr = path.partition(":")
    if not attr:
        module_name, _, attr = path.rpartition(".")
    module = importlib.import_module(MOVED.get(module_name, module_name))
    return getattr(module, attr)


def base_class(kind: Kind) -> type:
    return _import(_BASES[kind])  # type: ignore[return-value]


def resolve(kind: Kind, name: str) -> type:
    """The class for `name`: a built-in alias of `kind`, or `package.module:Class`.

    Raises PluginNotFoundError listing every alias and import that was tried.
    """
    builtins = BUILTINS[kind]
    tried: list[str] = []
    candidates = [builtins[name]] if name in builtins else []
    if ":" in name or "." in name:
        candidates.append(name)
    else:
        tried.append(f"built-in {kind.value} alias {name!r} (known: {', '.join(sorted(builtins))})")
    cls = None
    for candidate in candidates:
        try:
            cls = _import(candidate)
            break
        except (ImportError, AttributeError, ValueError) as exc:
            tried.append(f"import {candidate!r}: {exc}")
    if cls is None:
        raise PluginNotFoundError(
            f"unknown {kind.value} class {name!r}; tried: " + "; ".join(tried)
        )
    base = base_class(kind)
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise PluginNotFoundError(
            f"{name!r} is not a {kind.value}: it must be a subclass of "
            f"{base.__module__}.{base.__qualname__}"
        )
    return cls
