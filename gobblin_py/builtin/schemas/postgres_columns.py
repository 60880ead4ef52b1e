"""A PostgreSQL table's columns (from pg_catalog) as an Avro record schema: what the `jdbc` source and the
`postgres_cdc` source share (one mapping, so a table reads as the same Avro types through either).

smallint/integer → int, bigint → long, numeric(p,s) → decimal bytes (p,s) (unconstrained numeric → its exact text),
real/double → float/double, text/varchar/char → string, boolean, bytea → bytes, date → date, time → time-micros,
timestamp/timestamptz → timestamp-micros, uuid → string (uuid), json/jsonb → string (the JSON text), enums → string,
arrays → array of the element's type (elements nullable); a nullable column → ["null", T] with default null, so a
column added upstream later reads as null in the files written before it. Any other type is a ConfigError naming
the table and column, raised at planning, before any task.

`Column`, `check_mapped` and `avro_schema` serve every jdbc dialect (MySQL's mapping: `schemas/mysql_columns`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gobblin_py.errors import ConfigError

COLUMNS_SQL = """
SELECT a.attrelid, a.attname, a.attnotnull, t.typname, t.typtype, t.typcategory, e.typname, e.typtype, a.atttypmod,
       format_type(a.atttypid, a.atttypmod)
FROM pg_attribute a
JOIN pg_type t0 ON t0.oid = a.atttypid
JOIN pg_type t ON t.oid = CASE WHEN t0.typtype = 'd' THEN t0.typbasetype ELSE t0.oid END
LEFT JOIN pg_type e ON e.oid = t.typelem AND t.typcategory = 'A'
WHERE a.attrelid = ANY(%s::oid[]) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attrelid, a.attnum
"""

SIMPLE: dict[str, Any] = {
    "int2": "int", "int4": "int", "int8": "long", "oid": "long",
    "float4": "float", "float8": "double", "bool": "boolean",
    "text": "string", "varchar": "string", "bpchar": "string", "name": "string", "citext": "string",
    "json": "string", "jsonb": "string", "bytea": "bytes",
    "uuid": {"type": "string", "logicalType": "uuid"},
    "date": {"type": "int", "logicalType": "date"},
    "time": {"type": "long", "logicalType": "time-micros"},
    "timestamp": {"type": "long", "logicalType": "timestamp-micros"},
    "timestamptz": {"type": "long", "logicalType": "timestamp-micros"},
}
"""Types whose Avro type needs nothing from the column's modifier."""

TEXT_LOADED = ("json", "jsonb", "uuid")
"""Types read as their text (JSON text, the UUID's canonical form) rather than as Python objects: selected `::text`."""

AVRO_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Column:
    name: str
    not_null: bool
    type_name: str  # the base type's pg_type.typname (a domain resolved to its base)
    declared: str  # format_type: what `\d table` shows
    avro: Any  # the Avro type, without the null branch; None: no mapping
    cast: str | None  # the dialect's: PostgreSQL selects `col::text` (`::text[]`: arrays) for unconstrained numeric, json,
    # jsonb, uuid, enums; MySQL names the Python conversion of the driver's value (mysql.CONVERT)


def _numeric(typmod: int) -> tuple[int, int] | None:
    """(precision, scale) of numeric(p,s); None when unconstrained or with a negative scale (no Avro decimal)."""
    if typmod < 4:
        return None
    precision, scale = ((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0x7FF
    return None if scale > 1000 else (precision, scale)  # scale stored as 11-bit two's complement since PG 15


def _avro_type(typname: str, typtype: str, typmod: int) -> tuple[Any, bool] | None:
    """(Avro type, read as its text) of a scalar type, or None when it has no mapping."""
    if typname in SIMPLE:
        return SIMPLE[typname], typname in TEXT_LOADED
    if typname == "numeric":
        ps = _numeric(typmod)
        return ({"type": "bytes", "logicalType": "decimal", "precision": ps[0], "scale": ps[1]}, False) if ps else ("string", True)
    if typtype == "e":
        return "string", True
    return None


def read_columns(conn: Any, table_oid: int) -> list[Column]:
    """Every column of the table with its Avro type (None where it has none: see `check_mapped`)."""
    return read_columns_of(conn, [table_oid]).get(table_oid, [])


def read_columns_of(conn: Any, table_oids: list[int]) -> dict[int, list[Column]]:
    """`read_columns` of many tables in one catalog query (a CDC source plans every table of a publication)."""
    out: dict[int, list[Column]] = {oid: [] for oid in table_oids}
    for oid, name, not_null, typname, typtype, category, elem, elem_type, typmod, declared in conn.execute(
            COLUMNS_SQL, (list(table_oids),)):
        if category == "A" and elem is not None:
            mapped = _avro_type(elem, elem_type, typmod)
            avro = {"type": "array", "items": ["null", mapped[0]]} if mapped is not None else None
            column = Column(name, not_null, typname, declared, avro, "text[]" if mapped is not None and mapped[1] else None)
        else:
            avro, as_text = _avro_type(typname, typtype, typmod) or (None, False)
            column = Column(name, not_null, typname, declared, avro, "text" if as_text else None)
        out.setdefault(int(oid), []).append(column)
    return out


LEAVE_OUT = ("leave it out with source.tables[].columns, or select it renamed in a view",
             "leave it out with source.tables[].columns, or select it cast (to text, say) in a view")
"""The jdbc source's way out of a bad name and of an unmapped type (`check_mapped`'s default)."""


def check_mapped(table: str, columns: list[Column], remedies: tuple[str, str] = LEAVE_OUT) -> None:
    """A selected column without an Avro type or name is a ConfigError naming table and column, and the way out
    (`remedies`: for a bad name, for an unmapped type)."""
    for c in columns:
        if not AVRO_NAME.match(c.name):
            raise ConfigError(f"table {table}: column {c.name!r} is not a valid Avro field name (letters, digits and _, not "
                              f"starting with a digit); {remedies[0]}")
        if c.avro is None:
            raise ConfigError(f"table {table}: column {c.name!r} has type {c.declared}, which has no Avro mapping; {remedies[1]}")


def avro_schema(table: str, columns: list[Column], namespace: str = "gobblin_py.jdbc") -> dict[str, Any]:
    """The Avro record of the selected columns; nullable ones are ["null", T] with default null."""
    fields = []
    for c in columns:
        if c.not_null:
            fields.append({"name": c.name, "type": c.avro})
        else:
            fields.append({"name": c.name, "type": ["null", c.avro], "default": None})
    name = re.sub(r"[^A-Za-z0-9_]", "_", table)
    return {"type": "record", "name": name if AVRO_NAME.match(name) else f"t_{name}", "namespace": namespace,
            "fields": fields}
