"""An Avro record schema inferred from sample records (JSON objects, CSV rows of text), for a first job's `.avsc`.

Our own code: fastavro and pyarrow infer nothing Avro-shaped from CSV text (every value is a string there), and the
rules must be the ones `json_to_avro` coerces by (text to numbers and booleans, ISO-8601 to timestamp-millis), so a
record the sample held converts under the schema written here.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

AVRO_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
TIMESTAMP = {"type": "long", "logicalType": "timestamp-millis"}
_INT = re.compile(r"^[+-]?\d+$")
_FLOAT = re.compile(r"^[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?$")
_ISO = re.compile(r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d")


def _text_kind(text: str) -> str:
    """What a CSV cell's text is: long, double, boolean, timestamp or string (json_to_avro's coercions)."""
    if _INT.match(text):
        return "long"
    if _FLOAT.match(text):
        return "double"
    if text.lower() in ("true", "false"):
        return "boolean"
    if _ISO.match(text):
        try:
            dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
            return "timestamp"
        except ValueError:
            pass
    return "string"


OUTLIERS = 0.01
"""Text that fits no type, up to this share of a field's values (and at least one), is taken for bad records (they
go to the error file at run time) rather than making the whole field a string."""


@dataclass
class _Field:
    """What the sample showed of one field: how many values of each kind, whether it was ever null or missing."""

    kinds: Counter[str] = field(default_factory=Counter)
    nullable: bool = False
    blank: bool = False  # an empty text value: CSV's null when the other values are numbers, times or booleans
    odd: list[str] = field(default_factory=list)  # text values that fit no type (examples)
    nested: _Record | None = None
    items: _Field | None = None

    def add(self, value: Any) -> None:
        if value is None:
            self.nullable = True
        elif isinstance(value, bool):
            self.kinds["boolean"] += 1
        elif isinstance(value, int):
            self.kinds["long"] += 1
        elif isinstance(value, float):
            self.kinds["double"] += 1
        elif isinstance(value, (dt.datetime, dt.date)):
            self.kinds["timestamp"] += 1
        elif isinstance(value, str):
            kind = _text_kind(value) if value else None
            if kind is None:
                self.blank = True
            else:
                self.kinds[kind] += 1
                if kind == "string" and len(self.odd) < 3:
                    self.odd.append(value)
        elif isinstance(value, Mapping):
            self.kinds["record"] += 1
            self.nested = self.nested or _Record()
            self.nested.add(value)
        elif isinstance(value, (list, tuple)):
            self.kinds["array"] += 1
            self.items = self.items or _Field()
            for item in value:
                self.items.add(item)
        else:
            self.kinds["string"] += 1

    def _typed(self) -> tuple[set[str], int]:
        """The kinds that decide the type, and how many text values were set aside as bad records."""
        kinds = set(self.kinds)
        strings, others = self.kinds["string"], sum(self.kinds.values()) - self.kinds["string"]
        if strings and others and kinds - {"string"} <= {"long", "double", "boolean", "timestamp"} \
                and strings <= max(1, OUTLIERS * (strings + others)):
            return kinds - {"string"}, strings
        return kinds, 0

    def avro(self, type_name: str, notes: list[str], path: str) -> Any:
        """This field's Avro type; `type_name` names a nested record uniquely (`Record_address`)."""
        kinds, set_aside = self._typed()
        if self.blank and not kinds:
            kinds = {"string"}
        nullable = self.nullable or (self.blank and "string" not in kinds)  # json_to_avro reads a blank cell as null
        if kinds <= {"long", "double"} and kinds:
            base: Any = "double" if "double" in kinds else "long"
        elif kinds == {"boolean"}:
            base = "boolean"
        elif kinds == {"timestamp"}:
            base = dict(TIMESTAMP)
        elif kinds == {"record"} and self.nested is not None:
            base = self.nested.avro(type_name, notes, path + ".")
        elif kinds == {"array"} and self.items is not None:
            base = {"type": "array",
                    "items": self.items.avro(type_name + "_item", notes, path + "[]") if self.items.kinds else "string"}
        else:  # text, never seen with a value, or values of several kinds: text holds each of them
            base = "string"
        if set_aside:
            shown = base if isinstance(base, str) else base.get("logicalType", base["type"])
            notes.append(f"field {path}: {set_aside} value(s) that are not {shown} (e.g. {', '.join(map(repr, self.odd))}) "
                         "taken for bad records: at run time they go to the error file")
        return ["null", base] if nullable or not kinds else base


class _Record:
    """The fields of the sampled records, in the order first seen."""

    def __init__(self) -> None:
        self.fields: dict[str, _Field] = {}
        self.records = 0

    def add(self, record: Mapping[str, Any]) -> None:
        self.records += 1
        for name in self.fields.keys() - record.keys():  # missing in this record: null there
            self.fields[name].nullable = True
        for name, value in record.items():
            if name not in self.fields:
                self.fields[name] = _Field(nullable=self.records > 1)  # missing from the records before
            self.fields[name].add(value)

    def avro(self, name: str, notes: list[str], path: str = "") -> dict[str, Any]:
        fields = []
        for fname, f in self.fields.items():
            entry: dict[str, Any] = {"name": fname, "type": f.avro(f"{name}_{fname}", notes, path + fname)}
            if isinstance(entry["type"], list):
                entry["default"] = None
            fields.append(entry)
        return {"type": "record", "name": name, "fields": fields}


def schema_text(schema: Mapping[str, Any]) -> str:
    """The schema as a person edits it: one line per field, as the shipped `.avsc` files are written."""
    head = {k: v for k, v in schema.items() if k != "fields"}
    lines = [json.dumps(head)[:-1] + ', "fields": [']
    fields = [f"    {json.dumps(f)}" for f in schema["fields"]]
    return "\n".join(lines + [",\n".join(fields), "]}"]) + "\n"


@dataclass
class Inferred:
    """The schema, how many records it was inferred from, the field names Avro cannot carry (left out), and what a
    person should check (values set aside as bad records)."""

    schema: dict[str, Any]
    records: int
    unnamed: list[str]
    notes: list[str]


def infer_schema(records: Iterable[Mapping[str, Any]], name: str = "Record", namespace: str | None = None) -> Inferred:
    """The Avro record schema every sampled record fits: a field missing or null in some is nullable (default
    null), numbers widen to double, text that is numbers, booleans or ISO-8601 times becomes those types."""
    root = _Record()
    for record in records:
        root.add(record)
    unnamed = sorted(n for n in root.fields if not AVRO_NAME.match(n))
    for n in unnamed:
        del root.fields[n]
    notes: list[str] = []
    schema = root.avro(name, notes)
    if namespace:
        schema = {"type": "record", "name": name, "namespace": namespace, "fields": schema["fields"]}
    return Inferred(schema, root.records, unnamed, notes)
