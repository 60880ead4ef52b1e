"""`schemas.avro_datums`: Avro binary datums decoded a field at a time for a whole batch hold exactly what fastavro's
`schemaless_reader` gives of each, in the writers' Arrow mapping (as the parquet writer converts the row path's
records), on random flat schemas and random values (extremes, nulls, unicode, NaN); anything else is None, never
another value: a cut or padded datum, a bad union branch, and random corruptions that fastavro would read differently
or not at all."""

from __future__ import annotations

import io
import math
import random
import struct
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pytest

from gobblin_py.api.batches import ROW_VALUES
from gobblin_py.builtin.schemas.arrow import ArrowMapping
from gobblin_py.builtin.schemas.avro_datums import AvroDatumDecoder

INT32, INT64 = (-(2**31), 2**31 - 1), (-(2**63), 2**63 - 1)
MILLIS = (-62135596800000, 253402300799999)  # years 1 to 9999, as fastavro reads them
KINDS = ["null", "boolean", "int", "long", "float", "double", "string", "bytes", "date", "time-millis", "time-micros",
         "timestamp-millis", "timestamp-micros", "local-timestamp-millis", "local-timestamp-micros", "enum", "fixed"]


def _type(kind: str, i: int) -> Any:
    if kind in ("date", "time-millis"):
        return {"type": "int", "logicalType": kind}
    if kind.endswith(("-millis", "-micros")):
        return {"type": "long", "logicalType": kind}
    if kind == "enum":
        return {"type": "enum", "name": f"E{i}", "symbols": ["A", "B", "C_1", "D"]}
    if kind == "fixed":
        return {"type": "fixed", "name": f"F{i}", "size": 1 + i % 5}
    return kind


def random_schema(rng: random.Random) -> tuple[dict[str, Any], list[tuple[str, bool]]]:
    """A flat record schema and each field's kind and whether it is nullable."""
    fields, kinds = [], []
    for i in range(rng.randint(1, 14)):
        kind = rng.choice(KINDS)
        avro = _type(kind, i)
        wrap = rng.random() if kind != "null" else 1.0
        if wrap < 0.3:
            avro, nullable = ["null", avro], True
        elif wrap < 0.45:
            avro, nullable = [avro, "null"], True
        else:
            nullable = kind == "null"
        fields.append({"name": f"f{i}", "type": avro})
        kinds.append((kind, nullable))
    return {"type": "record", "name": "R", "namespace": "t", "fields": fields}, kinds


def _text(rng: random.Random) -> str:
    pick = rng.random()
    if pick < 0.2:
        return ""
    alphabet = "abcXYZ 0" if pick < 0.5 else "aé€😀\u0000\u07ff\uffff\U0010ffffß中"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40)))


def random_value(rng: random.Random, kind: str, i: int) -> Any:
    edge = rng.random() < 0.25
    if kind == "null":
        return None
    if kind == "boolean":
        return rng.random() < 0.5
    if kind in ("int", "date"):
        lo, hi = INT32 if kind == "int" else (-719162, 2932896)
        return rng.choice([lo, hi, 0, -1, 1, 63, -64, 64]) if edge else rng.randint(lo, hi)
    if kind == "long":
        return rng.choice([*INT64, 0, -1, 2**56, -(2**56) - 1, 2**62]) if edge else rng.randint(-(2**rng.randint(1, 63)), 2**rng.randint(1, 63) - 1)
    if kind in ("float", "double"):
        if edge:
            return rng.choice([math.nan, math.inf, -math.inf, -0.0, 0.0, 5e-324 if kind == "double" else 1e-45,
                               3.4028234663852886e38])
        return rng.uniform(-1e6, 1e6)
    if kind == "string":
        return _text(rng)
    if kind == "bytes":
        return bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 5, 130])))
    if kind == "time-millis":
        return rng.choice([0, 86_399_999]) if edge else rng.randrange(86_400_000)
    if kind == "time-micros":
        return rng.choice([0, 86_399_999_999]) if edge else rng.randrange(86_400_000_000)
    if kind.endswith("-millis"):
        return rng.choice([*MILLIS, -1, 0]) if edge else rng.randint(*MILLIS)
    if kind.endswith("-micros"):
        lo, hi = MILLIS[0] * 1000, MILLIS[1] * 1000 + 999
        return rng.choice([lo, hi, -1, 0]) if edge else rng.randint(lo, hi)
    if kind == "enum":
        return rng.choice(["A", "B", "C_1", "D"])
    return bytes(rng.randrange(256) for _ in range(1 + i % 5))


def encode(parsed: Any, record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, parsed, record)
    return out.getvalue()


