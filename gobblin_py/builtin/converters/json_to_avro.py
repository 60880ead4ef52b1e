"""The `json_to_avro` converter: JSON or CSV records → records of an Avro schema read from a file.

Values are coerced where the meaning is unambiguous (CSV text to numbers and booleans, ISO
timestamps to epoch millis); anything else is a RecordError naming the field and the value.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from gobblin_py.api import BatchConverter, CsvBlock, OneToOneConverter, RawBatch, Settings, TaskCounter
from gobblin_py.api.types import Record, Schema, SchemaKind
from gobblin_py.builtin.converters.csv_arrow import CsvArrowReader
from gobblin_py.builtin.converters.json_arrow import JsonArrowReader
from gobblin_py.builtin.schemas.avro_files import load_avro_schema
from gobblin_py.builtin.schemas.avro_time import epoch_millis
from gobblin_py.builtin.schemas.avro_values import AvroTypeChecker
from gobblin_py.errors import ConfigError, RecordError
from gobblin_py.fs.paths import ExistingFile

_MISSING = object()


def _checked_schema_file(path: Path) -> Path:
    """Validation reads the schema, so `gobblin-py validate` refuses a broken one (not the first task)."""
    try:
        load_avro_schema(path)
    except ConfigError as exc:
        raise ValueError(exc.message) from None
    return path


class JsonToAvroSettings(Settings):
    schema_file: Annotated[ExistingFile, AfterValidator(_checked_schema_file)] = Field(
        alias="schema", description="path of the .avsc file")
    on_unknown_fields: Literal["drop", "fail"] = Field(
        default="drop", description="input fields the schema lacks: drop (counted per task) or fail (a bad record)")

    model_config = Settings.model_config | {"populate_by_name": True}


_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


def _to_long(v: Any) -> int:
    t = type(v)
    if t is int:
        n = v
    elif t is str:
        n = int(v.strip())
    elif t is float and v.is_integer():
        n = int(v)
    else:
        raise ValueError
    if not _LONG_MIN <= n <= _LONG_MAX:
        raise ValueError
    return n


_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1


def _to_int(v: Any) -> int:
    n = _to_long(v)
    if not _INT_MIN <= n <= _INT_MAX:
        raise ValueError
    return n


_FLOAT_MAX = 3.4028234663852886e38  # the largest finite 32-bit float


def _to_float(v: Any) -> float:
    f = _to_double(v)
    if math.isfinite(f) and abs(f) > _FLOAT_MAX:  # Avro would store it as infinity
        raise ValueError
    return f


def _to_double(v: Any) -> float:
    t = type(v)
    if t is float or t is int:
        return float(v)
    if t is str:
        return float(v.strip())
    raise ValueError


_TRUE = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def _to_bool(v: Any) -> bool:
    if type(v) is bool:
        return v
    if type(v) is str and v.strip().lower() in _TRUE:
        return _TRUE[v.strip().lower()]
    raise ValueError


def _to_string(v: Any) -> str:
    if type(v) is str:
        return v
    raise ValueError


def _to_millis(v: Any) -> int:
    t = type(v)
    if t is str and not v.strip().lstrip("-").isdigit():
        parsed = dt.datetime.fromisoformat(v.strip().replace("Z", "+00:00"))
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=dt.UTC)
        return epoch_millis(parsed)
    if t is int or t is str:
        return _to_long(v)
    raise ValueError


_PRIMITIVES: dict[str, Callable[[Any], Any]] = {
    "long": _to_long, "int": _to_int, "double": _to_double, "float": _to_float,
    "boolean": _to_bool, "string": _to_string,
}


def _describe(avro_type: Any) -> str:
    if isinstance(avro_type, dict):
        return avro_type.get("logicalType") or str(avro_type.get("type"))
    if isinstance(avro_type, list):
        return " | ".join(_describe(t) for t in avro_type)
    return str(avro_type)


def _coercer(avro_type: Any, checker: AvroTypeChecker) -> tuple[Callable[[Any], Any], bool]:
    """A function coercing a JSON value to `avro_type`, and whether the type admits null."""
    if isinstance(avro_type, list):
        nullable = "null" in avro_type
        branches = [t for t in avro_type if t != "null"]
        if len(branches) == 1:
            inner, _ = _coercer(branches[0], checker)
            return inner, nullable
    elif isinstance(avro_type, dict):
        logical = avro_type.get("logicalType")
        if logical in ("timestamp-millis", "local-timestamp-millis"):
            return _to_millis, False
        if avro_type.get("type") in _PRIMITIVES and not logical:
            return _PRIMITIVES[avro_type["type"]], False
    elif avro_type in _PRIMITIVES:
        return _PRIMITIVES[avro_type], False

    def checked(v: Any) -> Any:  # unions, complex, logical and named types: the value must already fit
        if checker.matches(v, avro_type):
            return v
        raise ValueError
    return checked, avro_type == "null" or (isinstance(avro_type, list) and "null" in avro_type)


class JsonToAvroConverter(OneToOneConverter, BatchConverter):
    """Shapes each record to the Avro schema in `schema:`; input fields the schema lacks are dropped and
    counted (`unknown_fields_dropped`), or make the record a bad record under `on_unknown_fields: fail`.
    A batch of raw JSON values or a block of CSV rows becomes one Arrow batch where that gives the same records (see
    `json_arrow`, `csv_arrow`)."""

    Settings = JsonToAvroSettings

    @classmethod
    def schema_kind(cls, settings: JsonToAvroSettings) -> SchemaKind:
        return SchemaKind.AVRO

    def __init__(self, settings: Any = None) -> None:
        super().__init__(settings)
        self.avro_schema = load_avro_schema(self.settings.schema_file)
        checker = AvroTypeChecker(self.avro_schema)
        fields = []
        for f, parsed in zip(self.avro_schema["fields"], checker.parsed_fields()):
            fn, nullable = _coercer(parsed["type"], checker)
            fields.append(_Field(f["name"], fn, nullable, f.get("default", _MISSING), _describe(f["type"]),
                                 _exact_type(parsed["type"])))
        self._known = frozenset(f.name for f in fields)
        self._dropped = TaskCounter()
        self.map_record = _compile(fields, self._unknown)  # type: ignore[method-assign]  # the compiled function, no extra frame
        self._arrow: JsonArrowReader | None = None  # made on the first batch: a row-only task never imports pyarrow
        self._csv: CsvArrowReader | None = None
        self._pending: tuple[int, list[str]] | None = None  # (rows, columns dropped of each) of the last batch made

    def convert_schema(self, schema: Schema) -> Schema:
        """The schema file's; a source that adds fields to each record (`adds_fields` of its schema, such as Kafka's
        `metadata_columns`) needs each in it, or they would be dropped: refused before a record is read."""
        added = schema.get("adds_fields") if isinstance(schema, dict) else None
        missing = [f for f in added or [] if f["name"] not in self._known]
        if missing:
            raise ConfigError(f"converters json_to_avro: schema {self.settings.schema_file} lacks field(s) "
                              f"{', '.join(f['name'] for f in missing)} that the source adds to each record; add "
                              f"{', '.join(json.dumps(f) for f in missing)} to its fields, or drop them from the "
                              "source's metadata_columns")
        return self.avro_schema

    def map_record(self, record: Record) -> Record:  # replaced per instance by the compiled function
        raise NotImplementedError

    def convert_batch(self, batch: RawBatch) -> Any | None:
        self._pending = None
        if isinstance(batch, CsvBlock):
            if self._csv is None:
                self._csv = CsvArrowReader(self.avro_schema, self.settings.on_unknown_fields)
            read = self._csv.read(batch)
            if read is None:
                return None
            arrow, dropped = read
            if dropped:
                self._pending = (arrow.num_rows, dropped)
            return arrow
        if batch.format != "json":
            return None
        if self._arrow is None:
            self._arrow = JsonArrowReader(self.avro_schema)
        return self._arrow.read(batch.values)

    def batch_written(self) -> None:
        """The columns dropped of each row of a CSV block, counted as `_unknown` counts them row by row."""
        if self._pending is not None:
            rows, dropped = self._pending
            for name in dropped:
                self._dropped.add(rows, name)
            self._pending = None

    def counters(self) -> Mapping[str, TaskCounter]:
        return {"unknown_fields_dropped": self._dropped} if self._dropped.count else {}

    def _unknown(self, record: Record) -> None:
        """Called for a record that may hold fields the schema lacks: count them, or refuse the record."""
        extra = [k for k in record if k not in self._known]
        if not extra:
            return
        if self.settings.on_unknown_fields == "fail":
            raise RecordError(f"fields not in the schema: {', '.join(map(str, extra))}", str(extra[0]))
        for name in extra:
            self._dropped.add(1, str(name))


class _Field:
    """One schema field: the slow path that coerces, defaults or rejects a value."""

    def __init__(self, name: str, coerce: Callable[[Any], Any], nullable: bool, default: Any, described: str,
                 exact: str | None) -> None:
        self.name, self.exact, self.nullable = name, exact, nullable
        blank_is_null = nullable  # CSV has no null: an empty cell of a nullable field is null

        def slow(v: Any) -> Any:
            if v is None or v is _MISSING or (blank_is_null and v == ""):
                if default is not _MISSING:
                    return default
                if nullable:
                    return None
                raise RecordError(f"field {name!r} is missing; the schema requires {described}", name)
            try:
                return coerce(v)
            except (ValueError, TypeError, OverflowError):
                raise RecordError(f"field {name!r}: {v!r} is not a valid {described}", name) from None
        self.slow = slow


_EXACT = {"long": "int", "double": "float", "string": "str", "boolean": "bool"}


def _exact_type(avro_type: Any) -> str | None:
    """The Python type a value of `avro_type` already has when no coercion is needed (None: always coerce)."""
    if isinstance(avro_type, list):
        rest = [t for t in avro_type if t != "null"]
        return _exact_type(rest[0]) if len(rest) == 1 else None
    if isinstance(avro_type, dict):
        if avro_type.get("logicalType") in ("timestamp-millis", "local-timestamp-millis") and avro_type.get("type") == "long":
            return "int"
        return _exact_type(avro_type["type"]) if not avro_type.get("logicalType") and isinstance(avro_type.get("type"), str) else None
    return _EXACT.get(avro_type) if isinstance(avro_type, str) else None


def _compile(fields: list[_Field], unknown: Callable[[Record], None]) -> Callable[[Record], Record]:
    """A function made for this schema: each value whose type is already right passes with one `type()`
    check (and a range check for longs), and only the others take the field's slow path (the per-record
    cost of this converter). A record with every field present and no other calls nothing more."""
    lines = ["def map_record(record):", "    get = record.get", "    missing = False"]
    env: dict[str, Any] = {"MISSING": _MISSING, "unknown": unknown}
    for i, f in enumerate(fields):
        env[f"slow{i}"] = f.slow
        lines.append(f"    v{i} = get({f.name!r}, MISSING)")
        if f.exact:
            env[f"t{i}"] = {"int": int, "float": float, "str": str, "bool": bool}[f.exact]
            blank = f" or v{i} == ''" if f.nullable and f.exact == "str" else ""
            lines.append(f"    if type(v{i}) is not t{i}{blank}:")
            lines.append(f"        if v{i} is MISSING: missing = True")
            lines.append(f"        v{i} = slow{i}(v{i})")
            if f.exact == "int":  # an int beyond 64 bits is JSON, not an Avro long
                lines.append(f"    elif not {_LONG_MIN} <= v{i} <= {_LONG_MAX}: v{i} = slow{i}(v{i})")
        else:
            lines.append(f"    if v{i} is MISSING: missing = True")
            lines.append(f"    v{i} = slow{i}(v{i})")
    lines.append(f"    if missing or len(record) != {len(fields)}: unknown(record)")
    lines.append("    return {" + ", ".join(f"{f.name!r}: v{i}" for i, f in enumerate(fields)) + "}")
    exec("\n".join(lines), env)  # noqa: S102 - the source is built from field names via repr only
    return env["map_record"]
