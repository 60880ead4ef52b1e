"""The rules of `schema_evolution` on schemas alone (no broker, no registry): which writer versions read into an
output schema without loss, and the merge `evolve` writes."""

from __future__ import annotations

import fastavro
import pytest

from gobblin_py.builtin.sources.kafka.evolution import MergeError, fingerprint, losses, merge_versions

ORDER = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "int"}, {"name": "amount", "type": "double"},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
    {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
        {"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}}},
    {"name": "first", "type": ["null", "Line"], "default": None},
]}


def changed(**fields: object) -> dict:
    """ORDER with fields replaced (a value of None removes the field), or added at the end."""
    out = []
    for f in ORDER["fields"]:
        if f["name"] in fields:
            if fields[f["name"]] is not None:
                out.append({"name": f["name"], **fields[f["name"]]})  # type: ignore[dict-item]
        else:
            out.append(f)
    out += [{"name": n, **v} for n, v in fields.items() if v is not None and n not in {f["name"] for f in ORDER["fields"]}]  # type: ignore[dict-item]
    return {**ORDER, "fields": out}


def test_compatible_changes_read_without_loss_and_incompatible_ones_say_what_is_lost() -> None:
    assert losses(ORDER, changed(id={"type": "long"}, note={"type": ["null", "string"], "default": None})) == []
    assert losses(ORDER, changed(amount=None)) == ["field amount would be dropped"]
    assert losses(ORDER, changed(amount={"type": "float"})) == ["amount: double would be narrowed to float"]
    assert losses(ORDER, changed(region={"type": "string"})) == ["field region has no default for values without it"]
    assert losses(ORDER, changed(kind={"type": {"type": "enum", "name": "Kind", "symbols": ["A"]}})) == [
        "kind: enum symbol(s) B would be lost"]
    fewer = changed(lines={"type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
        {"name": "sku", "type": "string"}]}}})
    assert losses(ORDER, fewer) == ["field lines[].qty would be dropped"]
    assert losses(ORDER, changed(id={"type": "string"})) == ["id: int cannot be read as string"]


def test_the_merge_holds_every_version_whole_and_is_named_by_its_content() -> None:
    newer = changed(amount={"type": "float"}, kind={"type": {"type": "enum", "name": "Kind", "symbols": ["C", "A"]}},
                    first=None, region={"type": "string"})
    out = merge_versions([("v1", ORDER), ("v2", newer)])
    fastavro.parse_schema(out)  # a valid schema: the named type Line defined once, referenced after
    assert losses(ORDER, out) == [] and losses(newer, out) == []
    fields = {f["name"]: f for f in out["fields"]}
    assert [f["name"] for f in out["fields"]] == ["id", "amount", "kind", "lines", "region", "first"]
    assert fields["amount"]["type"] == "double"  # the wider type kept
    assert fields["region"] == {"name": "region", "type": ["null", "string"], "default": None}
    assert fields["kind"]["type"]["symbols"] == ["C", "A", "B"]
    assert fields["first"]["type"] == ["null", "shop.Line"] and fields["first"]["default"] is None
    again = merge_versions([("v1", ORDER), ("v2", newer)])
    assert again == out and fingerprint(again) == fingerprint(out) and len(fingerprint(out)) == 32


def test_types_no_schema_reads_both_of_name_the_versions_and_the_field() -> None:
    with pytest.raises(MergeError, match=r"v2 and the merge of v1: amount: double and record shop.Money cannot be merged"):
        merge_versions([("v1", ORDER), ("v2", changed(amount={"type": {"type": "record", "name": "Money", "fields": [
            {"name": "cents", "type": "long"}]}}))])


def _ts(logical: str | None) -> dict:
    field_type = {"type": "long", "logicalType": logical} if logical else "long"
    return {"type": "record", "name": "E", "fields": [{"name": "id", "type": "int"}, {"name": "at", "type": field_type}]}


def test_the_merge_keeps_a_fields_logical_type_and_refuses_to_change_what_its_numbers_mean() -> None:
    older = {**_ts("timestamp-millis"), "fields": [*_ts("timestamp-millis")["fields"], {"name": "gone", "type": "string"}]}
    merged = merge_versions([("version 1", older), ("version 2", _ts("timestamp-millis"))])
    at = next(f for f in merged["fields"] if f["name"] == "at")
    assert at["type"] == {"type": "long", "logicalType": "timestamp-millis"}  # still an instant, not a bare long
    gone = next(f for f in merged["fields"] if f["name"] == "gone")
    assert gone["type"] == ["null", "string"]
    nullable_ts = {**older, "fields": [{"name": "id", "type": "int"},
                                       {"name": "at", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
                                       {"name": "gone", "type": "string"}]}
    kept = merge_versions([("version 1", nullable_ts), ("version 2", _ts("timestamp-micros"))])  # null joins it
    branches = next(f for f in kept["fields"] if f["name"] == "at")["type"]
    assert len(branches) == 2 and "null" in branches
    assert {"type": "long", "logicalType": "timestamp-micros"} in branches
    for a, b in (("timestamp-millis", "timestamp-micros"), (None, "timestamp-millis"), ("timestamp-millis", None)):
        with pytest.raises(MergeError, match="at"):
            merge_versions([("version 1", {**_ts(a), "fields": [*_ts(a)["fields"], {"name": "g", "type": "int"}]}),
                            ("version 2", _ts(b))])


def test_a_field_added_without_a_default_stays_nullable_when_a_later_version_keeps_it() -> None:
    """v2 adds `region` without a default (null for v1's values in the merge); v3 keeps it, still without a default,
    and adds a field with one. The merge of all three refused ("version v1: field region has no default for values
    without it"), so every run of an `evolve` topic failed at planning (found by the registry world's soak)."""
    v2 = changed(region={"type": "string"})
    v3 = changed(region={"type": "string"}, note={"type": "string", "default": ""})
    out = merge_versions([("v1", ORDER), ("v2", v2), ("v3", v3)])
    fastavro.parse_schema(out)
    assert all(losses(v, out) == [] for v in (ORDER, v2, v3))
    fields = {f["name"]: f for f in out["fields"]}
    assert fields["region"] == {"name": "region", "type": ["null", "string"], "default": None}
    assert fields["note"]["default"] == ""
