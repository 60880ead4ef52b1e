"""The flat Avro schemas `json_to_avro`'s Arrow readers (`json_arrow`, `csv_arrow`) take, field by field: each one's
kind, whether null is allowed and its default, and the one cast both need of timestamp text.

Only long, int, double, boolean, string and timestamp-millis fields (nullable or not) are flat; a schema with any
other field keeps to the row path, whose coercions (`json_to_avro`) are what these readers must reproduce.
"""

from __future__ import annotations

from typing import Any

from gobblin_py.builtin.schemas.arrow import arrow_mapping
from gobblin_py.errors import ConfigError

_PLAIN = {"long", "int", "double", "boolean", "string"}
_TIMESTAMPS = {"timestamp-millis", "local-timestamp-millis"}
NO_DEFAULT = object()
"""The default of a field that has none."""
ISO = (r"^(?:000[1-9]|00[1-9]\d|0[1-9]\d{2}|[1-9]\d{3})-\d{2}-\d{2}"
       r"(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,3})?)?(?:Z|[+-]\d{2}:\d{2})?)?$")
"""ISO-8601 text that Python's `fromisoformat` (the row path) and Arrow's cast read as the same instant."""
_ZONED = r"(?:Z|[+-]\d{2}:\d{2})$"


def _kind(avro_type: Any) -> tuple[str | None, bool]:
    """('long' | 'int' | 'double' | 'boolean' | 'string' | 'timestamp' | None when not flat, whether null is allowed)."""
    nullable = False
    if isinstance(avro_type, list):
        rest = [t for t in avro_type if t != "null"]
        nullable = len(rest) < len(avro_type)
        if len(rest) != 1:
            return None, nullable
        avro_type = rest[0]
    if isinstance(avro_type, dict):
        logical, base = avro_type.get("logicalType"), avro_type.get("type")
        if logical in _TIMESTAMPS and base == "long":
            return "timestamp", nullable
        if logical is None and base in _PLAIN:
            return base, nullable
        return None, nullable
    return (avro_type if avro_type in _PLAIN else None), nullable


class FlatField:
    """One field of a flat schema: its name, position, kind, whether null is allowed and its default (`NO_DEFAULT`)."""

    __slots__ = ("default", "index", "kind", "name", "nullable")

    def __init__(self, name: str, index: int, kind: str, nullable: bool, default: Any) -> None:
        self.name, self.index, self.kind, self.nullable, self.default = name, index, kind, nullable, default

    @property
    def has_default(self) -> bool:
        """Whether the row path puts a value other than null in place of a missing or null value."""
        return self.default is not NO_DEFAULT and self.default is not None


def flat_fields(avro_schema: dict[str, Any]) -> tuple[Any, list[FlatField]] | None:
    """(the Arrow schema of `avro_schema` (`ArrowMapping`), its fields) when the schema is flat; None when it is
    not, when pyarrow is missing, or when Arrow cannot hold a type: the row path then says why."""
    try:
        target = arrow_mapping(avro_schema).schema
    except (ImportError, ConfigError):
        return None
    fields = []
    for i, field in enumerate(avro_schema.get("fields", [])):
        kind, nullable = _kind(field.get("type"))
        if kind is None:
            return None
        fields.append(FlatField(field["name"], i, kind, nullable, field.get("default", NO_DEFAULT)))
    return target, fields


def iso_millis(text: Any, target: Any, checked: bool = False) -> Any | None:
    """A string array of timestamps as `target` (a timestamp-millis type), when every value is ISO text of the form
    `ISO` (already shown by the caller when `checked`), all with a zone or all without (read as UTC); None otherwise:
    the row path reads or refuses the text."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if text.null_count == len(text):
        return pa.nulls(len(text), target)
    if not checked and not pc.all(pc.match_substring_regex(text, ISO)).as_py():
        return None
    if pc.all(pc.ends_with(text, "Z")).as_py():  # the usual case, told without a regular expression: of the ISO
        unit = pa.timestamp("ms", "UTC")  # form, only zoned text ends in "Z"
    else:
        zoned = pc.match_substring_regex(text, _ZONED)
        if pc.all(zoned).as_py():
            unit = pa.timestamp("ms", "UTC")
        elif not pc.any(zoned).as_py():
            unit = pa.timestamp("ms")
        else:
            return None
    try:
        return text.cast(unit).cast(pa.int64()).cast(target)
    except (pa.ArrowException, ValueError):  # a date Arrow cannot hold; the row path says what it makes of it
        return None
