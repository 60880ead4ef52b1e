"""The parquet writer: files read back by pyarrow and by DuckDB (neither is the code under test), the Avro → Arrow
mapping, codecs, row groups, names as the avro writer gives them, bad records, and whole in-process jobs."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.jobs import EVENT_SCHEMA, example_job, write_job
from support.writers import write_all

from gobblin_py.api import WriterTarget
from gobblin_py.builtin.schemas.arrow import ArrowMapping
from gobblin_py.builtin.writers.avro import AvroWriter
from gobblin_py.builtin.writers.parquet import ParquetWriter, _culprit
from gobblin_py.config import load_job
from gobblin_py.errors import ConfigError, RecordError
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import JobRunner
from gobblin_py.testing.outputs import read_avro_dir, read_error_files

DAY0 = int(dt.datetime(2026, 1, 1, tzinfo=dt.UTC).timestamp() * 1000)
DAY = 86_400_000
EVENT = json.loads(EVENT_SCHEMA.read_text())

NESTED: dict[str, Any] = {
    "type": "record", "name": "Order", "namespace": "test",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "seen_us", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}], "default": None},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
        {"name": "digest", "type": {"type": "fixed", "name": "Digest", "size": 4}},
        {"name": "blob", "type": ["null", "bytes"], "default": None},
        {"name": "qty", "type": "int"},
        {"name": "weight", "type": "float"},
        {"name": "ok", "type": "boolean"},
        {"name": "customer", "type": {"type": "record", "name": "Customer", "fields": [
            {"name": "name", "type": "string"},
            {"name": "address", "type": ["null", {"type": "record", "name": "Address", "fields": [
                {"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "string"]}]}]},
        ]}},
        {"name": "billing", "type": ["null", "Address"], "default": None},  # a named type used again
        {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
            {"name": "sku", "type": "string"}, {"name": "n", "type": "int"}]}}},
        {"name": "tags", "type": {"type": "map", "values": ["null", "long"]}},
        {"name": "notes", "type": ["null", {"type": "array", "items": "string"}], "default": None},
    ],
}


def _order(i: int) -> dict[str, Any]:
    return {
        "id": i, "ts": DAY0 + i, "seen_us": (DAY0 + i) * 1000 + 7 if i % 2 else None, "day": 20454 + i % 3,
        "price": decimal.Decimal(f"{i}.{i % 100:02d}"), "ref": f"00000000-0000-0000-0000-{i:012d}",
        "status": "PAID" if i % 2 else "NEW", "digest": i.to_bytes(4, "big"), "blob": b"\x00\xff" if i % 3 == 0 else None,
        "qty": i % 50, "weight": 0.5 * i, "ok": i % 2 == 0,
        "customer": {"name": f"c{i}", "address": {"city": "Berlin", "zip": None} if i % 2 else None},
        "billing": {"city": "Paris", "zip": "75001"} if i % 4 == 0 else None,
        "lines": [{"sku": f"s{j}", "n": j} for j in range(i % 3)],
        "tags": {"a": i, "b": None}, "notes": ["x", "y"] if i % 5 == 0 else None,
    }


def _event(i: int, day: int = 0) -> dict[str, Any]:
    return {"id": i, "ts": DAY0 + day * DAY + i, "user": f"u{i}", "kind": "click", "amount": i / 4, "country": "DE"}


def _target(root: Path, stem: str = "wu-1") -> WriterTarget:
    return WriterTarget(staging_dir=root / "staging", task_output_dir=root / "output", rel_dir="ds", file_stem=stem)


def _parquet(**settings: Any) -> ParquetWriter:
    return ParquetWriter(ParquetWriter.Settings.model_validate(settings))


def _duck(sql: str) -> list[tuple[Any, ...]]:
    return duckdb.connect().sql(sql).fetchall()


# --- types: the mapping, read back by pyarrow and DuckDB ------------------------------------------------


def test_nested_and_logical_types_read_back_by_pyarrow_and_duckdb(tmp_path: Path) -> None:
    records = [_order(i) for i in range(1, 41)]
    [f], refused = write_all(_parquet(), NESTED, records, _target(tmp_path))
    assert refused == [] and f.records == 40 and f.rel_path == "ds/wu-1.parquet"

    table = pq.read_table(f.path)
    s = table.schema
    assert s.field("id").type == pa.int64() and not s.field("id").nullable
    assert s.field("ts").type == pa.timestamp("ms", tz="UTC") and s.field("seen_us").type == pa.timestamp("us", tz="UTC")
    assert s.field("seen_us").nullable and s.field("day").type == pa.date32()
    assert s.field("price").type == pa.decimal128(10, 2) and s.field("ref").type == pa.string()
    assert s.field("status").type == pa.string() and s.field("digest").type == pa.binary(4)
    assert s.field("qty").type == pa.int32() and s.field("weight").type == pa.float32() and s.field("ok").type == pa.bool_()
    customer = s.field("customer").type
    assert pa.types.is_struct(customer) and customer.field("address").nullable and not customer.field("name").nullable
    assert customer.field("address").type.field("zip").nullable and s.field("billing").type == customer.field("address").type
    assert s.field("lines").type == pa.list_(pa.field("item", pa.struct([pa.field("sku", pa.string(), False),
                                                                         pa.field("n", pa.int32(), False)]), False))
    assert s.field("tags").type == pa.map_(pa.string(), pa.field("value", pa.int64(), True))
    assert json.loads(table.schema.metadata[b"parquet.avro.schema"]) == NESTED

    back = table.to_pylist()
    expected = records[6]
    got = back[6]
    assert got["ts"] == dt.datetime.fromtimestamp((DAY0 + 7) / 1000, tz=dt.UTC)
    assert got["seen_us"] == dt.datetime.fromtimestamp(DAY0 / 1000, tz=dt.UTC) + dt.timedelta(microseconds=7007)
    assert got["day"] == dt.date(1970, 1, 1) + dt.timedelta(days=20454 + 7 % 3)
    assert got["price"] == decimal.Decimal("7.07") and got["tags"] == [("a", 7), ("b", None)]
    for key in ("id", "ref", "status", "digest", "blob", "qty", "ok", "customer", "billing", "notes"):
        assert got[key] == expected[key], key
    assert got["lines"] == expected["lines"] and got["weight"] == pytest.approx(expected["weight"])

    where = f"read_parquet('{f.path}')"
    assert _duck(f"select count(*), sum(price), count(seen_us), max(len(lines)) from {where}") == [
        (40, sum(r["price"] for r in records), 20, 2)]
    assert _duck(f"select typeof(ts), typeof(day), typeof(price), typeof(customer), typeof(tags) from {where} limit 1") == [
        ("TIMESTAMP WITH TIME ZONE", "DATE", "DECIMAL(10,2)",
         'STRUCT("name" VARCHAR, address STRUCT(city VARCHAR, zip VARCHAR))', "MAP(VARCHAR, BIGINT)")]
    assert _duck(f"select customer.address.city, lines[1].sku, tags['a'], epoch_ms(ts) from {where} where id = 7") == [
        ("Berlin", "s0", 7, DAY0 + 7)]


def test_times_local_timestamps_and_wide_decimals_read_back(tmp_path: Path) -> None:
    schema = {"type": "record", "name": "T", "fields": [
        {"name": "t_ms", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "t_us", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "wide", "type": {"type": "fixed", "name": "W", "size": 17, "logicalType": "decimal", "precision": 40, "scale": 3}},
        {"name": "other", "type": {"type": "string", "logicalType": "not-a-known-one"}},  # Avro: the underlying type
    ]}
    wide = decimal.Decimal("1234567890123456789012345678901234567.125")
    [f], refused = write_all(_parquet(), schema, [{"t_ms": 3_723_004, "t_us": dt.time(1, 2, 3, 5), "local": 1_000_001,
                                                "wide": wide, "other": "x"}], _target(tmp_path))
    assert refused == []
    s = pq.read_schema(f.path)
    assert [s.field(n).type for n in ("t_ms", "t_us", "local", "wide", "other")] == [
        pa.time32("ms"), pa.time64("us"), pa.timestamp("us"), pa.decimal256(40, 3), pa.string()]
    assert pq.read_table(f.path).column("wide").to_pylist() == [wide]
    assert _duck(f"select t_ms::varchar, t_us::varchar, local::varchar, other from read_parquet('{f.path}')") == [
        ("01:02:03.004", "01:02:03.000005", "1970-01-01 00:00:01.000001", "x")]
    # DuckDB's decimals stop at 38 digits: it reads a wider one as a double (pyarrow, above, reads it exactly)
    assert _duck(f"select typeof(wide), wide from read_parquet('{f.path}')") == [("DOUBLE", float(wide))]


@pytest.mark.parametrize("schema, message", [
    ({"type": "record", "name": "R", "fields": [{"name": "payload", "type": {"type": "record", "name": "P", "fields": [
        {"name": "kind", "type": ["int", "string"]}]}}]},
     "field 'payload.kind': a union of int and string has no Parquet type; make it one type or a nullable one"),
    ({"type": "record", "name": "R", "fields": [{"name": "v", "type": ["null", "long", "double"]}]},
     "field 'v': a union of long and double"),
    ({"type": "record", "name": "Node", "fields": [{"name": "value", "type": "long"},
                                                   {"name": "next", "type": ["null", "Node"]}]},
     "field 'next': the record type 'Node' contains itself"),
    ({"type": "record", "name": "R", "fields": [{"name": "xs", "type": {"type": "array", "items": {
        "type": "map", "values": ["string", "boolean"]}}}]},
     "field 'xs[]{}': a union of string and boolean"),
    ({"type": "record", "name": "R", "fields": [{"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "scale": 2}}]},
     "field 'd': a decimal needs an int precision"),
    ({"type": "record", "name": "R", "fields": [{"name": "t", "type": "Missing"}]},
     "field 't': unknown Avro type 'Missing'"),
    ({"type": "json"}, "the parquet writer needs an Avro record schema; add a json_to_avro converter before it"),
])
def test_a_schema_parquet_cannot_hold_fails_open_naming_the_field(tmp_path: Path, schema: Any, message: str) -> None:
    writer = _parquet()
    with pytest.raises(ConfigError) as info:
        writer.open(schema, _target(tmp_path))
    assert message in str(info.value)
    assert not (tmp_path / "staging").exists()  # nothing was opened


# --- codecs and row groups --------------------------------------------------------------------------------


@pytest.mark.parametrize("codec, in_metadata", [("zstd", "ZSTD"), ("snappy", "SNAPPY"), ("gzip", "GZIP"), ("none", "UNCOMPRESSED")])
def test_each_codec_is_written_and_read_back(tmp_path: Path, codec: str, in_metadata: str) -> None:
    records = [_event(i) for i in range(500)]
    [f], _ = write_all(_parquet(compression=codec), EVENT, records, _target(tmp_path))
    meta = pq.ParquetFile(f.path).metadata
    assert {meta.row_group(0).column(c).compression for c in range(meta.num_columns)} == {in_metadata}
    assert pq.read_table(f.path).column("id").to_pylist() == list(range(500))
    assert _duck(f"select count(*), sum(id), min(user) from read_parquet('{f.path}')") == [(500, sum(range(500)), "u0")]


def test_the_default_codec_is_zstd_and_a_level_is_passed_on(tmp_path: Path) -> None:
    records = [{**_event(i), "user": "same text " * 20} for i in range(2000)]
    [low], _ = write_all(_parquet(compression_level=1), EVENT, records, _target(tmp_path / "a"))
    [high], _ = write_all(_parquet(compression_level=19), EVENT, records, _target(tmp_path / "b"))
    assert pq.ParquetFile(low.path).metadata.row_group(0).column(0).compression == "ZSTD"
    assert low.checksum != high.checksum  # the level reached the codec
    assert pq.read_table(low.path).equals(pq.read_table(high.path))


@pytest.mark.parametrize("batch", [1, 30, 100, 1000])
def test_row_groups_hold_row_group_records_whatever_the_batch_size(tmp_path: Path, batch: int) -> None:
    records = [_event(i) for i in range(350)]
    [f], _ = write_all(_parquet(row_group_records=100, batch_records=batch), EVENT, records, _target(tmp_path))
    meta = pq.ParquetFile(f.path).metadata
    assert [meta.row_group(g).num_rows for g in range(meta.num_row_groups)] == [100, 100, 100, 50]
    assert pq.read_table(f.path).column("id").to_pylist() == list(range(350))
    assert _duck(f"select count(distinct id) from read_parquet('{f.path}')") == [(350,)]


def test_partitions_together_never_hold_more_than_a_row_group(tmp_path: Path) -> None:
    records = [_event(i, day=i % 3) for i in range(1000)]  # three partitions, interleaved
    writer = _parquet(row_group_records=100, batch_records=10, partition={"column": "ts"})
    files, _ = write_all(writer, EVENT, records, _target(tmp_path))
    assert sorted((f.rel_path, f.records) for f in files) == [
        ("ds/2026/01/01/wu-1.parquet", 334), ("ds/2026/01/02/wu-1.parquet", 333), ("ds/2026/01/03/wu-1.parquet", 333)]
    for f in files:
        meta = pq.ParquetFile(f.path).metadata
        assert all(meta.row_group(g).num_rows <= 100 for g in range(meta.num_row_groups))
    ids = _duck(f"select id from read_parquet('{tmp_path / 'output'}/**/*.parquet') order by id")
    assert [i for (i,) in ids] == list(range(1000))


# --- names: as the avro writer's, deterministic --------------------------------------------------------


@pytest.mark.parametrize("partition", [None, {"column": "ts", "granularity": "HOUR", "pattern": "yyyy/MM/dd/HH"},
                                       {"column": "ts", "granularity": "MONTH", "pattern": "yyyy/MM"}])
def test_files_land_where_the_avro_writer_puts_them_with_suffix_parquet(tmp_path: Path, partition: Any) -> None:
    records = [_event(i, day=i % 4) if i % 7 else {**_event(i), "ts": DAY0 + 40 * DAY + i} for i in range(60)]
    avro, _ = write_all(AvroWriter(AvroWriter.Settings.model_validate({"partition": partition})), EVENT, records,
                     _target(tmp_path / "a"))
    parquet, _ = write_all(_parquet(partition=partition), EVENT, records, _target(tmp_path / "p"))
    assert len(avro) > (1 if partition else 0)
    assert sorted((f.rel_path.removesuffix(".avro"), f.records) for f in avro) == \
        sorted((f.rel_path.removesuffix(".parquet"), f.records) for f in parquet)
    assert all(f.rel_path.endswith(".parquet") for f in parquet)


def test_the_same_records_give_the_same_names_and_bytes(tmp_path: Path) -> None:
    records = [_order(i) for i in range(300)]
    settings = {"row_group_records": 64, "batch_records": 50, "partition": {"column": "ts", "granularity": "MINUTE"}}
    first, _ = write_all(_parquet(**settings), NESTED, records, _target(tmp_path / "1"))
    second, _ = write_all(_parquet(**settings), NESTED, records, _target(tmp_path / "2"))
    assert [(f.rel_path, f.checksum, f.size) for f in first] == [(f.rel_path, f.checksum, f.size) for f in second]
    other, _ = write_all(_parquet(**settings), NESTED, records, _target(tmp_path / "3", stem="wu-2"))
    assert not {f.rel_path for f in first} & {f.rel_path for f in other}


# --- bad records ---------------------------------------------------------------------------------------


BAD_ORDERS = [  # each breaks one field of _order, deep or shallow; Arrow would refuse or silently garble it
    ("id", "seven", "field 'id': 'seven' is not a long"),
    ("qty", 2**31, "field 'qty': 2147483648 is not an int (32 bits)"),
    ("ok", 1, "field 'ok': 1 is not a boolean"),
    ("weight", 1e39, "field 'weight': 1e+39 is not a float (beyond 32 bits)"),
    ("price", decimal.Decimal("1.234"), "field 'price': Decimal('1.234') is not a decimal(10,2): more than 2 digits after"),
    ("price", decimal.Decimal("123456789"), "is not a decimal(10,2): more than 10 digits"),
    ("status", "LOST", "field 'status': 'LOST' is not one of the enum's symbols"),
    ("digest", b"12345", "field 'digest': b'12345' is not 4 bytes"),
    ("ref", "\udc80", "field 'ref': '\\udc80' is not UTF-8 text"),
    ("day", dt.datetime(2026, 1, 1), "field 'day'"),
    ("ts", "2026-01-01", "field 'ts': '2026-01-01' is not a timestamp"),
    ("customer", {"name": None, "address": None}, "field 'customer.name' is missing or null, and its type does not allow null"),
    ("customer", {"name": "c", "address": {"city": 5}}, "field 'customer.address.city': 5 is not a string"),
    ("lines", "abc", "field 'lines': 'abc' is not an array"),
    ("lines", [{"sku": "a", "n": 1}, {"sku": "b", "n": "two"}], "field 'lines[1].n': 'two' is not an int"),
    ("tags", {"a": "x"}, "field 'tags{a}': 'x' is not a long"),
    ("tags", {1: 2}, "field 'tags{}': 1 is not a map key"),
    ("id_missing", None, "field 'id' is missing or null"),
]


def _bad(field: str, value: Any) -> dict[str, Any]:
    return {k: v for k, v in _order(99).items() if k != "id"} if field == "id_missing" else {**_order(99), field: value}


@pytest.mark.parametrize("field, value, message", BAD_ORDERS)
def test_a_value_that_does_not_fit_is_refused_naming_the_field_and_the_rest_is_written(
        tmp_path: Path, field: str, value: Any, message: str) -> None:
    good = [_order(i) for i in range(1, 8)]
    bad = _bad(field, value)
    records = [*good[:3], bad, *good[3:]]
    [f], refused = write_all(_parquet(batch_records=2), NESTED, records, _target(tmp_path))
    assert [str(e) for e in refused] == [str(refused[0])] and message in str(refused[0]), refused
    assert refused[0].field == ("id" if field == "id_missing" else field)
    assert f.records == 7
    assert pq.read_table(f.path).column("id").to_pylist() == [1, 2, 3, 4, 5, 6, 7]
    assert _duck(f"select count(*) from read_parquet('{f.path}')") == [(7,)]


def test_a_refused_record_opens_no_partition_file(tmp_path: Path) -> None:
    late = {**_event(5, day=1), "id": "x"}
    files, refused = write_all(_parquet(partition={"column": "ts"}), EVENT, [_event(1), late, _event(2)], _target(tmp_path))
    assert len(refused) == 1 and [(f.rel_path, f.records) for f in files] == [("ds/2026/01/01/wu-1.parquet", 2)]
    assert not (tmp_path / "staging" / "ds" / "2026" / "01" / "02").exists()


def test_a_batch_arrow_refuses_is_searched_one_record_at_a_time_to_name_the_record() -> None:
    schema = ArrowMapping(EVENT).schema
    rows = [_event(1), _event(2), {**_event(3), "id": "three"}, _event(4)]
    with pytest.raises(pa.ArrowException) as batch_error:
        pa.RecordBatch.from_pylist(rows, schema=schema)
    why = _culprit(pa, rows, schema, batch_error.value)
    assert why.startswith("field 'id' of record 3 of a batch of 4 does not convert to Arrow"), why


def test_every_record_the_check_passes_converts() -> None:
    """The check's promise, over the values of every test above: passed ⇒ from_pylist succeeds on it."""
    mapping = ArrowMapping(NESTED)
    candidates = [_order(i) for i in range(30)] + [_bad(f, v) for f, v, _ in BAD_ORDERS]
    passed = 0
    for record in candidates:
        try:
            mapping.check(record)
        except RecordError:
            continue
        pa.RecordBatch.from_pylist([record], schema=mapping.schema)
        passed += 1
    assert passed == 30