def row_path(schema: dict[str, Any], datums: list[bytes]) -> pa.RecordBatch | None:
    """What the row path makes of the datums: fastavro reads each (None if one does not decode to its end), the
    parquet writer converts the records with `from_pylist` (None where its per-record check refuses one)."""
    parsed = fastavro.parse_schema(schema)
    mapping = ArrowMapping(schema)
    records = []
    for datum in datums:
        buf = io.BytesIO(datum)
        try:
            record = fastavro.schemaless_reader(buf, parsed, None)
        except Exception:  # noqa: BLE001 - whatever fastavro raises makes the value a bad record on the row path
            return None
        if buf.tell() != len(datum):
            return None
        try:
            mapping.check(record)
        except Exception:  # noqa: BLE001
            return None
        records.append(record)
    return pa.RecordBatch.from_pylist(records, schema=mapping.schema)


def assert_same(got: pa.RecordBatch, want: pa.RecordBatch) -> None:
    assert got.schema.equals(want.schema, check_metadata=False)
    assert got.num_rows == want.num_rows
    for name, a, b in zip(got.schema.names, got.columns, want.columns):
        assert a.is_null().equals(b.is_null()), name
        if pa.types.is_floating(a.type):  # NaN and -0.0 compared by their bits
            bits = np.uint32 if a.type == pa.float32() else np.uint64
            x, y = a.fill_null(0).to_numpy(zero_copy_only=False), b.fill_null(0).to_numpy(zero_copy_only=False)
            assert (x.view(bits) == y.view(bits)).all(), name
        else:
            assert a.equals(b), name


@pytest.mark.parametrize("seed", range(60))
def test_random_flat_schemas_decode_exactly_as_fastavro_reads_them(seed: int) -> None:
    rng = random.Random(seed)
    schema, kinds = random_schema(rng)
    parsed = fastavro.parse_schema(schema)
    decoder = AvroDatumDecoder.for_schema(schema)
    assert decoder is not None
    n = rng.choice([0, 1, 7, 300])
    records = [{f"f{i}": None if nullable and rng.random() < 0.3 else random_value(rng, kind, i)
                for i, (kind, nullable) in enumerate(kinds)} for _ in range(n)]
    datums = [encode(parsed, r) for r in records]
    want = row_path(schema, datums)
    assert want is not None
    got = decoder.decode_values(datums)
    assert got is not None
    assert_same(got, want)
    for field, (kind, _) in zip(got.schema, kinds):  # fastavro reads timestamps as datetimes: marked so for partitioning
        marked = b"naive-datetime" if kind.startswith("local-") else b"datetime" if "timestamp" in kind else None
        assert (field.metadata or {}).get(ROW_VALUES) == marked
    headed = [b"\x00\x00\x00\x00\x07" + d for d in datums]  # behind a Confluent header, as the Kafka extractor has them
    again = decoder.decode_values(headed, skip=5)
    assert again is not None
    assert_same(again, want)


@pytest.mark.parametrize("seed", range(40))
def test_corrupted_datums_are_refused_or_read_exactly_as_fastavro_reads_them(seed: int) -> None:
    rng = random.Random(1000 + seed)
    schema, kinds = random_schema(rng)
    parsed = fastavro.parse_schema(schema)
    decoder = AvroDatumDecoder.for_schema(schema)
    assert decoder is not None
    records = [{f"f{i}": None if nullable and rng.random() < 0.3 else random_value(rng, kind, i)
                for i, (kind, nullable) in enumerate(kinds)} for _ in range(20)]
    for _ in range(30):
        datums = [bytearray(encode(parsed, r)) for r in records]
        victim = datums[rng.randrange(len(datums))]
        for _ in range(rng.randint(1, 3)):
            how = rng.random()
            if how < 0.6 and victim:
                victim[rng.randrange(len(victim))] = rng.randrange(256)
            elif how < 0.8 and victim:
                del victim[rng.randrange(len(victim)):]
            else:
                victim.insert(rng.randrange(len(victim) + 1), rng.randrange(256))
        datums_b = [bytes(d) for d in datums]
        got = decoder.decode_values(datums_b)
        want = row_path(schema, datums_b)
        if got is not None:  # whatever it decodes, fastavro reads the same way
            assert want is not None, datums_b
            assert_same(got, want)


SCHEMA = {"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"]},
    {"name": "ok", "type": "boolean"}, {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}}, {"name": "n", "type": "int"}]}


def _datums() -> list[bytes]:
    parsed = fastavro.parse_schema(SCHEMA)
    return [encode(parsed, {"id": i, "note": None if i % 2 else f"n{i}", "ok": True, "at": i, "day": i, "n": i})
            for i in range(5)]


