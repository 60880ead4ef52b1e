"""The avro writer's columnar path against its row path: every record encoded from Arrow is the bytes fastavro
encodes from the same values, a file written from batches is byte for byte the file written record by record
(blocks, partitions, rolls), and a batch it cannot encode exactly is handed back whole."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import random
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from gobblin_py.api import WriterTarget
from gobblin_py.builtin.schemas.arrow import ArrowMapping
from gobblin_py.builtin.writers.avro import AvroWriter
from gobblin_py.builtin.writers.avro_arrow import AvroArrowEncoder

UTC = dt.UTC


def _schema(null_first: bool = True) -> dict[str, Any]:
    def opt(t: Any) -> list[Any]:
        return ["null", t] if null_first else [t, "null"]
    return {"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "long"},
        {"name": "i", "type": opt("int")},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "ms", "type": opt({"type": "long", "logicalType": "timestamp-millis"})},
        {"name": "day", "type": opt({"type": "int", "logicalType": "date"})},
        {"name": "at", "type": opt({"type": "long", "logicalType": "time-micros"})},
        {"name": "amount", "type": opt({"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2})},
        {"name": "f", "type": "float"},
        {"name": "x", "type": opt("double")},
        {"name": "s", "type": opt("string")},
        {"name": "raw", "type": "bytes"},
        {"name": "flag", "type": opt("boolean")},
        {"name": "mood", "type": opt({"type": "enum", "name": "Mood", "symbols": ["SAD", "OK", "HAPPY"]})},
        {"name": "tag", "type": {"type": "fixed", "name": "Tag", "size": 3}},
    ]}


_LONGS = [0, 1, -1, 63, 64, -64, -65, 127, 128, 8191, 8192, 2**31 - 1, -2**31, 2**56, -2**62, 2**63 - 1, -2**63]
_CENTS = [0, 1, -1, 127, -128, 128, -129, 32767, -32768, 8388608, -8388609, 10**12 - 1, -(10**12 - 1)]


def _records(n: int, seed: int = 7) -> list[dict[str, Any]]:
    rnd = random.Random(seed)

    def maybe(v: Any) -> Any:
        return None if rnd.random() < 0.2 else v
    return [{
        "id": rnd.choice(_LONGS + [rnd.randint(-2**63, 2**63 - 1)]),
        "i": maybe(rnd.randint(-2**31, 2**31 - 1)),
        "ts": dt.datetime(1960, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=rnd.randint(0, 10**17)),
        "ms": maybe(dt.datetime(2020, 1, 1, tzinfo=UTC) + dt.timedelta(milliseconds=rnd.randint(-10**12, 10**12))),
        "day": maybe(dt.date(1970, 1, 1) + dt.timedelta(days=rnd.randint(-100_000, 100_000))),
        "at": maybe(dt.time(rnd.randint(0, 23), rnd.randint(0, 59), rnd.randint(0, 59), rnd.randint(0, 999_999))),
        "amount": maybe(decimal.Decimal(rnd.choice(_CENTS)) / 100),
        "f": rnd.choice([0.0, 1.5, -2.25, 3.0e38, 1e-40, 0.1]),
        "x": maybe(rnd.choice([0.0, -0.0, 1e300, -1e-300, rnd.random()])),
        "s": maybe("".join(rnd.choice("aé€😀 \n") for _ in range(rnd.choice([0, 1, 63, 64, 200])))),
        "raw": bytes(rnd.randrange(256) for _ in range(rnd.randint(0, 5))),
        "flag": maybe(rnd.random() < 0.5),
        "mood": maybe(rnd.choice(["SAD", "OK", "HAPPY"])),
        "tag": bytes([1, 2, rnd.randrange(256)]),
    } for _ in range(n)]


@pytest.mark.parametrize("null_first", [True, False], ids=["null-first", "null-last"])
def test_every_record_is_the_bytes_fastavro_encodes_for_it(null_first: bool) -> None:
    schema = _schema(null_first)
    mapping = ArrowMapping(schema)
    encoder = AvroArrowEncoder.for_schema(schema, mapping.schema)
    assert encoder is not None
    records = _records(3000)
    encoded = encoder.encode(pa.RecordBatch.from_pylist(records, schema=mapping.schema))
    assert encoded is not None and len(encoded) == len(records)
    parsed = fastavro.parse_schema(schema)
    for k, record in enumerate(records):
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, record)
        assert encoded.span(k, k + 1) == out.getvalue(), f"record {k}: {record}"


def _writer(tmp_path: Path, name: str, schema: dict[str, Any], **settings: Any) -> tuple[AvroWriter, Path]:
    staging = tmp_path / name
    writer = AvroWriter(AvroWriter.Settings.model_validate(settings))
    writer.open(schema, WriterTarget(staging_dir=staging, task_output_dir=tmp_path / f"{name}-out", rel_dir="d",
                                     file_stem="task-0123456789abcdef0123456789abcdef", dataset="d", branch="main"))
    return writer, staging


def _files(staging: Path) -> dict[str, bytes]:
    return {str(p.relative_to(staging)): p.read_bytes() for p in sorted(staging.rglob("*.avro"))}


SETTINGS = [
    pytest.param({"sync_interval": 1024}, id="small-blocks"),
    pytest.param({"codec": "null"}, id="null-codec"),
    pytest.param({"sync_interval": 2048, "partition": {"column": "ms", "granularity": "DAY"}}, id="by-day"),
    pytest.param({"sync_interval": 1024, "roll": {"max_records": 700}}, id="roll-records"),
]


@pytest.mark.parametrize("settings", SETTINGS)
def test_a_file_written_from_batches_is_the_file_written_record_by_record(tmp_path: Path, settings: dict[str, Any]) -> None:
    schema = _schema()
    records = _records(2500, seed=3)
    if "partition" in settings:
        records = [dict(r, ms=1_767_225_600_000 + k * 997_000) for k, r in enumerate(records)]  # 29 days
    rows, rows_dir = _writer(tmp_path, "rows", schema, **settings)
    for r in records:
        rows.write(r)
    batches, batches_dir = _writer(tmp_path, "batches", schema, **settings)
    assert batches.takes_batches()
    arrow_schema = ArrowMapping(schema).schema
    start = 0
    for size in [1, 7, 500, 3, 999, 2500]:  # uneven batches: blocks and rolls cut inside them
        chunk = records[start:start + size]
        if chunk:
            assert batches.write_batch(pa.RecordBatch.from_pylist(chunk, schema=arrow_schema))
        start += size
    assert [c for _, c in rows.close()] == [c for _, c in batches.close()]
    assert _files(rows_dir) == _files(batches_dir)
    assert len(_files(rows_dir)) > (1 if ("roll" in settings or "partition" in settings) else 0)


def test_rows_and_batches_mixed_keep_the_order_they_came_in(tmp_path: Path) -> None:
    schema = _schema()
    records = _records(900, seed=5)
    arrow_schema = ArrowMapping(schema).schema
    writer, _staging = _writer(tmp_path, "mixed", schema, sync_interval=1024)
    for lo, hi, batch in [(0, 10, False), (10, 400, True), (400, 405, False), (405, 900, True)]:
        if batch:
            assert writer.write_batch(pa.RecordBatch.from_pylist(records[lo:hi], schema=arrow_schema))
        else:
            for r in records[lo:hi]:
                writer.write(r)
    [(path, count)] = writer.close()
    assert count == 900
    with open(path, "rb") as f:
        back = list(fastavro.reader(f))
    assert [r["id"] for r in back] == [r["id"] for r in records]
    assert back[450]["s"] == records[450]["s"] and back[3]["amount"] == records[3]["amount"]


def test_rolling_by_bytes_from_batches_cuts_files_near_the_size(tmp_path: Path) -> None:
    schema = _schema()
    records = _records(6000, seed=9)
    writer, _ = _writer(tmp_path, "bytes", schema, sync_interval=4096, roll={"max_bytes": 100_000})
    arrow_schema = ArrowMapping(schema).schema
    for lo in range(0, 6000, 1000):
        assert writer.write_batch(pa.RecordBatch.from_pylist(records[lo:lo + 1000], schema=arrow_schema))
    files = writer.close()
    assert len(files) > 3 and sum(c for _, c in files) == 6000
    back = []
    for path, _ in files:
        with open(path, "rb") as f:
            back.extend(r["id"] for r in fastavro.reader(f))
    assert back == [r["id"] for r in records]
    sizes = [path.stat().st_size for path, _ in files]
    assert all(90_000 <= s <= 110_000 for s in sizes[:-1]), sizes  # each full file ends near the size


@pytest.mark.parametrize("bad", ["null-in-a-required-field", "unknown-symbol", "another-schema"])
def test_a_batch_it_cannot_encode_exactly_is_handed_back_and_nothing_is_written(tmp_path: Path, bad: str) -> None:
    schema = _schema()
    arrow_schema = ArrowMapping(schema).schema
    records = _records(50, seed=11)
    batch = pa.RecordBatch.from_pylist(records, schema=arrow_schema)
    if bad == "null-in-a-required-field":
        batch = batch.set_column(0, "id", pa.array([None] + [r["id"] for r in records[1:]], pa.int64()))
    elif bad == "unknown-symbol":
        batch = batch.set_column(12, "mood", pa.array(["GRUMPY"] * 50, pa.string()))
    else:
        batch = batch.drop_columns(["tag"])
    writer, _staging = _writer(tmp_path, "bad", schema)
    assert writer.write_batch(pa.RecordBatch.from_pylist(records[:5], schema=arrow_schema))
    assert not writer.write_batch(batch)
    [(path, count)] = writer.close()
    assert count == 5
    with open(path, "rb") as f:
        assert len(list(fastavro.reader(f))) == 5


@pytest.mark.parametrize("field", [
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "attrs", "type": {"type": "map", "values": "long"}},
    {"name": "inner", "type": {"type": "record", "name": "In", "fields": [{"name": "a", "type": "int"}]}},
    {"name": "big", "type": {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 2}},
    {"name": "either", "type": ["null", "long", "string"]},
], ids=["array", "map", "record", "decimal-30-digits", "two-type-union"])
def test_a_schema_the_encoder_lacks_a_type_of_keeps_the_writer_to_the_row_path(tmp_path: Path, field: dict[str, Any]) -> None:
    schema = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, field]}
    writer, _ = _writer(tmp_path, "nested", schema)
    assert not writer.takes_batches()
    assert not writer.write_batch(pa.RecordBatch.from_pylist([{"id": 1}], schema=pa.schema([("id", pa.int64())])))
    writer.close()


@pytest.mark.parametrize("granularity", ["MINUTE", "HOUR", "DAY", "MONTH"])
def test_a_batch_of_datetimes_is_split_as_each_datetime_is_placed(granularity: str) -> None:
    from gobblin_py.builtin.writers.time_partitioner import PartitionSettings, TimePartitioner

    partitioner = TimePartitioner(PartitionSettings(column="at", granularity=granularity, pattern="yyyy/MM/dd/HH/mm"))
    rnd = random.Random(13)
    boundary = dt.datetime(2026, 3, 1, tzinfo=UTC)
    times = [boundary + dt.timedelta(microseconds=d) for d in (-1, 0, 1, 999, 1000, 59_999_999, 60_000_000)]
    times += [dt.datetime(2000, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=rnd.randint(0, 10**15)) for _ in range(3000)]
    column = pa.array(times, pa.timestamp("us", tz="UTC"))
    parts = partitioner.split(column, datetimes=True)
    assert parts is not None
    placed = {}
    for path, mask in parts:
        for k, chosen in enumerate(mask.to_pylist() if mask is not None else [True] * len(times)):
            if chosen:
                placed[k] = path
    assert placed == {k: partitioner.partition({"at": t}) for k, t in enumerate(times)}
    assert partitioner.split(column) is None  # without the mark, microseconds are not the row path's integers
