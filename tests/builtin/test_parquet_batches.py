"""The parquet writer's Arrow batches, split by partition through `PartitionedFiles.split` as the avro writer's: a
batch it takes lands in the files, with the bytes, the row path gives its rows; one it cannot place so is handed back
with nothing written."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from gobblin_py.api import WriterTarget
from gobblin_py.api.batches import ROW_VALUES
from gobblin_py.builtin.schemas.arrow import ArrowMapping
from gobblin_py.builtin.writers.parquet import ParquetWriter

UTC = dt.UTC
HOUR = {"column": "ts", "granularity": "HOUR", "pattern": "yyyy/MM/dd/HH"}
EDGE = dt.datetime(2026, 1, 1, tzinfo=UTC)  # an hour's, a day's and a year's edge at once


def _schema(unit: str) -> dict[str, Any]:
    return {"type": "record", "name": "E", "fields": [
        {"name": "id", "type": "long"},
        {"name": "ts", "type": {"type": "long", "logicalType": f"timestamp-{unit}"}},
        {"name": "note", "type": ["null", "string"], "default": None}]}


def _rows(unit: str) -> list[dict[str, Any]]:
    """Rows either side of an hour's edge, to the unit's last tick: epoch millis (a Kafka row's values) or
    datetimes (a database row's values)."""
    offsets = [dt.timedelta(microseconds=-1), dt.timedelta(0), dt.timedelta(microseconds=999),
               dt.timedelta(hours=-1), dt.timedelta(hours=1, seconds=-1), dt.timedelta(hours=5)]
    times = [EDGE + o for o in offsets]
    values: list[Any] = times if unit == "micros" else [int(t.timestamp() * 1000) for t in times]
    return [{"id": i, "ts": v, "note": None if i % 2 else f"n{i}"} for i, v in enumerate(values)]


def _batch(unit: str, rows: list[dict[str, Any]], datetimes: bool) -> pa.RecordBatch:
    """The rows as an extractor's Arrow batch; `datetimes` marks the time column as the jdbc extractor does."""
    schema = ArrowMapping(_schema(unit)).schema
    if datetimes:
        schema = pa.schema([f.with_metadata({ROW_VALUES: b"datetime"}) if f.name == "ts" else f for f in schema])
    return pa.RecordBatch.from_pylist(rows, schema=schema)


def _writer(tmp: Path, unit: str, **settings: Any) -> ParquetWriter:
    writer = ParquetWriter(ParquetWriter.Settings.model_validate({"partition": HOUR, "row_group_records": 4, **settings}))
    writer.open(_schema(unit), WriterTarget(staging_dir=tmp / "staging", task_output_dir=tmp / "out", rel_dir="ds",
                                            file_stem="wu"))
    return writer


def _files(tmp: Path, writer: ParquetWriter) -> dict[str, tuple[int, bytes]]:
    return {str(p.relative_to(tmp / "staging")): (n, p.read_bytes()) for p, n in writer.close()}


@pytest.mark.parametrize("unit,datetimes,roll", [("millis", False, None), ("micros", True, None),
                                                 ("micros", True, {"max_records": 2})],
                         ids=["kafka-millis", "jdbc-micros", "jdbc-micros-rolled"])
def test_a_batch_lands_in_the_row_paths_files_byte_for_byte(tmp_path: Path, unit: str, datetimes: bool,
                                                             roll: dict[str, int] | None) -> None:
    rows = _rows(unit)
    columnar = _writer(tmp_path / "c", unit, roll=roll)
    assert columnar.write_batch(_batch(unit, rows, datetimes))
    by_row = _writer(tmp_path / "r", unit, roll=roll)
    for r in rows:
        by_row.write(r)
    written, expected = _files(tmp_path / "c", columnar), _files(tmp_path / "r", by_row)
    assert sorted(Path(k).parent.as_posix() for k in expected) >= ["ds/2025/12/31/22", "ds/2025/12/31/23",
                                                                   "ds/2026/01/01/00", "ds/2026/01/01/05"]
    assert written == expected  # same names, counts and bytes


def test_a_batch_it_cannot_place_as_the_row_path_is_handed_back_with_nothing_written(tmp_path: Path) -> None:
    writer = _writer(tmp_path, "micros")
    rows = _rows("micros")
    assert not writer.write_batch(_batch("micros", rows, datetimes=False))  # micros the row path takes as integers
    before_1970 = [{"id": 0, "ts": dt.datetime(1969, 12, 31, 23, 59, 59, 999_000, tzinfo=UTC), "note": None}]
    assert not writer.write_batch(_batch("micros", before_1970, datetimes=True))  # the row path floors it
    naive = pa.schema([f.with_metadata({ROW_VALUES: b"naive-datetime"}) if f.name == "ts" else f
                       for f in _batch("micros", [], False).schema])  # placed by this machine's wall clock, row by row
    assert not writer.write_batch(pa.RecordBatch.from_pylist(rows, schema=naive))  # (marked `datetime` it is taken)
    other = pa.RecordBatch.from_pylist([{"id": 1}], schema=pa.schema([("id", pa.int64())]))
    assert not writer.write_batch(other)  # another schema
    assert writer.close() == []


@pytest.mark.parametrize("roll", [None, {"max_records": 9}], ids=["one-file-each", "rolled"])
def test_uneven_batches_and_rows_across_partitions_make_the_row_paths_row_groups(tmp_path: Path, roll: dict[str, int] | None) -> None:
    # row groups of 7 and conversions every 10 records, over 4 hours: when partitions together hold a row group is
    # when it is written, so the batches' own sizes must not decide it
    rows = [{"id": i, "ts": int((EDGE + dt.timedelta(minutes=7 * i)).timestamp() * 1000), "note": f"n{i}"} for i in range(200)]
    settings = {"row_group_records": 7, "batch_records": 10, "roll": roll}
    mixed = _writer(tmp_path / "c", "millis", **settings)
    start = 0
    for size, as_batch in [(1, True), (13, True), (3, False), (4, True), (30, True), (5, False), (60, True), (84, True)]:
        if as_batch:
            assert mixed.write_batch(_batch("millis", rows[start:start + size], datetimes=False))
        else:
            for r in rows[start:start + size]:
                mixed.write(r)
        start += size
    assert start == len(rows)
    by_row = _writer(tmp_path / "r", "millis", **settings)
    for r in rows:
        by_row.write(r)
    written, expected = _files(tmp_path / "c", mixed), _files(tmp_path / "r", by_row)
    assert len(expected) >= 4 and written == expected
