"""Avro record schema → Arrow schema (for Parquet), and a per-record check that a value fits the mapped type.

The check is what lets a buffering writer refuse a bad record in `write()`, where the framework can still
route that one record to the error file: a record it passes converts to Arrow without error.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gobblin_py.errors import ConfigError, RecordError

if TYPE_CHECKING:
    import pyarrow as pa

Check = Callable[[Any, str], None]
"""Raises RecordError naming `path` when the value does not fit; returns when it does."""

_PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_FLOAT_MAX = 3.4028234663852886e38  # the largest finite 32-bit float
_EXACT_INT = {"float": 2**24, "double": 2**53}  # the ints a float type holds exactly (Arrow refuses the others)


class _Mapped:
    """One Avro type mapped: its Arrow type, whether null is allowed, the check of a non-null value, and (for
    the compiled top-level check) a Python expression over `v` true for the common values that need no check."""

    __slots__ = ("arrow", "check", "fast", "nullable")

    def __init__(self, arrow: Any, nullable: bool, check: Check, fast: str | None = None) -> None:
        self.arrow, self.nullable, self.check, self.fast = arrow, nullable, check, fast


class ArrowMapping:
    """The Arrow schema of an Avro record schema, and `check(record)` refusing a record that would not convert.

    Raises ConfigError naming the field path for a type Parquet cannot hold (a union of two non-null types,
    a recursive record).
    """

    def __init__(self, avro_schema: dict[str, Any]) -> None:
        import pyarrow as pa

        if not (isinstance(avro_schema, dict) and avro_schema.get("type") == "record"):
            raise ConfigError("the parquet writer needs an Avro record schema; add a json_to_avro converter before it")
        self._pa = pa
        self._named: dict[str, Any] = {}
        self._building: set[str] = set()
        fields = self._fields(avro_schema, "", _namespace(avro_schema, ""))
        self.schema: pa.Schema = pa.schema([pa.field(name, m.arrow, m.nullable) for name, m in fields])
        self.check: Callable[[Any], None] = _compile(fields)

    # --- the mapping ----------------------------------------------------------------------------------------

    def _fields(self, record: dict[str, Any], path: str, namespace: str) -> list[tuple[str, _Mapped]]:
        name = _fullname(record, namespace)
        if name in self._building:
            raise ConfigError(f"field {path!r}: the record type {name!r} contains itself, and Parquet has no recursive "
                              "types; cut the recursion or keep that part as a JSON string")
        if name:
            self._named[name] = record
            self._building.add(name)
        inner_ns = _namespace(record, namespace)
        out = []
        for f in record.get("fields", []):
            fpath = f"{path}.{f['name']}" if path else f["name"]
            out.append((f["name"], self._map(f["type"], fpath, inner_ns)))
        self._building.discard(name)
        return out

    def _map(self, avro: Any, path: str, namespace: str) -> _Mapped:
        pa = self._pa
        if isinstance(avro, list):
            return self._union(avro, path, namespace)
        if isinstance(avro, str):
            if avro in _PRIMITIVES:
                return _primitive(pa, avro, path)
            named = (self._named.get(f"{namespace}.{avro}") if namespace and "." not in avro else None) or self._named.get(avro)
            if named is None:
                raise ConfigError(f"field {path!r}: unknown Avro type {avro!r}; define it before it is used")
            return self._map(named, path, namespace)  # a record being defined: _fields refuses the recursion
        if not isinstance(avro, dict):
            raise ConfigError(f"field {path!r}: {avro!r} is not an Avro type")
        kind = avro.get("type")
        logical = avro.get("logicalType")
        if logical:
            mapped = _logical(pa, avro, kind, logical, path)
            if mapped is not None:
                return mapped
        if kind == "record":
            fields = self._fields(avro, path, namespace)
            struct = pa.struct([pa.field(n, m.arrow, m.nullable) for n, m in fields])
            return _Mapped(struct, False, _record_check(fields))
        if kind in ("enum", "fixed"):
            name = _fullname(avro, namespace)
            if name:
                self._named[name] = avro
            if kind == "enum":
                return _Mapped(pa.string(), False, _enum_check(avro.get("symbols", [])))
            return _Mapped(pa.binary(int(avro["size"])), False, _fixed_check(int(avro["size"])))
        if kind == "array":
            item = self._map(avro.get("items"), f"{path}[]", namespace)
            return _Mapped(pa.list_(pa.field("item", item.arrow, item.nullable)), False, _array_check(item))
        if kind == "map":
            value = self._map(avro.get("values"), f"{path}{{}}", namespace)
            return _Mapped(pa.map_(pa.string(), pa.field("value", value.arrow, value.nullable)), False, _map_check(value))
        if isinstance(kind, (str, list, dict)):  # {"type": "long"} and the like
            return self._map(kind, path, namespace)
        raise ConfigError(f"field {path!r}: {avro!r} is not an Avro type")

    def _union(self, branches: list[Any], path: str, namespace: str) -> _Mapped:
        rest = [b for b in branches if b != "null"]
        nullable = len(rest) < len(branches)
        if len(rest) > 1:
            kinds = " and ".join(_describe(b) for b in rest)
            raise ConfigError(f"field {path!r}: a union of {kinds} has no Parquet type; make it one type or a "
                              f"nullable one ([\"null\", T])")
        if not rest:
            return _Mapped(self._pa.null(), True, _null_check)
        inner = self._map(rest[0], path, namespace)
        return _Mapped(inner.arrow, nullable or inner.nullable, inner.check, inner.fast)


_MAPPINGS: OrderedDict[bytes, ArrowMapping] = OrderedDict()
_MAPPINGS_LOCK = threading.Lock()


def arrow_mapping(avro_schema: dict[str, Any]) -> ArrowMapping:
    """`ArrowMapping(avro_schema)`, built once a process for each distinct schema (the last 256 kept): a run of many
    tables or files opens a writer and a batch schema a task, each one compiled again before. A mapping is not
    changed once built, so tasks on other threads share it."""
    import orjson

    key = orjson.dumps(avro_schema, option=orjson.OPT_SORT_KEYS)
    with _MAPPINGS_LOCK:
        found = _MAPPINGS.get(key)
        if found is not None:
            _MAPPINGS.move_to_end(key)
            return found
    mapping = ArrowMapping(avro_schema)  # a ConfigError is raised again each time: nothing kept
    with _MAPPINGS_LOCK:
        _MAPPINGS[key] = mapping
        while len(_MAPPINGS) > 256:
            _MAPPINGS.popitem(last=False)
    return mapping


def _fullname(avro: dict[str, Any], namespace: str) -> str:
    name = avro.get("name") or ""
    if not name or "." in name:
        return name
    ns = avro.get("namespace", namespace)
    return f"{ns}.{name}" if ns else name


def _namespace(avro: dict[str, Any], outer: str) -> str:
    name = avro.get("name") or ""
    if "." in name:
        return name.rsplit(".", 1)[0]
    return avro.get("namespace", outer) or ""


def _describe(avro: Any) -> str:
    if isinstance(avro, dict):
        return avro.get("logicalType") or avro.get("name") or str(avro.get("type"))
    return str(avro)


# --- each type: Arrow type and value check ----------------------------------------------------------------


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def _top(path: str) -> str:
    """The top-level field of a path such as `payload.items[2].sku` (RecordError's `field`)."""
    return re.split(r"[.\[{]", path, maxsplit=1)[0]


def _refuse(path: str, value: Any, what: str) -> RecordError:
    return RecordError(f"field {path!r}: {_short(value)} is not {what}", _top(path))


def _null_check(v: Any, path: str) -> None:
    raise _refuse(path, v, "null (the schema allows only null here)")


def _int_check(lo: int, hi: int, what: str) -> Check:
    def check(v: Any, path: str) -> None:
        if type(v) is not int or not lo <= v <= hi:
            raise _refuse(path, v, what)
    return check


def _float_check(kind: str) -> Check:
    exact = _EXACT_INT[kind]

    def check(v: Any, path: str) -> None:
        t = type(v)
        if t is float:
            if kind == "float" and math.isfinite(v) and abs(v) > _FLOAT_MAX:
                raise _refuse(path, v, "a float (beyond 32 bits)")
            return
        if t is not int or not -exact <= v <= exact:
            raise _refuse(path, v, f"a {kind}" + (f" (an int beyond ±2^{exact.bit_length() - 1} loses digits)" if t is int else ""))
    return check


def _bool_check(v: Any, path: str) -> None:
    if type(v) is not bool:
        raise _refuse(path, v, "a boolean")


def _string_check(v: Any, path: str) -> None:
    if type(v) is not str:
        raise _refuse(path, v, "a string")
    if not v.isascii():
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            raise _refuse(path, v, "UTF-8 text (it holds a lone surrogate)") from None


def _bytes_check(v: Any, path: str) -> None:
    if not isinstance(v, (bytes, bytearray)):
        raise _refuse(path, v, "bytes")


def _fixed_check(size: int) -> Check:
    def check(v: Any, path: str) -> None:
        if not isinstance(v, (bytes, bytearray)) or len(v) != size:
            raise _refuse(path, v, f"{size} bytes (an Avro fixed)")
    return check


def _enum_check(symbols: list[str]) -> Check:
    allowed = frozenset(symbols)

    def check(v: Any, path: str) -> None:
        if type(v) is not str or v not in allowed:
            raise _refuse(path, v, f"one of the enum's symbols {sorted(allowed)}")
    return check


def _primitive(pa: Any, avro: str, path: str) -> _Mapped:
    if avro == "null":
        return _Mapped(pa.null(), True, _null_check)
    if avro == "boolean":
        return _Mapped(pa.bool_(), False, _bool_check, "type(v) is bool")
    if avro == "int":
        return _Mapped(pa.int32(), False, _int_check(*_INT32, "an int (32 bits)"), f"type(v) is int and {_INT32[0]} <= v <= {_INT32[1]}")
    if avro == "long":
        return _Mapped(pa.int64(), False, _int_check(*_INT64, "a long (64 bits)"), f"type(v) is int and {_INT64[0]} <= v <= {_INT64[1]}")
    if avro == "float":
        return _Mapped(pa.float32(), False, _float_check("float"), f"type(v) is float and -{_FLOAT_MAX!r} <= v <= {_FLOAT_MAX!r}")
    if avro == "double":
        return _Mapped(pa.float64(), False, _float_check("double"), "type(v) is float")
    if avro == "bytes":
        return _Mapped(pa.binary(), False, _bytes_check, "type(v) is bytes")
    return _Mapped(pa.string(), False, _string_check, "type(v) is str and v.isascii()")


def _timestamp_check(lo: int, hi: int, unit: str) -> Check:
    def check(v: Any, path: str) -> None:
        if type(v) is int:
            if lo <= v <= hi:
                return
        elif isinstance(v, dt.datetime):
            return
        raise _refuse(path, v, f"a timestamp (epoch {unit} or a datetime)")
    return check


def _date_check(v: Any, path: str) -> None:
    if type(v) is int and _INT32[0] <= v <= _INT32[1]:
        return
    if isinstance(v, dt.date) and not isinstance(v, dt.datetime):
        return
    raise _refuse(path, v, "a date (days since 1970-01-01 or a date)")


def _time_check(lo: int, hi: int, unit: str) -> Check:
    def check(v: Any, path: str) -> None:
        if (type(v) is int and lo <= v <= hi) or isinstance(v, dt.time):
            return
        raise _refuse(path, v, f"a time of day ({unit} since midnight or a time)")
    return check


def _decimal_check(precision: int, scale: int) -> Check:
    limit = decimal.Decimal(10) ** precision
    what = f"a decimal({precision},{scale})"

    def check(v: Any, path: str) -> None:
        if type(v) is int:
            v2 = decimal.Decimal(v)
        elif isinstance(v, decimal.Decimal) and v.is_finite():
            v2 = v
        else:
            raise _refuse(path, v, what)
        scaled = v2.scaleb(scale)
        if scaled != scaled.to_integral_value():
            raise _refuse(path, v, f"{what}: more than {scale} digits after the point")
        if abs(scaled) >= limit:
            raise _refuse(path, v, f"{what}: more than {precision} digits")
    return check


def _logical(pa: Any, avro: dict[str, Any], kind: Any, logical: str, path: str) -> _Mapped | None:
    """The mapped logical type, or None to use the underlying type (as Avro says for one it does not know)."""
    if logical in ("timestamp-millis", "timestamp-micros", "local-timestamp-millis", "local-timestamp-micros") and kind == "long":
        unit = "ms" if logical.endswith("millis") else "us"
        tz = None if logical.startswith("local-") else "UTC"
        return _Mapped(pa.timestamp(unit, tz=tz), False, _timestamp_check(*_INT64, "millis" if unit == "ms" else "micros"),
                       f"type(v) is int and {_INT64[0]} <= v <= {_INT64[1]}")
    if logical == "date" and kind == "int":
        return _Mapped(pa.date32(), False, _date_check, f"type(v) is int and {_INT32[0]} <= v <= {_INT32[1]}")
    if logical == "time-millis" and kind == "int":
        return _Mapped(pa.time32("ms"), False, _time_check(0, 86_400_000, "millis"))
    if logical == "time-micros" and kind == "long":
        return _Mapped(pa.time64("us"), False, _time_check(0, 86_400_000_000, "micros"))
    if logical == "decimal" and kind in ("bytes", "fixed"):
        precision, scale = avro.get("precision"), avro.get("scale", 0)
        if not isinstance(precision, int) or not isinstance(scale, int) or not precision > 0 or not 0 <= scale <= precision:
            raise ConfigError(f"field {path!r}: a decimal needs an int precision > 0 and 0 <= scale <= precision "
                              f"(got precision {precision!r}, scale {scale!r})")
        if precision > 76:
            raise ConfigError(f"field {path!r}: decimal precision {precision} is beyond Parquet's 76 digits; "
                              "store it as a string")
        arrow = pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
        return _Mapped(arrow, False, _decimal_check(precision, scale))
    if logical == "uuid" and kind == "string":
        return _Mapped(pa.string(), False, _string_check, "type(v) is str and v.isascii()")
    return None


def _nullable(m: _Mapped) -> Check:
    """The check of a value that may be null where `m` allows it (a missing field is null too)."""
    inner, nullable = m.check, m.nullable

    def check(v: Any, path: str) -> None:
        if v is None:
            if nullable:
                return
            raise RecordError(f"field {path!r} is missing or null, and its type does not allow null; "
                              "give it a value, or make the field nullable ([\"null\", T])",
                              _top(path))
        inner(v, path)
    return check


def _record_check(fields: list[tuple[str, _Mapped]]) -> Check:
    checks = [(name, _nullable(m)) for name, m in fields]

    def check(v: Any, path: str) -> None:
        if not isinstance(v, dict):
            raise _refuse(path, v, "a record (a dict)")
        get = v.get
        for name, c in checks:
            c(get(name), f"{path}.{name}")
    return check


def _array_check(item: _Mapped) -> Check:
    c = _nullable(item)

    def check(v: Any, path: str) -> None:
        if not isinstance(v, (list, tuple)):
            raise _refuse(path, v, "an array (a list)")
        for i, x in enumerate(v):
            c(x, f"{path}[{i}]")
    return check


def _map_check(value: _Mapped) -> Check:
    c = _nullable(value)

    def check(v: Any, path: str) -> None:
        if not isinstance(v, dict):
            raise _refuse(path, v, "a map (a dict)")
        for k, x in v.items():
            if type(k) is not str:
                raise _refuse(f"{path}{{}}", k, "a map key (a string)")
            c(x, f"{path}{{{k}}}")
    return check


def _compile(fields: list[tuple[str, _Mapped]]) -> Callable[[Any], None]:
    """The top-level check made for this schema: a value of the common type passes with one `type()` test (and
    a range test for ints), only the others take the field's full check."""
    env: dict[str, Any] = {"dict": dict, "refuse": _refuse}
    lines = ["def check(record):", "    if not isinstance(record, dict):", "        raise refuse('(record)', record, 'a record (a dict)')",
             "    get = record.get"]
    for i, (name, m) in enumerate(fields):
        env[f"c{i}"] = _nullable(m)
        lines.append(f"    v = get({name!r})")
        cond = (["v is None"] if m.nullable else []) + ([f"({m.fast})"] if m.fast else [])
        if cond:
            lines.append(f"    if not ({' or '.join(cond)}): c{i}(v, {name!r})")
        else:
            lines.append(f"    c{i}(v, {name!r})")
    lines.append("    return None")
    exec("\n".join(lines), env)  # noqa: S102 - the source is built from field names via repr only
    return env["check"]