# --- whole jobs, in-process ----------------------------------------------------------------------------


def _job(tmp: Path, name: str, writer: dict[str, Any], **more: Any) -> Path:
    job = example_job(tmp, job={"name": "t", "work_dir": str(tmp / f"work-{name}"), "max_task_retries": 1},
                      publisher={"final_dir": str(tmp / f"out-{name}")}, writer=writer, **more)
    return write_job(tmp, job, f"{name}.yaml")


def _run(path: Path) -> Any:
    return JobRunner(load_job(path), InProcessExecutor()).run()


PARTITION = {"column": "ts", "granularity": "DAY", "pattern": "yyyy/MM/dd"}


def test_the_example_job_with_the_parquet_writer_publishes_every_record_once_where_avro_would(tmp_path: Path) -> None:
    avro = _run(_job(tmp_path, "avro", {"class": "avro", "partition": PARTITION}))
    parquet = _run(_job(tmp_path, "parquet", {"class": "parquet", "row_group_records": 100, "partition": PARTITION}))
    assert avro.succeeded and parquet.succeeded, (avro.error, parquet.error)

    out = tmp_path / "out-parquet"
    avro_files = sorted(p.relative_to(tmp_path / "out-avro").as_posix().removesuffix(".avro")
                        for p in (tmp_path / "out-avro").rglob("*.avro"))
    parquet_files = sorted(p.relative_to(out).as_posix().removesuffix(".parquet") for p in out.rglob("*.parquet"))
    assert parquet_files == avro_files and len(parquet_files) > 5  # same partitions and names, two datasets

    expected = sorted((r["id"], r["ts"], r["user"]) for r in read_avro_dir(tmp_path / "out-avro"))
    assert len(expected) > 2500
    table = pq.ParquetDataset(str(out), partitioning=None).read()
    got = sorted(zip(*(table.column(c).to_pylist() for c in ("id", "ts", "user"))))
    assert got == expected  # every record once
    duck = _duck(f"select count(*), count(distinct id), sum(id) from read_parquet('{out}/**/*.parquet')")
    assert duck == [(len(expected), len(expected), sum(e[0] for e in expected))]
    for ds in ("clicks", "orders"):  # each file holds only its own day
        rows = _duck(f"select filename, min(strftime(ts, '%Y/%m/%d')), max(strftime(ts, '%Y/%m/%d')) "
                     f"from read_parquet('{out}/{ds}/**/*.parquet', filename = true) group by filename")
        assert rows and all(lo == hi and f"/{ds}/{lo}/" in name for name, lo, hi in rows)

    again = _run(_job(tmp_path, "again", {"class": "parquet", "row_group_records": 100, "partition": PARTITION}))
    assert again.succeeded
    first = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*.parquet")}
    second = {p.relative_to(tmp_path / "out-again").as_posix(): p.read_bytes() for p in (tmp_path / "out-again").rglob("*.parquet")}
    assert first == second  # the same input: the same names, byte for byte


