"""The `json_to_avro` converter: JSON or CSV records → records of an Avro schema read from a file.

Values are coerced where the meaning is unambiguous (CSV text to numbers and booleans, ISO
timestamps to epoch millis); anything else is a RecordError naming the field and the value.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from typing import Any

import fastavro
import orjson
from pydantic import Field

from gobblin_py.api import Converter, Settings
from gobblin_py.api.types import Record, Schema
from gobblin_py.builtin.avro_values import AvroTypeChecker
from gobblin_py.config.paths import ExistingFile
from gobblin_py.errors import ConfigError, RecordError

_MISSING = object()


class JsonToAvroSettings(Settings):
    schema_file: ExistingFile = Field(alias="schema", description="path of the .avsc file")

    model_config = Settings.model_config | {"populate_by_name": True}


def load_avro_schema(path: Any) -> dict[str, Any]:
    """Read and check an .avsc file; ConfigError names the file on any problem."""
    try:
        schema = orjson.loads(open(path, "rb").read())
        fastavro.parse_schema(schema)
    except (OSError, orjson.JSONDecodeError, fastavro.schema.SchemaParseException, Exception) as exc:
        raise ConfigError(f"{path}: not a valid Avro schema: {exc}") from None
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise ConfigError(f"{path}: the Avro schema must be a record with fields")
    return schema


def _to_long(v: Any) -> int:
    t = type(v)
    if t is int:
        return v
    if t is str:
        return int(v.strip())
    if t is float and v.is_integer():
        return int(v)
    raise ValueError


_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1


def _to_int(v: Any) -> int:
    n = _to_long(v)
    if not _INT_MIN <= n <= _INT_MAX:
        raise ValueError
    return n


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
    if t is int:
        return v
    if t is str:
        s = v.strip()
        if s.lstrip("-").isdigit():
            return int(s)
        parsed = dt.datetime.fromisoformat(s.replace("Z", "+00:00"))
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=dt.timezone.utc)
        return int(parsed.timestamp() * 1000)
    raise ValueError


_PRIMITIVES: dict[str, Callable[[Any], Any]] = {
    "long": _to_long, "int": _to_int, "double": _to_double, "float": _to_double,
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


class JsonToAvroConverter(Converter):
    """Shapes each record to the Avro schema in `schema:`; extra input fields are dropped."""

    Settings = JsonToAvroSettings

    def __init__(self, settings: Any = None) -> None:
        super().__init__(settings)
        self.avro_schema = load_avro_schema(self.settings.schema_file)
        checker = AvroTypeChecker(self.avro_schema)
        self._fields = []
        for f, parsed in zip(self.avro_schema["fields"], checker.parsed_fields()):
            fn, nullable = _coercer(parsed["type"], checker)
            default = f.get("default", _MISSING)
            self._fields.append((f["name"], fn, nullable, default, _describe(f["type"])))

    def convert_schema(self, schema: Schema) -> Schema:
        return self.avro_schema

    def convert_record(self, record: Record) -> Iterable[Record]:
        out: Record = {}
        get = record.get
        for name, fn, nullable, default, described in self._fields:
            v = get(name, _MISSING)
            if v is None or v is _MISSING or (v == "" and nullable):
                if nullable and default is _MISSING:
                    out[name] = None
                    continue
                if default is not _MISSING:
                    out[name] = default
                    continue
                raise RecordError(f"field {name!r} is missing; the schema requires {described}", name)
            try:
                out[name] = fn(v)
            except (ValueError, TypeError, OverflowError):
                raise RecordError(f"field {name!r}: {v!r} is not a valid {described}", name) from None
        return (out,)
