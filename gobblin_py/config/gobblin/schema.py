"""Gobblin's `source.schema` → an Avro record schema for gobblin-py's `json_to_avro` converter.

`source.schema` is either an Avro record schema, used as it is, or Gobblin's JSON-intermediate schema: a list of
`{"columnName", "dataType": {"type", …}, "isNullable", "comment"}`, as `JsonIntermediateToAvroConverter` reads it.
"""

from __future__ import annotations

import json
import re
from typing import Any

_PRIMITIVE = {"string": "string", "int": "int", "long": "long", "float": "float", "double": "double",
              "boolean": "boolean", "bytes": "bytes", "null": "null"}
_TIMESTAMP = {"type": "long", "logicalType": "timestamp-millis"}
_TIME_TYPES = ("date", "timestamp")


def avro_schema(text: str, name: str, namespace: str | None) -> tuple[dict[str, Any], list[str]]:
    """The Avro schema `source.schema` describes, and the problems found (each naming the column)."""
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        return {}, [f"not valid JSON: {exc}"]
    if isinstance(parsed, dict) and parsed.get("type") == "record":
        return parsed, []
    if not isinstance(parsed, list):
        return {}, ["expected a JSON-intermediate schema (a list of {columnName, dataType}) or an Avro record schema"]
    problems: list[str] = []
    fields = [f for f in (_field(col, i, problems) for i, col in enumerate(parsed)) if f is not None]
    record: dict[str, Any] = {"type": "record", "name": _avro_name(name), "fields": fields}
    if namespace:
        record["namespace"] = ".".join(_avro_name(p) for p in namespace.split(".") if p)
    return record, problems


def _avro_name(text: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_]", "_", text) or "record"
    return cleaned if not cleaned[0].isdigit() else f"_{cleaned}"


def _field(column: Any, index: int, problems: list[str]) -> dict[str, Any] | None:
    if not isinstance(column, dict) or not isinstance(column.get("columnName"), str):
        problems.append(f"column {index}: expected an object with columnName and dataType")
        return None
    name = column["columnName"]
    avro = _type(column.get("dataType"), name, problems)
    if avro is None:
        return None
    field: dict[str, Any] = {"name": name, "type": avro}
    if str(column.get("isNullable", "false")).lower() == "true":
        field["type"], field["default"] = ["null", avro], None
    if column.get("comment"):
        field["doc"] = str(column["comment"])
    return field


def _type(data_type: Any, where: str, problems: list[str]) -> Any:
    if not isinstance(data_type, dict) or not isinstance(data_type.get("type"), str):
        problems.append(f"column {where!r}: dataType must be an object with a type")
        return None
    kind = data_type["type"].lower()
    if kind in _PRIMITIVE:
        return _PRIMITIVE[kind]
    if kind in _TIME_TYPES:
        return dict(_TIMESTAMP)
    if kind == "array":
        items = _type(_element(data_type.get("items")), f"{where}[]", problems)
        return None if items is None else {"type": "array", "items": items}
    if kind == "map":
        values = _type(_element(data_type.get("values")), f"{where}{{}}", problems)
        return None if values is None else {"type": "map", "values": values}
    if kind == "enum":
        symbols = data_type.get("symbols")
        if not isinstance(symbols, list) or not symbols:
            problems.append(f"column {where!r}: an enum needs symbols")
            return None
        return {"type": "enum", "name": _avro_name(str(data_type.get("name") or where)), "symbols": symbols}
    if kind == "record":
        nested = [f for f in (_field(c, i, problems) for i, c in enumerate(data_type.get("values") or [])) if f is not None]
        return {"type": "record", "name": _avro_name(str(data_type.get("name") or where)), "fields": nested}
    problems.append(f"column {where!r}: type {data_type['type']!r} has no Avro equivalent here "
                    "(string, int, long, float, double, boolean, bytes, date, timestamp, array, map, enum, record)")
    return None


def _element(spec: Any) -> Any:
    """An array's items or a map's values: `"string"` or a dataType object."""
    if isinstance(spec, str):
        return {"type": spec}
    if isinstance(spec, dict) and "dataType" in spec:
        return spec["dataType"]
    return spec
