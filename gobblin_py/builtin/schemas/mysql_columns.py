"""A MySQL/MariaDB table's columns (from information_schema) with their Avro types, and the conversion of a driver's
value to what the Avro writer takes: what the `jdbc` source and the `mysql_cdc` source share (one mapping, so a table
reads as the same Avro types through either).

tinyint/smallint/mediumint/int → int (int unsigned → long), bigint → long (bigint unsigned → decimal(20,0): exact,
and still a number), decimal(p,s) → decimal bytes (p,s), float/double → float/double, char/varchar/*text → string,
binary/varbinary/*blob → bytes, date → date, datetime/timestamp → timestamp-micros, time → time-micros, year → int,
json → string (its text), enum/set → string, bit(1) → boolean, bit(n) → long. tinyint(1) stays int: MySQL's BOOL
is only a convention there, and the column may hold 2 or -1. Any other type (geometry, vector, uuid, inet6 …) is a
ConfigError naming table and column, raised at planning.

`timestamp` is an instant (MySQL stores it as UTC): the session's time_zone is `+00:00`, so it is read as UTC.
`datetime` has no zone: its wall-clock value is written as is (read as UTC, as PostgreSQL's `timestamp`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from gobblin_py.builtin.schemas.postgres_columns import Column

COLUMNS_SQL = """
SELECT column_name, is_nullable, data_type, column_type, numeric_precision, numeric_scale
FROM information_schema.columns WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position
"""

SIMPLE: dict[str, Any] = {
    "tinyint": "int", "smallint": "int", "mediumint": "int", "year": "int",
    "float": "float", "double": "double",
    "char": "string", "varchar": "string", "tinytext": "string", "text": "string", "mediumtext": "string",
    "longtext": "string", "json": "string", "enum": "string", "set": "string",
    "binary": "bytes", "varbinary": "bytes", "tinyblob": "bytes", "blob": "bytes", "mediumblob": "bytes",
    "longblob": "bytes",
    "date": {"type": "int", "logicalType": "date"},
    "datetime": {"type": "long", "logicalType": "timestamp-micros"},
    "timestamp": {"type": "long", "logicalType": "timestamp-micros"},
    "time": {"type": "long", "logicalType": "time-micros"},
}
"""Types whose Avro type needs nothing from the column's declaration."""

CONVERTED = {"time": "time", "set": "text"}
"""Types whose driver value is converted in Python (see `mysql.convert`): TIME arrives as a timedelta."""

def _text(value: Any) -> str:
    """information_schema text (MySQL 8 may hand it over as bytes)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _avro_type(data_type: str, column_type: str, precision: Any, scale: Any) -> tuple[Any, str | None]:
    """(Avro type or None, the Python conversion of its values or None) of one column."""
    unsigned = "unsigned" in column_type
    if data_type in SIMPLE:
        return SIMPLE[data_type], CONVERTED.get(data_type)
    if data_type == "int":
        return ("long" if unsigned else "int"), None
    if data_type == "bigint":
        if unsigned:
            return {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 0}, "decimal"
        return "long", None
    if data_type == "decimal":
        return {"type": "bytes", "logicalType": "decimal", "precision": int(precision), "scale": int(scale or 0)}, None
    if data_type == "bit":
        return ("boolean", "bool") if column_type == "bit(1)" else ("long", "bits")
    return None, None


def read_columns(conn: Any, schema_name: str, table_name: str) -> list[Column]:
    """Every column of the table with its Avro type (None where it has none: see `check_mapped`)."""
    out: list[Column] = []
    with conn.cursor() as cur:
        cur.execute(COLUMNS_SQL, (schema_name, table_name))
        for name, nullable, data_type, column_type, precision, scale in cur.fetchall():
            data_type, column_type = _text(data_type).lower(), _text(column_type).lower()
            avro, convert = _avro_type(data_type, column_type, precision, scale)
            out.append(Column(_text(name), _text(nullable) == "NO", data_type, column_type, avro, convert))
    return out


def _time(value: Any) -> Any:
    """TIME arrives as a timedelta (it may be negative or over 24 h): a time of day when it is one, else left as is
    for the writer to refuse as a bad record."""
    if isinstance(value, timedelta) and timedelta(0) <= value < timedelta(days=1):
        return (datetime.min + value).time()
    return value


def _bool(value: Any) -> Any:
    """BIT(1): PyMySQL's bytes, or the binlog's text of binary digits ('0' is False: `bool('0')` is not)."""
    if isinstance(value, str):
        return _bits(value) != 0
    return any(value) if isinstance(value, (bytes, bytearray)) else bool(value)


def _bits(value: Any) -> Any:
    """BIT(n): PyMySQL's bytes (big-endian), or the binlog's text of binary digits, as its number."""
    if isinstance(value, str) and value and set(value) <= {"0", "1"}:
        return int(value, 2)
    return int.from_bytes(value, "big") if isinstance(value, (bytes, bytearray)) else value


def _decimal(value: Any) -> Any:
    return Decimal(value) if isinstance(value, int) else value


def _members(value: Any) -> Any:
    return ",".join(sorted(value)) if isinstance(value, (set, frozenset)) else value


CONVERT: dict[str, Callable[[Any], Any]] = {"time": _time, "bool": _bool, "bits": _bits, "decimal": _decimal,
                                            "text": _members}
"""`Column.cast` → the conversion of the driver's value to what the Avro writer takes."""


NATIVE_TYPES = {"tinyint", "smallint", "mediumint", "int", "bigint", "year", "float", "double", "decimal", "char",
                "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "binary", "varbinary", "tinyblob", "blob",
                "mediumblob", "longblob", "date", "datetime"}
"""The MySQL types whose ConnectorX Arrow values are the row path's values (cast, where need be, to the same type)."""


def native_reads(columns: list[Column], also: frozenset[str] = frozenset()) -> bool:
    """Whether ConnectorX reads every column exactly as PyMySQL does (the jdbc source's and mysql_cdc's native
    readers): no TIME, BIT, SET, unsigned BIGINT or JSON (converted here, or read otherwise), no decimal beyond
    ConnectorX's (38,10); `also`: types a reader has proven for itself (mysql_cdc: `timestamp`, its session in UTC)."""
    return all(c.cast is None and (c.type_name in NATIVE_TYPES or c.type_name in also) and _fits_native(c)
               for c in columns)


def _fits_native(c: Column) -> bool:
    """ConnectorX reads a decimal as decimal(38,10): exact only for a scale ≤ 10 and ≤ 28 digits before the point."""
    avro = c.avro
    if isinstance(avro, dict) and avro.get("logicalType") == "decimal":
        return avro["scale"] <= 10 and avro["precision"] - avro["scale"] <= 28
    return True