def test_cut_padded_and_misbranched_datums_refuse_the_batch() -> None:
    decoder = AvroDatumDecoder.for_schema(SCHEMA)
    assert decoder is not None
    good = _datums()
    assert decoder.decode_values(good) is not None
    assert decoder.decode_values([*good[:2], good[2][:-1], *good[3:]]) is None  # cut short
    assert decoder.decode_values([*good[:2], good[2] + b"\x00", *good[3:]]) is None  # a byte past its fields
    assert decoder.decode_values([*good[:2], good[2][:1] + b"\x04" + good[2][2:], *good[3:]]) is None  # branch 2 of 2
    assert decoder.decode_values([*good[:2], good[2][:1] + b"\x01" + good[2][2:], *good[3:]]) is None  # branch -1
    assert decoder.decode_values([b"\xff" * 11 + good[0][1:]]) is None  # a varint longer than 10 bytes
    assert decoder.decode_values([b"\xff" * 9 + b"\x02" + good[0][1:]]) is None  # past 64 bits
    boolean = bytearray(good[1])
    boolean[2] = 2  # id 1 (1 byte), note null (1 byte), then the boolean
    assert decoder.decode_values([bytes(boolean)]) is None
    assert decoder.decode_values([b"\x00\x00"], skip=5) is None  # shorter than its header
    assert decoder.decode_values([]) is not None and decoder.decode_values([]).num_rows == 0


def test_values_the_row_path_cannot_hold_refuse_the_batch() -> None:
    decoder = AvroDatumDecoder.for_schema(SCHEMA)
    assert decoder is not None

    def datum(at: int, day: int, n: int, note: bytes = b"\x00") -> bytes:
        def zz(v: int) -> bytes:
            z, out = (v << 1) ^ (v >> 63), bytearray()
            while z > 0x7F:
                out.append(z & 0x7F | 0x80)
                z >>= 7
            return bytes(out) + bytes([z])
        return zz(1) + note + b"\x01" + zz(at) + zz(day) + zz(n)

    assert decoder.decode_values([datum(MILLIS[1], 2932896, 2**31 - 1), datum(MILLIS[0], -719162, -(2**31))]) is not None
    assert decoder.decode_values([datum(MILLIS[1] + 1, 0, 0)]) is None  # past year 9999: fastavro raises
    assert decoder.decode_values([datum(MILLIS[0] - 1, 0, 0)]) is None
    assert decoder.decode_values([datum(0, 2932897, 0)]) is None
    assert decoder.decode_values([datum(0, 0, 2**31)]) is None  # an int past 32 bits: the writer refuses it
    assert decoder.decode_values([datum(0, 0, 0, b"\x02\x02\xed")]) is None  # a string of one byte, not UTF-8
    assert decoder.decode_values([datum(0, 0, 0, b"\x02\x06\xed\xa0\x80")]) is None  # a lone surrogate
    assert decoder.decode_values([datum(0, 0, 0, b"\x02\x03")]) is None  # a negative length
    assert decoder.decode_values([datum(0, 0, 0, b"\x02\xfe\xff\xff\xff\xff\xff\xff\xff\x7f")]) is None  # a huge one


@pytest.mark.parametrize("field_type", [
    {"type": "record", "name": "In", "fields": [{"name": "x", "type": "int"}]}, {"type": "array", "items": "int"},
    {"type": "map", "values": "int"}, ["null", "int", "string"], ["null"],
    {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2}, {"type": "string", "logicalType": "uuid"},
    {"type": "int", "logicalType": "timestamp-millis"}])
def test_a_schema_with_a_type_it_does_not_decode_has_no_decoder(field_type: Any) -> None:
    schema = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"}, {"name": "b", "type": field_type}]}
    assert AvroDatumDecoder.for_schema(schema) is None
    assert AvroDatumDecoder.for_schema("string") is None


def test_an_enum_referred_to_by_name_decodes_as_its_definition() -> None:
    schema = {"type": "record", "name": "R", "namespace": "ns", "fields": [
        {"name": "a", "type": {"type": "enum", "name": "E", "symbols": ["X", "Y"]}},
        {"name": "b", "type": ["null", "E"]}, {"name": "c", "type": "ns.E"}]}
    parsed = fastavro.parse_schema(schema)
    datums = [encode(parsed, {"a": "Y", "b": None, "c": "X"}), encode(parsed, {"a": "X", "b": "Y", "c": "Y"})]
    decoder = AvroDatumDecoder.for_schema(schema)
    assert decoder is not None
    got, want = decoder.decode_values(datums), row_path(schema, datums)
    assert got is not None and want is not None
    assert_same(got, want)
    assert decoder.decode_values([b"\x04\x00\x00"]) is None  # symbol 2 of 2


def test_long_varints_and_float_bits_survive() -> None:
    schema = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"}, {"name": "f", "type": "float"}]}
    parsed = fastavro.parse_schema(schema)
    values = [2**63 - 1, -(2**63), 2**55, -(2**55) - 1, 2**56, 2**62, -(2**62) - 1]
    datums = [encode(parsed, {"a": v, "f": 1.0}) for v in values]
    datums += [encode(parsed, {"a": 0, "f": 0.0})[:1] + struct.pack("<I", bits)
               for bits in (0x7FC00001, 0x7F800001, 0xFF800000, 0x80000000, 0x00000001)]  # NaNs, -inf, -0, subnormal
    decoder = AvroDatumDecoder.for_schema(schema)
    assert decoder is not None
    got, want = decoder.decode_values(datums), row_path(schema, datums)
    assert got is not None and want is not None
    assert_same(got, want)
    assert got.column("a").to_pylist()[:7] == values
