"""The `converters:` and `quality:` sections of a translated Gobblin job, for the job or one fork branch.

The record steps between source and writer; a converter that parses the source's text is noted for the source."""

from __future__ import annotations

from typing import Any

from gobblin_py.config.gobblin.draft import Draft
from gobblin_py.config.gobblin.mapping import CLASSES, INJECTED_SCHEMA, Parse, Role, canonical_class
from gobblin_py.config.gobblin.schema import avro_schema


def converters_section(d: Draft, key: str, pre_fork: bool) -> list[dict[str, Any]]:
    """The converters `key` (converter.classes, or .N for branch N) names; `pre_fork`: before any fork."""
    out: list[dict[str, Any]] = []
    for raw in d.p.listed(key):
        mapped = CLASSES.get(canonical_class(raw))
        if mapped is None or mapped.role is not Role.CONVERTER or (mapped.becomes is None and mapped.parses is None):
            why = mapped.note if mapped is not None and mapped.role is Role.CONVERTER else "gobblin-py has no equivalent"
            d.p.problem(key, f"unsupported Gobblin converter class {raw!r}: {why}")
            continue
        d.note(mapped)
        if mapped.injects_schema:
            if any(c["class"] == "json_to_avro" for c in out):
                d.p.problem(key, f"{raw!r} must come before JsonIntermediateToAvroConverter, which writes the "
                                    "schema it injects")
            d.schema_key = INJECTED_SCHEMA
            continue
        if mapped.parses is not None:
            if mapped.parses is Parse.NOTHING:
                continue
            if not pre_fork or out:
                d.p.problem(key, f"{raw!r} parses the source's text, so it must come first in converter.classes")
            d.parse = mapped.parses
            continue
        if mapped.becomes == "json_to_avro":
            out.append(_json_to_avro(d, key))
        elif mapped.becomes == "select_fields":
            fields = d.p.listed("converter.avro.fields")
            if not fields or any("." in f for f in fields):
                d.p.problem("converter.avro.fields" if fields else key,
                            "AvroFieldsPickConverter needs converter.avro.fields: top-level field names")
            out.append({"class": "select_fields", "fields": fields})
    return out


def _json_to_avro(d: Draft, key: str) -> dict[str, Any]:
    converter: dict[str, Any] = {"class": "json_to_avro", "schema": None}
    for fmt in ("converter.avro.date.format", "converter.avro.timestamp.format", "converter.avro.time.format"):
        if d.p.get(fmt) is not None:
            d.p.problem(fmt, "date and time patterns are not supported: gobblin-py reads ISO-8601 text or epoch millis")
    text = d.p.get(d.schema_key)
    if text is None:
        d.p.problem(key, f"JsonIntermediateToAvroConverter needs {d.schema_key} (JSON-intermediate or an Avro "
                            "record schema)")
        return converter
    table = d.p.settings.get("extract.table.name")
    name = table.value if table else (d.p.settings["job.name"].value if "job.name" in d.p.settings else "record")
    namespace = d.p.settings.get("extract.namespace")
    schema, problems = avro_schema(text, name, namespace.value if namespace else None)
    for problem in problems:
        d.p.problem(d.schema_key, problem)
    if not problems:
        d.out.schemas.append((converter, schema, name))
    return converter


def quality_section(d: Draft, branch: int | None, path: str) -> dict[str, Any]:
    """The `quality:` section of the job (branch None) or of fork branch N, from qualitychecker.* keys."""
    section: dict[str, Any] = {}
    for level, role in (("row", Role.ROW_POLICY), ("task", Role.TASK_POLICY)):
        key = d.p.branch_key(f"qualitychecker.{level}.policies", branch)
        types_key = d.p.branch_key(f"qualitychecker.{level}.policy.types", branch)
        classes, types = d.p.listed(key), d.p.listed(types_key)
        if not classes:
            continue
        if len(types) != len(classes):
            d.p.problem(types_key, f"names {len(types)} type(s) for the {len(classes)} policies of {key}")
            continue
        policies = []
        for raw, kind in zip(classes, types):
            mapped = CLASSES.get(canonical_class(raw))
            if mapped is None or mapped.role is not role or mapped.becomes is None:
                why = mapped.note if mapped is not None and mapped.role is role else f"gobblin-py has no such {role.value}"
                d.p.problem(key, f"unsupported Gobblin {role.value} class {raw!r}: {why}")
                continue
            d.note(mapped)
            policy: dict[str, Any] = {"class": mapped.becomes, "type": kind.upper()}
            if mapped.becomes == "row_count_range":
                spread = d.p.get("qualitychecker.row.count.range")
                if spread is not None:
                    policy["range"] = spread
            policies.append(policy)
        if policies:
            section[level] = policies
            d.out.origins[f"{path}.{level}"] = d.p.where(key)
    return section