def test_a_record_the_parquet_writer_refuses_goes_to_the_error_file_and_the_rest_is_published(tmp_path: Path) -> None:
    breaker = {"class": "gobblin_py.testing.faults:FaultOnRecordConverter", "field": "id", "equals": 2001, "set_to": "two thousand"}
    converters = [{"class": "json_to_avro", "schema": str(EVENT_SCHEMA)}, breaker]
    result = _run(_job(tmp_path, "p", {"class": "parquet", "partition": PARTITION}, converters=converters))
    assert result.succeeded, result.error
    out = tmp_path / "out-p"
    errors = read_error_files(out / "orders")
    [err] = [e for e in errors if e["stage"] == "writer (parquet)"]
    assert err["record"]["id"] == "two thousand"
    assert "field 'id': 'two thousand' is not a long" in err["reason"] and err["location"].endswith("orders-2026-01-01.jsonl:1")
    ids = [i for (i,) in _duck(f"select id from read_parquet('{out}/orders/**/*.parquet')")]
    assert _run(_job(tmp_path, "avro", {"class": "avro", "partition": PARTITION})).succeeded
    expected = sorted(r["id"] for r in read_avro_dir(tmp_path / "out-avro" / "orders"))
    assert 2001 in expected and sorted(ids) == [i for i in expected if i != 2001]  # the rest, each once


