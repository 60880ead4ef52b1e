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


_BASES: dict[Kind, str] = {
    Kind.SOURCE: "gobblin_py.api.source:Source",
    Kind.CONVERTER: "gobblin_py.api.converter:Converter",
    Kind.ROW_POLICY: "gobblin_py.api.quality:RowPolicy",
    Kind.TASK_POLICY: "gobblin_py.api.quality:TaskPolicy",
    Kind.FORK: "gobblin_py.api.fork:ForkOperator",
    Kind.WRITER: "gobblin_py.api.writer:DataWriter",
    Kind.PUBLISHER: "gobblin_py.api.committer:Committer",
}

BUILTINS: dict[Kind, dict[str, str]] = {
    Kind.SOURCE: {
        "files": "gobblin_py.builtin.files_source:FilesSource",
        "kafka": "gobblin_py.builtin.kafka_source:KafkaSource",
        "jdbc": "gobblin_py.builtin.jdbc_source:JdbcSource",
    },
    Kind.CONVERTER: {
        "json_to_avro": "gobblin_py.builtin.json_to_avro:JsonToAvroConverter",
        "select_fields": "gobblin_py.builtin.field_converters:SelectFieldsConverter",
        "rename_fields": "gobblin_py.builtin.field_converters:RenameFieldsConverter",
        "filter": "gobblin_py.builtin.filter_converter:FilterConverter",
        "explode": "gobblin_py.builtin.field_converters:ExplodeConverter",
    },
    Kind.ROW_POLICY: {
        "required_fields": "gobblin_py.builtin.row_policies:RequiredFieldsPolicy",
        "schema_check": "gobblin_py.builtin.row_policies:SchemaCheckPolicy",
    },
    Kind.TASK_POLICY: {
        "row_count": "gobblin_py.builtin.task_policies:RowCountPolicy",
        "row_count_range": "gobblin_py.builtin.task_policies:RowCountRangePolicy",
    },
    Kind.FORK: {
        "identity": "gobblin_py.builtin.forks:IdentityFork",
        "by_field": "gobblin_py.builtin.forks:ByFieldFork",
    },
    Kind.WRITER: {
        "avro": "gobblin_py.builtin.avro_writer:AvroWriter",
        "bytes": "gobblin_py.builtin.bytes_writer:BytesWriter",
        "jsonl": "gobblin_py.builtin.jsonl_writer:JsonLinesWriter",
        "parquet": "gobblin_py.builtin.parquet_writer:ParquetWriter",
    },
    Kind.PUBLISHER: {
        "fs": "gobblin_py.builtin.fs_publisher:FsPublisher",
        "iceberg": "gobblin_py.builtin.iceberg_publisher:IcebergPublisher",
    },
}


def _import(path: str) -> object:
    module_name, _, attr = path.partition(":")
    if not attr:
        module_name, _, attr = path.rpartition(".")
    module = importlib.import_module(module_name)
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
