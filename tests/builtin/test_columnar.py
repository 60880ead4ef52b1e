"""The columnar path's parts against the row path they stand in for: a batch of JSON values the reader accepts
converts to exactly what `json_to_avro` → Arrow makes of it record by record, and every value the row path would
coerce, count or refuse sends its batch back; the time partitioner splits a batch as it places each record."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.schemas import FLAT_EVENT

from gobblin_py.api import RawBatch, WriterTarget
from gobblin_py.builtin.converters.json_to_avro import JsonToAvroConverter
from gobblin_py.builtin.writers.parquet import ParquetWriter
from gobblin_py.builtin.writers.time_partitioner import PartitionSettings, TimePartitioner
from gobblin_py.errors import ConfigError

SCHEMA: dict[str, Any] = FLAT_EVENT
GOOD = b'{"id":1,"ts":1767225600000,"n":5,"user":"u1","ok":true,"amount":1.5,"country":"DE","tier":"gold"}'

# Values the row path coerces, defaults, drops-and-counts or refuses, and values that need nothing
ODD = [
    b'{"id":"17","ts":1767225600000,"n":5,"user":"u","ok":true}',               # text → long
    b'{"id":2,"ts":"2026-01-02T03:04:05Z","n":5,"user":"u","ok":true}',         # ISO timestamp
    b'{"id":3,"ts":1767225600000,"n":5,"user":"u","ok":"yes"}',                 # text → boolean
    b'{"id":4.0,"ts":1767225600000,"n":5,"user":"u","ok":true}',                # integral float → long
    b'{"id":5,"ts":1767225600000,"n":5,"user":"u","ok":true,"extra":1}',        # unknown field: dropped, counted
    b'{"id":6,"ts":1767225600000,"n":5,"user":"u","ok":true,"id":7}',           # duplicate key: the last wins
    b'{"id":8,"ts":1767225600000,"n":5,"user":"u","ok":true,"amount":NaN}',     # not JSON to orjson
    b'{"id":9,"ts":1767225600000,"n":5,"user":"u","ok":true,"amount":Infinity}',
    b'{"id":10,"ts":1767225600000,"n":3000000000,"user":"u","ok":true}',        # beyond an int
    b'{"id":11,"ts":1767225600000,"n":5,"ok":true}',                            # a required field missing
    b'{"id":12,"ts":1767225600000,"n":5,"user":null,"ok":true}',
    b'{"id":13,"ts":1767225600000,"n":5,"user":"u","ok":true,"country":""}',    # blank nullable text → null
    b'{"id":14,"ts":1767225600000,"n":5,"user":"u","ok":true,"tier":""}',       # blank → the default
    b'{"id":15,"ts":1767225600000,"n":5,"user":"u","ok":true,"tier":null}',     # null → the default
    b'{"id":16,"ts":1767225600000,"n":5,"user":"u","ok":true}',                 # missing → the default
    b'{"id":17,"ts":1767225600000,"n":5,"user":"\xff\xfe","ok":true}',          # not UTF-8
    b'{"id":18,"ts":1767225600000,"n":5,"user":"\\ud800","ok":true}',           # a lone surrogate
    ESCAPES := b'{"id":19,"ts":1767225600000,"n":5,"user":"\\u00e9\\n\\ud83d\\ude00","ok":true,"tier":"t"}',
    b'{"id":20,"ts":1767225600000,"n":5,"user":5,"ok":true}',                   # number for text
    b'{"id":21,"ts":1767225600000,"n":5,"user":"u","ok":true} {"id":22}',       # two documents in one value
    b'{"id":23,\n"ts":1767225600000,"n":5,"user":"u","ok":true}',               # a newline inside
    b' {"id":24,"ts":1767225600000,"n":5,"user":"u","ok":true} ',              # padded
    b'', b'[1,2]', b'5', b'{"id":25,', None,
    EDGES := b'{"id":26,"ts":-5,"n":-2147483648,"user":"","ok":false,"amount":-0.0,"tier":"t"}',
    INT_DOUBLE := b'{"id":27,"ts":1767225600000,"n":5,"user":"u","ok":true,"amount":7,"tier":"t"}',
]


def _converter(tmp_path: Path) -> JsonToAvroConverter:
    path = tmp_path / "e.avsc"
    path.write_text(json.dumps(SCHEMA))
    return JsonToAvroConverter(JsonToAvroConverter.Settings.model_validate({"schema": str(path)}))


def _row_path(conv: JsonToAvroConverter, values: list[bytes | None]) -> list[dict[str, Any]] | None:
    """What the row path makes of the values: the records, or None when one of them is a bad record."""
    out = []
    for v in values:
        try:
            record = orjson.loads(v)  # type: ignore[arg-type]
            if type(record) is not dict:
                return None
            out.append(conv.map_record(record))
        except Exception:  # noqa: BLE001 - the row path would reject this one
            return None
    return pa.Table.from_pylist(out, schema=conv._arrow.schema if conv._arrow else None).to_pylist()


@pytest.mark.parametrize("odd", ODD, ids=lambda v: repr(v)[:48])
def test_a_batch_the_reader_takes_is_exactly_the_row_paths_records(tmp_path: Path, odd: bytes | None) -> None:
    conv = _converter(tmp_path)
    values = [GOOD, odd, GOOD]
    batch = conv.convert_batch(RawBatch("json", values))
    expected = _row_path(conv, values)
    if batch is None:
        return  # handed back: the row path converts (or rejects) it, as the job tests show
    assert expected is not None, f"the columnar path accepted a batch the row path would not: {odd!r}"
    assert pa.Table.from_batches([batch]).to_pylist() == expected
    assert not conv.counters()  # nothing the row path would have counted


def test_the_reader_takes_clean_batches_and_hands_back_every_odd_one(tmp_path: Path) -> None:
    conv = _converter(tmp_path)
    clean = [GOOD.replace(b'"id":1', f'"id":{i}'.encode()) for i in range(1000)]
    batch = conv.convert_batch(RawBatch("json", clean))
    assert batch is not None and batch.num_rows == 1000
    assert batch.column(0).to_pylist() == list(range(1000))
    taken = [odd for odd in ODD if conv.convert_batch(RawBatch("json", [GOOD, odd])) is not None]
    assert taken == [ESCAPES, EDGES, INT_DOUBLE]  # escapes, edge values, an int for a double: they need nothing
    assert conv.convert_batch(RawBatch("string", clean)) is None  # only JSON documents


def _stamped(stamps: list[str]) -> list[bytes]:
    return [GOOD.replace(b'"ts":1767225600000', b'"ts":' + orjson.dumps(t)).replace(b'"id":1', f'"id":{i}'.encode())
            for i, t in enumerate(stamps)]


ISO_BATCHES = {
    "zoned": ["2026-01-02T03:04:05Z", "1987-02-25T16:03:09.027Z", "2026-01-02T04:04:05.5+01:00", "1969-12-31T23:59:59.999Z",
              "2026-03-29T01:30:00-05:00", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999Z", "2024-02-29 12:00Z"],
    "naive": ["2026-01-02T03:04:05", "2026-01-02", "2026-01-02 03:04", "1900-10-09T16:13:59.688"],
}


@pytest.mark.parametrize("kind", sorted(ISO_BATCHES))
def test_a_batch_of_iso_timestamps_takes_the_columnar_path_with_the_row_paths_values(tmp_path: Path, kind: str) -> None:
    conv = _converter(tmp_path)
    values = _stamped(ISO_BATCHES[kind])
    batch = conv.convert_batch(RawBatch("json", values))
    assert batch is not None, f"a batch of {kind} ISO timestamps went to the row path"
    assert pa.Table.from_batches([batch]).to_pylist() == _row_path(conv, values)
    assert conv.convert_batch(RawBatch("json", [GOOD])) is not None  # a next batch of epoch milliseconds, too


@pytest.mark.parametrize("stamps", [
    ["2026-01-02T03:04:05Z", "2026-01-02T03:04:05"],        # zoned and not: each is read alike, not both at once
    ["2026-01-02T03:04:05.1234Z"],                           # more than milliseconds
    [" 2026-01-02T03:04:05Z"],                               # padded: the row path strips it
    ["2026-02-29T00:00:00Z"],                                # no such day: the row path refuses it
    ["2026-01-02T03:04:05+0100"],                            # another offset form
    ["1767225600000"],                                       # milliseconds as text
    ["20260102T030405Z"],                                    # ISO's basic form
], ids=lambda s: s[0])
def test_iso_timestamps_outside_the_plain_form_go_to_the_row_path(tmp_path: Path, stamps: list[str]) -> None:
    conv = _converter(tmp_path)
    values = _stamped(stamps)
    assert conv.convert_batch(RawBatch("json", values)) is None


def test_a_nested_schema_never_takes_the_columnar_path(tmp_path: Path) -> None:
    nested = {"type": "record", "name": "N", "fields": [{"name": "id", "type": "long"},
                                                        {"name": "tags", "type": {"type": "array", "items": "string"}}]}
    path = tmp_path / "n.avsc"
    path.write_text(json.dumps(nested))
    conv = JsonToAvroConverter(JsonToAvroConverter.Settings.model_validate({"schema": str(path)}))
    assert conv.convert_batch(RawBatch("json", [b'{"id":1,"tags":["a"]}'])) is None


DAY0 = int(dt.datetime(2026, 1, 30, tzinfo=dt.UTC).timestamp() * 1000)


@pytest.mark.parametrize("granularity,pattern", [("DAY", "yyyy/MM/dd"), ("HOUR", "yyyy/MM/dd/HH"), ("MONTH", "yyyy/MM")])
def test_the_partitioner_splits_a_batch_as_it_places_each_record(granularity: str, pattern: str) -> None:
    part = TimePartitioner(PartitionSettings(column="ts", granularity=granularity, pattern=pattern))
    stamps = [DAY0 + i * 3_600_000 * 7 for i in range(40)]  # 40 times over ~12 days, across a month's end
    split = part.split(pa.array(stamps, pa.timestamp("ms", tz="UTC")))
    assert split is not None
    placed = {}
    for path, mask in split:
        rows = stamps if mask is None else [t for t, m in zip(stamps, mask.to_pylist()) if m]
        placed.update({t: path for t in rows})
    assert placed == {t: part.partition({"ts": t}) for t in stamps}
    # a row `partition` refuses or floors differently: the whole batch goes record by record
    assert part.split(pa.array([DAY0, None], pa.int64())) is None
    assert part.split(pa.array([DAY0, -1], pa.int64())) is None
    assert part.split(pa.array(["2026-01-01"], pa.string())) is None


def test_the_parquet_writer_keeps_rows_in_arrival_order_across_both_paths(tmp_path: Path) -> None:
    conv = _converter(tmp_path)
    writer = ParquetWriter(ParquetWriter.Settings.model_validate({"partition": {"column": "ts", "granularity": "DAY"}}))
    target = WriterTarget(staging_dir=tmp_path / "staging", task_output_dir=tmp_path / "out", rel_dir="ds",
                          file_stem="wu", dataset="ds", branch="main")
    writer.open(conv.convert_schema({}), target)
    rows = [conv.map_record(orjson.loads(GOOD.replace(b'"id":1', f'"id":{i}'.encode()))) for i in range(3)]
    for r in rows:
        writer.write(r)
    batch = conv.convert_batch(RawBatch("json", [GOOD.replace(b'"id":1', f'"id":{i}'.encode()) for i in range(3, 6)]))
    assert writer.write_batch(batch)
    writer.write(rows[0] | {"id": 6})
    other = pa.RecordBatch.from_pylist([{"id": 1}], schema=pa.schema([("id", pa.int64())]))
    assert not writer.write_batch(other)  # another schema: handed back, nothing written
    (path, count), = writer.close()
    assert count == 7
    assert pq.read_table(path).column("id").to_pylist() == list(range(7))


@pytest.mark.parametrize("columnar", [True, False])
def test_parquet_files_roll_by_records_on_both_paths_with_names_by_roll_index(tmp_path: Path, columnar: bool) -> None:
    conv = _converter(tmp_path)
    writer = ParquetWriter(ParquetWriter.Settings.model_validate({"roll": {"max_records": 400}, "row_group_records": 128}))
    target = WriterTarget(staging_dir=tmp_path / "staging", task_output_dir=tmp_path / "out", rel_dir="ds",
                          file_stem="wu", dataset="ds", branch="main")
    writer.open(conv.convert_schema({}), target)
    values = [GOOD.replace(b'"id":1', f'"id":{i}'.encode()) for i in range(1000)]
    for start in range(0, 1000, 300):  # batches that straddle the roll boundaries
        chunk = values[start:start + 300]
        if columnar:
            assert writer.write_batch(conv.convert_batch(RawBatch("json", chunk)))
        else:
            for v in chunk:
                writer.write(conv.map_record(orjson.loads(v)))
    files = writer.close()
    assert [(p.name, n) for p, n in files] == [("wu.parquet", 400), ("wu.r1.parquet", 400), ("wu.r2.parquet", 200)]
    ids = [i for p, _ in files for i in pq.read_table(p).column("id").to_pylist()]
    assert ids == list(range(1000))


def test_parquet_files_roll_by_bytes_once_their_row_groups_pass_the_size(tmp_path: Path) -> None:
    conv = _converter(tmp_path)
    writer = ParquetWriter(ParquetWriter.Settings.model_validate({"roll": {"max_bytes": "20KB"}, "row_group_records": 500,
                                                                  "compression": "none", "batch_records": 500}))
    target = WriterTarget(staging_dir=tmp_path / "staging", task_output_dir=tmp_path / "out", rel_dir="ds",
                          file_stem="wu", dataset="ds", branch="main")
    writer.open(conv.convert_schema({}), target)
    for i in range(5000):
        writer.write(conv.map_record(orjson.loads(GOOD.replace(b'"id":1', f'"id":{i}'.encode()))))
    files = writer.close()
    assert len(files) > 1 and sum(n for _, n in files) == 5000
    ids = [i for p, _ in files for i in pq.read_table(p).column("id").to_pylist()]
    assert ids == list(range(5000))
    for p, _ in files[:-1]:  # each full file passed the size by less than one row group
        assert 20_000 <= p.stat().st_size < 20_000 + 500 * 60


def test_parquet_dictionary_encodes_text_columns_by_default_and_what_it_is_told(tmp_path: Path) -> None:
    conv = _converter(tmp_path)

    def written(settings: dict[str, Any]) -> dict[str, bool]:
        writer = ParquetWriter(ParquetWriter.Settings.model_validate(settings))
        target = WriterTarget(staging_dir=tmp_path / str(len(list(tmp_path.iterdir()))), task_output_dir=tmp_path / "out",
                              rel_dir="ds", file_stem="wu", dataset="ds", branch="main")
        writer.open(conv.convert_schema({}), target)
        writer.write_batch(conv.convert_batch(RawBatch("json", [GOOD.replace(b'"id":1', f'"id":{i}'.encode()) for i in range(100)])))
        (path, _), = writer.close()
        group = pq.ParquetFile(path).metadata.row_group(0)
        return {group.column(i).path_in_schema: "PLAIN_DICTIONARY" in group.column(i).encodings or "RLE_DICTIONARY" in group.column(i).encodings
                for i in range(group.num_columns)}

    auto = written({})
    assert {c for c, d in auto.items() if d} == {"user", "country", "tier"}  # the text columns, not ids or times
    every = written({"dictionary": "all"})
    assert all(d for c, d in every.items() if c != "ok") and not any(written({"dictionary": "none"}).values())  # no boolean dictionaries in Parquet
    assert {c for c, d in written({"dictionary": ["id"]}).items() if d} == {"id"}
    writer = ParquetWriter(ParquetWriter.Settings.model_validate({"dictionary": ["nope"]}))
    with pytest.raises(ConfigError, match=r"writer.dictionary: 'nope' not a top-level column of the schema"):
        writer.open(conv.convert_schema({}), WriterTarget(staging_dir=tmp_path / "x", task_output_dir=tmp_path / "out",
                                                          rel_dir="ds", file_stem="wu", dataset="ds", branch="main"))