def test_a_schema_parquet_cannot_hold_fails_the_run_naming_the_field(tmp_path: Path) -> None:
    schema = {**EVENT, "fields": [*EVENT["fields"], {"name": "extra", "type": ["null", "long", "string"], "default": None}]}
    avsc = tmp_path / "wide.avsc"
    avsc.write_text(json.dumps(schema))
    result = _run(_job(tmp_path, "p", {"class": "parquet"}, converters=[{"class": "json_to_avro", "schema": str(avsc)}]))
    assert not result.succeeded
    assert "field 'extra': a union of long and string has no Parquet type" in (result.error or ""), result.error
    assert not list(tmp_path.glob("out-p/**/*.parquet"))  # nothing published


def test_a_schema_is_mapped_once_a_process_and_a_bad_one_refused_every_time() -> None:
    """Issue 47: a run of many tables or files opens a writer a task; the mapping of one schema is built once."""
    from gobblin_py.builtin.schemas.arrow import arrow_mapping

    schema = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "s", "type": ["null", "string"]}]}
    same = {"fields": [{"type": "long", "name": "id"}, {"name": "s", "type": ["null", "string"]}], "name": "R", "type": "record"}
    other = {**schema, "fields": [{"name": "id", "type": "int"}]}
    assert arrow_mapping(schema) is arrow_mapping(same) is not arrow_mapping(other)
    assert str(arrow_mapping(other).schema.field("id").type) == "int32"
    bad = {"type": "record", "name": "B", "fields": [{"name": "u", "type": ["int", "string"]}]}
    for _ in range(2):
        with pytest.raises(ConfigError, match="field 'u': a union of"):
            arrow_mapping(bad)
