"""Row policies (required_fields, schema_check) and task policies (row_count, row_count_range), each alone."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from gobblin_py.api import BranchStats
from gobblin_py.builtin.quality import RequiredFieldsPolicy, RowCountPolicy, RowCountRangePolicy, SchemaCheckPolicy

SCHEMA: dict[str, Any] = {
    "type": "record", "name": "Event", "namespace": "test",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "user", "type": "string"},
        {"name": "amount", "type": ["null", "double"], "default": None},
    ],
}


def _required(*fields: str) -> RequiredFieldsPolicy:
    return RequiredFieldsPolicy(RequiredFieldsPolicy.Settings.model_validate({"fields": list(fields)}))


def _schema_check(schema: Any) -> SchemaCheckPolicy:
    policy = SchemaCheckPolicy(SchemaCheckPolicy.Settings.model_validate({}))
    policy.open(schema)
    return policy


# --- required_fields ----------------------------------------------------------------------


@pytest.mark.parametrize("record", [{"id": 1, "ts": 2}, {"id": 0, "ts": 0}, {"id": False, "ts": "x", "more": None}])
def test_required_fields_pass(record: dict[str, Any]) -> None:
    assert _required("id", "ts").check(record) is None


@pytest.mark.parametrize("record, missing", [
    ({"id": 1}, "ts"),
    ({"id": 1, "ts": None}, "ts"),
    ({"id": "", "ts": 5}, "id"),
])
def test_required_fields_fail_names_the_field(record: dict[str, Any], missing: str) -> None:
    reason = _required("id", "ts").check(record)
    assert reason is not None and reason.endswith(f"missing: {missing}")


def test_required_fields_lists_every_missing_field() -> None:
    assert _required("id", "ts", "user").check({"ts": 1}) == "required fields missing: id, user"


def test_required_fields_needs_at_least_one_field() -> None:
    with pytest.raises(ValidationError, match="fields"):
        RequiredFieldsPolicy.Settings.model_validate({"fields": []})


# --- schema_check -------------------------------------------------------------------------


def test_schema_check_passes_a_conforming_record() -> None:
    assert _schema_check(SCHEMA).check({"id": 1, "user": "u1", "amount": None}) is None
    assert _schema_check(SCHEMA).check({"id": 1, "user": "u1", "amount": 2.5}) is None


@pytest.mark.parametrize("record, field", [
    ({"id": "1", "user": "u1", "amount": None}, "id"),
    ({"id": 1, "user": None, "amount": None}, "user"),
    ({"id": 1, "user": "u1", "amount": "lots"}, "amount"),
])
def test_schema_check_names_the_first_bad_field(record: dict[str, Any], field: str) -> None:
    reason = _schema_check(SCHEMA).check(record)
    assert reason is not None
    assert reason.startswith(f"field {field!r}: {record[field]!r}")


def test_schema_check_ignores_a_non_avro_schema() -> None:
    assert _schema_check({"type": "json", "source": "x.jsonl"}).check({"anything": object()}) is None


def test_schema_check_named_type_reference() -> None:
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "a", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
        {"name": "b", "type": "Kind"},
    ]}
    assert _schema_check(schema).check({"a": "A", "b": "C"}) == "field 'b': 'C' does not match the schema"


# --- row_count ----------------------------------------------------------------------------


def _row_count(**settings: Any) -> RowCountPolicy:
    return RowCountPolicy(RowCountPolicy.Settings.model_validate(settings))


def test_row_count_passes_when_every_handed_record_was_written() -> None:
    stats = BranchStats("main", records_in=10, records_written=8, rejected={"row checks": 2})
    assert _row_count().check(stats, 10) is None


def test_row_count_fails_when_records_were_lost() -> None:
    stats = BranchStats("main", records_in=10, records_written=7, rejected={"row checks": 2})
    reason = _row_count().check(stats, 10)
    assert reason == "branch main: 8 records reached the writer but 7 were written"


def test_row_count_min() -> None:
    stats = BranchStats("out", records_in=3, records_written=3)
    assert _row_count(min=3).check(stats, 3) is None
    assert _row_count(min=4).check(stats, 3) == "branch out: wrote 3 records, fewer than min 4"


# --- row_count_range ----------------------------------------------------------------------


def _range(value: float) -> RowCountRangePolicy:
    return RowCountRangePolicy(RowCountRangePolicy.Settings.model_validate({"range": value}))


@pytest.mark.parametrize("written", [95, 100, 105])
def test_row_count_range_within(written: int) -> None:
    assert _range(0.05).check(BranchStats("main", records_written=written), 100) is None


@pytest.mark.parametrize("written", [0, 94, 106])
def test_row_count_range_outside(written: int) -> None:
    reason = _range(0.05).check(BranchStats("main", records_written=written), 100)
    assert reason is not None
    assert reason.startswith(f"branch main: wrote {written} of 100 extracted records")
    assert "outside 100% ± 5%" in reason


def test_row_count_range_default_is_five_percent() -> None:
    policy = RowCountRangePolicy(RowCountRangePolicy.Settings.model_validate({}))
    assert policy.check(BranchStats("main", records_written=95), 100) is None
    assert policy.check(BranchStats("main", records_written=94), 100) is not None


def test_row_count_range_nothing_extracted_passes() -> None:
    assert _range(0.0).check(BranchStats("main", records_written=0), 0) is None
