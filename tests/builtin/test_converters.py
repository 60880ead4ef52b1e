"""The built-in converters, each constructed alone: json_to_avro, select_fields, rename_fields, explode, filter."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from gobblin_py.builtin.converters.fields import ExplodeConverter, RenameFieldsConverter, SelectFieldsConverter
from gobblin_py.builtin.converters.filter import FilterConverter
from gobblin_py.builtin.converters.json_to_avro import JsonToAvroConverter
from gobblin_py.errors import ConfigError, RecordError, TaskError

EVENT_FIELDS: list[dict[str, Any]] = [
    {"name": "id", "type": "long"},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "price", "type": "double"},
    {"name": "active", "type": "boolean"},
    {"name": "country", "type": ["null", "string"], "default": None},
    {"name": "channel", "type": "string", "default": "web"},
]


def _schema(fields: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "record", "name": "Event", "namespace": "test", "fields": fields}


def _write_avsc(tmp_path: Path, fields: list[dict[str, Any]], name: str = "event.avsc") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(_schema(fields)), encoding="utf-8")
    return path


def _json_to_avro(tmp_path: Path, fields: list[dict[str, Any]] = EVENT_FIELDS) -> JsonToAvroConverter:
    path = _write_avsc(tmp_path, fields)
    return JsonToAvroConverter(JsonToAvroConverter.Settings.model_validate({"schema": str(path)}))


def _one(converter: Any, record: dict[str, Any]) -> dict[str, Any]:
    out = list(converter.convert_record(record))
    assert len(out) == 1
    return out[0]


def _millis(*args: int) -> int:
    return int(dt.datetime(*args, tzinfo=dt.UTC).timestamp()) * 1000


# --- json_to_avro -------------------------------------------------------------------------


def test_json_to_avro_coerces_csv_strings(tmp_path: Path) -> None:
    conv = _json_to_avro(tmp_path)
    out = _one(conv, {"id": " 42 ", "ts": "1767323045000", "price": "2.50", "active": "true",
                      "country": "DE", "channel": "app"})
    assert out == {"id": 42, "ts": 1767323045000, "price": 2.5, "active": True, "country": "DE", "channel": "app"}
    assert type(out["id"]) is int and type(out["price"]) is float


@pytest.mark.parametrize("text, expected", [("true", True), ("FALSE", False), ("1", True), ("0", False),
                                            ("yes", True), ("no", False)])
def test_json_to_avro_boolean_words(tmp_path: Path, text: str, expected: bool) -> None:
    conv = _json_to_avro(tmp_path)
    assert _one(conv, {"id": 1, "ts": 0, "price": 1, "active": text})["active"] is expected


def test_json_to_avro_passes_native_json_values(tmp_path: Path) -> None:
    conv = _json_to_avro(tmp_path)
    out = _one(conv, {"id": 7, "ts": 5, "price": 3, "active": False})
    assert out["id"] == 7 and out["price"] == 3.0 and type(out["price"]) is float and out["active"] is False


@pytest.mark.parametrize("text, expected", [
    ("2026-01-02T03:04:05Z", _millis(2026, 1, 2, 3, 4, 5)),
    ("2026-01-02T03:04:05", _millis(2026, 1, 2, 3, 4, 5)),            # naive = UTC
    ("2026-01-02T04:04:05+01:00", _millis(2026, 1, 2, 3, 4, 5)),
    ("2026-01-02T03:04:05.123Z", _millis(2026, 1, 2, 3, 4, 5) + 123),
    ("1987-02-25T16:03:09.027Z", 541267389027),  # through a float it was …026: a millisecond silently lost
    ("2106-03-23T02:20:09.440Z", 4298754009440),
    ("1900-10-09T16:13:59.688Z", -2184651960312),
    ("1969-12-31T23:59:59.9995Z", -1),  # below a millisecond: towards the past, as fastavro encodes a datetime
])
def test_json_to_avro_iso_timestamp_to_epoch_millis(tmp_path: Path, text: str, expected: int) -> None:
    conv = _json_to_avro(tmp_path)
    assert _one(conv, {"id": 1, "ts": text, "price": 1, "active": True})["ts"] == expected


def test_json_to_avro_nullable_empty_string_is_none_and_defaults_fill_missing(tmp_path: Path) -> None:
    conv = _json_to_avro(tmp_path)
    out = _one(conv, {"id": "1", "ts": "0", "price": "1", "active": "0", "country": ""})
    assert out["country"] is None
    assert out["channel"] == "web"  # missing → the schema default


def test_json_to_avro_drops_fields_not_in_schema(tmp_path: Path) -> None:
    conv = _json_to_avro(tmp_path)
    out = _one(conv, {"id": 1, "ts": 0, "price": 1.0, "active": True, "extra": "x"})
    assert set(out) == {f["name"] for f in EVENT_FIELDS}


def test_json_to_avro_schema_is_the_avsc(tmp_path: Path) -> None:
    conv = _json_to_avro(tmp_path)
    assert conv.convert_schema({"type": "json"}) == _schema(EVENT_FIELDS)


@pytest.mark.parametrize("field, value, described", [
    ("id", "abc", "long"),
    ("id", "1.5", "long"),
    ("id", True, "long"),
    ("price", "cheap", "double"),
    ("active", "maybe", "boolean"),
    ("ts", "yesterday", "timestamp-millis"),
    ("country", 5, "null | string"),
])
def test_json_to_avro_mismatch_is_record_error_naming_field_and_value(tmp_path: Path, field: str, value: Any,
                                                                       described: str) -> None:
    conv = _json_to_avro(tmp_path)
    record = {"id": 1, "ts": 0, "price": 1.0, "active": True, field: value}
    with pytest.raises(RecordError) as info:
        list(conv.convert_record(record))
    assert info.value.field == field
    assert repr(field) in str(info.value)
    assert repr(value) in str(info.value)
    assert described in str(info.value)


def test_json_to_avro_missing_required_field_is_record_error(tmp_path: Path) -> None:
    conv = _json_to_avro(tmp_path)
    with pytest.raises(RecordError, match=r"field 'price' is missing") as info:
        list(conv.convert_record({"id": 1, "ts": 0, "active": True}))
    assert info.value.field == "price"


def test_json_to_avro_bad_schema_file_is_refused_by_its_settings_naming_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.avsc"
    path.write_text('{"type": "record", "name": "X", "fields": [', encoding="utf-8")
    with pytest.raises(ValidationError, match=r"broken.avsc: not a valid Avro schema"):
        JsonToAvroConverter.Settings.model_validate({"schema": str(path)})


def test_json_to_avro_schema_file_broken_after_validation_is_config_error_naming_file(tmp_path: Path) -> None:
    path = _write_avsc(tmp_path, EVENT_FIELDS, "later.avsc")
    settings = JsonToAvroConverter.Settings.model_validate({"schema": str(path)})
    path.write_text('{"type": "record", "name": "X", "fields": [{"name": "a", "type": "strng"}]}', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"later.avsc: not a valid Avro schema: unknown type 'strng'"):
        JsonToAvroConverter(settings)


@pytest.mark.parametrize(("field", "value"), [("id", 2**63), ("id", -(2**63) - 1), ("id", 1e19), ("id", "10000000000000000000"),
                                              ("ts", 2**64), ("ts", "99999999999999999999")])
def test_json_to_avro_long_beyond_64_bits_is_record_error_naming_field_and_value(tmp_path: Path, field: str, value: Any) -> None:
    conv = _json_to_avro(tmp_path)
    record = {"id": 1, "ts": 0, "price": 1.0, "active": True, field: value}
    with pytest.raises(RecordError) as info:
        conv.map_record(record)
    assert info.value.field == field and f"field {field!r}: {value!r} is not a valid" in str(info.value)


def test_json_to_avro_longs_at_the_limits_pass(tmp_path: Path) -> None:
    conv = _json_to_avro(tmp_path)
    out = conv.map_record({"id": 2**63 - 1, "ts": -(2**63), "price": 1.0, "active": True})
    assert (out["id"], out["ts"]) == (2**63 - 1, -(2**63))


def test_json_to_avro_float_beyond_32_bits_is_record_error_not_infinity(tmp_path: Path) -> None:
    conv = _json_to_avro(tmp_path, [{"name": "f", "type": "float"}])
    assert conv.map_record({"f": 3.0e38}) == {"f": 3.0e38}
    with pytest.raises(RecordError, match=r"'f': 1e\+39 is not a valid float"):
        conv.map_record({"f": 1e39})


def test_json_to_avro_unknown_fields_are_counted_with_their_names(tmp_path: Path) -> None:
    conv = _json_to_avro(tmp_path)
    base = {"id": 1, "ts": 0, "price": 1.0, "active": True}
    conv.map_record(base)
    conv.map_record({**base, "channel": "app"})  # a known field with a default: nothing unknown
    assert conv.counters() == {}
    conv.map_record({**base, "extra": 1, "more": 2})
    conv.map_record({**base, "country": "FR", "extra": 3})  # as many keys as known fields (channel missing), one unknown
    counter = conv.counters()["unknown_fields_dropped"]
    assert (counter.count, counter.examples) == (3, ["extra", "more"])


def test_json_to_avro_unknown_fields_under_fail_are_a_record_error_naming_them(tmp_path: Path) -> None:
    path = _write_avsc(tmp_path, EVENT_FIELDS)
    conv = JsonToAvroConverter(JsonToAvroConverter.Settings.model_validate({"schema": str(path), "on_unknown_fields": "fail"}))
    with pytest.raises(RecordError, match="fields not in the schema: extra, more"):
        conv.map_record({"id": 1, "ts": 0, "price": 1.0, "active": True, "extra": 1, "more": 2})


def test_json_to_avro_array_field_passes_through(tmp_path: Path) -> None:
    conv = _json_to_avro(tmp_path, [{"name": "tags", "type": {"type": "array", "items": "string"}}])
    assert _one(conv, {"tags": ["a", "b"]}) == {"tags": ["a", "b"]}


def test_json_to_avro_multi_type_union_passes_through(tmp_path: Path) -> None:
    conv = _json_to_avro(tmp_path, [{"name": "v", "type": ["null", "long", "string"]}])
    assert _one(conv, {"v": 5}) == {"v": 5}


def test_json_to_avro_int_out_of_range_is_record_error(tmp_path: Path) -> None:
    conv = _json_to_avro(tmp_path, [{"name": "n", "type": "int"}])
    with pytest.raises(RecordError):
        list(conv.convert_record({"n": 2**40}))


# --- select_fields / rename_fields --------------------------------------------------------


def test_select_fields_keeps_listed_fields_in_order() -> None:
    conv = SelectFieldsConverter(SelectFieldsConverter.Settings.model_validate({"fields": ["price", "id"]}))
    schema = conv.convert_schema(_schema(EVENT_FIELDS))
    assert [f["name"] for f in schema["fields"]] == ["price", "id"]
    assert schema["name"] == "Event"
    out = _one(conv, {"id": 1, "ts": 2, "price": 3.0})
    assert list(out.items()) == [("price", 3.0), ("id", 1)]


def test_select_fields_unknown_field_fails_the_schema() -> None:
    conv = SelectFieldsConverter(SelectFieldsConverter.Settings.model_validate({"fields": ["id", "nope"]}))
    with pytest.raises(TaskError, match="nope"):
        conv.convert_schema(_schema(EVENT_FIELDS))


def test_rename_fields_renames_schema_and_record() -> None:
    conv = RenameFieldsConverter(RenameFieldsConverter.Settings.model_validate({"mapping": {"ts": "event_time"}}))
    schema = conv.convert_schema(_schema(EVENT_FIELDS))
    assert [f["name"] for f in schema["fields"]] == ["id", "event_time", "price", "active", "country", "channel"]
    assert schema["fields"][1]["type"] == {"type": "long", "logicalType": "timestamp-millis"}
    assert _one(conv, {"id": 1, "ts": 99}) == {"id": 1, "event_time": 99}


# --- explode ------------------------------------------------------------------------------


def _explode() -> ExplodeConverter:
    return ExplodeConverter(ExplodeConverter.Settings.model_validate({"field": "tags"}))


def test_explode_one_record_per_element() -> None:
    out = list(_explode().convert_record({"id": 1, "tags": ["a", "b", "c"]}))
    assert out == [{"id": 1, "tags": "a"}, {"id": 1, "tags": "b"}, {"id": 1, "tags": "c"}]


def test_explode_empty_list_drops_the_record() -> None:
    assert list(_explode().convert_record({"id": 1, "tags": []})) == []


@pytest.mark.parametrize("value", ["a", None, {"k": 1}])
def test_explode_non_list_is_record_error(value: Any) -> None:
    with pytest.raises(RecordError, match="tags") as info:
        list(_explode().convert_record({"id": 1, "tags": value}))
    assert info.value.field == "tags"


def test_explode_schema_uses_the_items_type() -> None:
    schema = _schema([{"name": "id", "type": "long"}, {"name": "tags", "type": {"type": "array", "items": "string"}}])
    out = _explode().convert_schema(schema)
    assert out["fields"][1] == {"name": "tags", "type": "string"}
    assert schema["fields"][1]["type"]["type"] == "array"  # the input schema is not mutated


def test_explode_schema_refuses_a_non_array_field() -> None:
    with pytest.raises(TaskError, match="tags"):
        _explode().convert_schema(_schema([{"name": "tags", "type": "string"}]))


# --- filter -------------------------------------------------------------------------------


def _filter(**settings: Any) -> FilterConverter:
    return FilterConverter(FilterConverter.Settings.model_validate(settings))


def _kept(conv: FilterConverter, records: list[dict[str, Any]]) -> list[Any]:
    return [r["id"] for rec in records for r in conv.convert_record(rec)]


RECORDS = [
    {"id": 1, "kind": "click", "amount": 5},
    {"id": 2, "kind": "order", "amount": 50},
    {"id": 3, "kind": "view", "amount": None},
    {"id": 4, "kind": "order"},
]


@pytest.mark.parametrize("settings, kept", [
    ({"field": "kind", "value": "order"}, [1, 3]),                                   # default op eq, action drop
    ({"field": "kind", "value": "order", "action": "keep"}, [2, 4]),
    ({"field": "kind", "op": "ne", "value": "order"}, [2, 4]),
    ({"field": "amount", "op": "gt", "value": 10}, [1, 3, 4]),                        # None > 10 does not match
    ({"field": "amount", "op": "ge", "value": 5, "action": "keep"}, [1, 2]),
    ({"field": "amount", "op": "lt", "value": 10, "action": "keep"}, [1]),
    ({"field": "kind", "op": "in", "value": ["click", "view"]}, [2, 4]),
    ({"field": "kind", "op": "not_in", "value": ["click", "view"], "action": "keep"}, [2, 4]),
    ({"field": "amount", "op": "missing"}, [1, 2]),
    ({"field": "amount", "op": "present", "action": "keep"}, [1, 2]),
])
def test_filter_ops(settings: dict[str, Any], kept: list[int]) -> None:
    conv = _filter(**settings)
    assert _kept(conv, RECORDS) == kept
    assert conv.convert_schema({"type": "json"}) == {"type": "json"}


def test_filter_refuses_unknown_op() -> None:
    with pytest.raises(ValidationError, match="op"):
        FilterConverter.Settings.model_validate({"field": "x", "op": "like"})
