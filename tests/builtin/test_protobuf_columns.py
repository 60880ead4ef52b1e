"""`schemas.protobuf_columns`: flat Protobuf messages decoded a field at a time for a whole batch hold exactly what the
`confluent_protobuf` row path gives of each (the `protobuf` package's parse, then the generated converter), in the
writers' Arrow mapping, on random flat schemas (proto2 and proto3, `optional`, enums, Timestamp) and random messages
(fields shuffled, repeated occurrences of a scalar, unknown fields, negative ints, NaN/inf, empty strings); a batch
holding anything the row path rejects or reads otherwise (invalid UTF-8, an unknown enum number, a cut message) is
None, never another value."""

from __future__ import annotations

import math
import random
import struct
from typing import Any

import pyarrow as pa
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, timestamp_pb2
from google.protobuf.message import DecodeError
from google.protobuf.message_factory import GetMessageClass

from gobblin_py.builtin.schemas.arrow import ArrowMapping
from gobblin_py.builtin.schemas.protobuf_columns import ProtobufColumnsDecoder
from gobblin_py.builtin.sources.kafka.protobuf_convert import converter
from gobblin_py.builtin.sources.kafka.protobuf_schema import avro_schema
from gobblin_py.builtin.sources.kafka.registry import UndecodableValue

F = descriptor_pb2.FieldDescriptorProto
KINDS = {"int32": F.TYPE_INT32, "int64": F.TYPE_INT64, "uint32": F.TYPE_UINT32, "uint64": F.TYPE_UINT64,
         "sint32": F.TYPE_SINT32, "sint64": F.TYPE_SINT64, "fixed32": F.TYPE_FIXED32, "fixed64": F.TYPE_FIXED64,
         "sfixed32": F.TYPE_SFIXED32, "sfixed64": F.TYPE_SFIXED64, "float": F.TYPE_FLOAT, "double": F.TYPE_DOUBLE,
         "bool": F.TYPE_BOOL, "string": F.TYPE_STRING, "bytes": F.TYPE_BYTES, "enum": F.TYPE_ENUM,
         "timestamp": F.TYPE_MESSAGE}
RANGES = {"int32": (-(2**31), 2**31 - 1), "sint32": (-(2**31), 2**31 - 1), "sfixed32": (-(2**31), 2**31 - 1),
          "int64": (-(2**63), 2**63 - 1), "sint64": (-(2**63), 2**63 - 1), "sfixed64": (-(2**63), 2**63 - 1),
          "uint32": (0, 2**32 - 1), "fixed32": (0, 2**32 - 1), "uint64": (0, 2**63 - 1), "fixed64": (0, 2**63 - 1)}
FLOATS = [0.0, -0.0, 1.5, -2.25, math.inf, -math.inf, math.nan, 1e-30, 3.0e38]


def random_message(rng: random.Random, case: int) -> tuple[Any, list[tuple[str, str]]]:
    """A flat message class of random fields (numbers shuffled) and each field's name and kind."""
    syntax = rng.choice(["proto2", "proto3"])
    fd = descriptor_pb2.FileDescriptorProto(name=f"t{case}.proto", package=f"t{case}", syntax=syntax,
                                            dependency=["google/protobuf/timestamp.proto"])
    m = fd.message_type.add(name="M")
    e = m.enum_type.add(name="E")
    for number, name in [(0, "ZERO"), (1, "ONE"), (-3, "MINUS_THREE"), (7, "SEVEN")]:
        e.value.add(name=name, number=number)
    numbers = rng.sample(range(1, 40), rng.randint(1, 12))
    fields = []
    for i, number in enumerate(numbers):
        kind = rng.choice(list(KINDS))
        extra: dict[str, Any] = {}
        if kind == "enum":
            extra["type_name"] = f".t{case}.M.E"
        if kind == "timestamp":
            extra["type_name"] = ".google.protobuf.Timestamp"
        if syntax == "proto3" and kind != "timestamp" and rng.random() < 0.3:
            extra["oneof_index"] = len(m.oneof_decl)
            extra["proto3_optional"] = True
            m.oneof_decl.add(name=f"_f{i}")
        m.field.add(name=f"f{i}", number=number, type=KINDS[kind], label=F.LABEL_OPTIONAL, json_name=f"f{i}", **extra)
        fields.append((f"f{i}", kind))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(timestamp_pb2.DESCRIPTOR.serialized_pb))
    pool.Add(fd)
    return GetMessageClass(pool.FindMessageTypeByName(f"t{case}.M")), fields


def value(rng: random.Random, kind: str) -> Any:
    if kind in RANGES:
        lo, hi = RANGES[kind]
        return rng.choice([0, lo, hi, -1 if lo < 0 else 1, rng.randint(lo, hi), rng.randint(-300, 300) if lo < 0 else 5])
    if kind in ("float", "double"):
        return rng.choice(FLOATS + [rng.uniform(-1e6, 1e6)])
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "string":
        return rng.choice(["", "a", "héllo ✓", "x" * rng.randint(0, 300), "\x00z"])
    if kind == "bytes":
        return rng.choice([b"", b"\xff\x00", bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))])
    if kind == "enum":
        return rng.choice([0, 1, -3, 7])
    return timestamp_pb2.Timestamp(seconds=rng.randint(-(10**10), 10**10), nanos=rng.randint(0, 999_999_999))


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def unknown_field(rng: random.Random) -> bytes:
    number = rng.randint(100, 2**29 - 1)
    wire = rng.choice([0, 1, 2, 5])
    body = {0: varint(rng.randint(0, 2**64 - 1)), 1: bytes(8), 5: b"\x01\x02\x03\x04",
            2: varint(3) + b"abc"}[wire]
    return varint(number << 3 | wire) + body


def payload(rng: random.Random, cls: Any, fields: list[tuple[str, str]]) -> tuple[bytes, bool]:
    """A random message's bytes (each set field as its own piece, pieces shuffled, some fields twice, unknown fields
    among them) and whether the row path may reject it or read it otherwise (then the batch may be refused)."""
    pieces, odd = [], False
    for name, kind in fields:
        for _ in range(rng.choice([0, 1, 1, 1, 2]) if kind != "timestamp" else rng.choice([0, 1])):
            one = cls()
            v = value(rng, kind)
            if kind == "timestamp":
                getattr(one, name).seconds, getattr(one, name).nanos = v.seconds, v.nanos
            else:
                setattr(one, name, v)
            pieces.append(one.SerializeToString())
    for _ in range(rng.choice([0, 0, 1, 3])):
        pieces.append(unknown_field(rng))
    rng.shuffle(pieces)
    if rng.random() < 0.05:  # a string field's value that is not UTF-8, or an enum number the schema lacks
        strings = [(name, kind) for name, kind in fields if kind in ("string", "enum")]
        if strings:
            name, kind = rng.choice(strings)
            number = cls.DESCRIPTOR.fields_by_name[name].number
            body = varint(2) + b"\xc3\x28" if kind == "string" else varint(5)
            pieces.append(varint(number << 3 | (2 if kind == "string" else 0)) + body)
            odd = True
    return b"".join(pieces), odd


def row_path(cls: Any, convert: Any, raw: bytes) -> dict[str, Any] | None:
    try:
        return convert(cls.FromString(raw))
    except (DecodeError, UndecodableValue):
        return None


def rows_of(data: Any) -> list[dict[str, Any]]:
    """A batch or table as Python rows, timestamps as their int64 micros (beyond year 9999 no datetime holds them)."""
    table = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
    return table.cast(pa.schema([f.with_type(pa.int64()) if pa.types.is_timestamp(f.type) else f
                                 for f in table.schema])).to_pylist()


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return a == b and type(a) is type(b)


@pytest.mark.parametrize("case", range(60))
def test_columns_equal_the_row_path(case: int) -> None:
    rng = random.Random(case)
    cls, fields = random_message(rng, case)
    out = avro_schema(cls.DESCRIPTOR)
    convert, lost = converter(cls.DESCRIPTOR, out)
    assert not lost
    decoder = ProtobufColumnsDecoder.for_message(cls.DESCRIPTOR, out)
    assert decoder is not None, (fields, out)
    mapping = ArrowMapping(out).schema
    for _ in range(6):
        made = [payload(rng, cls, fields) for _ in range(rng.randint(1, 300))]
        values = [raw for raw, _ in made]
        rows = [row_path(cls, convert, raw) for raw in values]
        batch = decoder.decode_values(values)
        if batch is None:
            assert any(odd for _, odd in made), "a batch the row path reads plainly was refused"
            continue
        assert None not in rows, "a batch holding a message the row path rejects was decoded"
        expected = rows_of(pa.Table.from_pylist(rows, schema=mapping))
        got = rows_of(batch)
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            for key in e:
                assert same(g[key], e[key]), (i, key, g[key], e[key], values[i].hex())


def test_cut_and_overlong_messages_are_refused() -> None:
    rng = random.Random(7)
    cls, fields = random_message(rng, 1000)
    decoder = ProtobufColumnsDecoder.for_message(cls.DESCRIPTOR, avro_schema(cls.DESCRIPTOR))
    one = cls()
    name, _kind = next((n, k) for n, k in fields)
    raw = varint(cls.DESCRIPTOR.fields_by_name[name].number << 3 | 2) + varint(10) + b"abc"  # a length past the end
    assert decoder is not None
    assert decoder.decode_values([one.SerializeToString(), raw]) is None
    assert decoder.decode_values([b"\x0b"]) is None  # a group start
    assert decoder.decode_values([struct.pack("B", 0x80)]) is None  # a varint cut short


def test_nested_repeated_and_oneofs_take_the_row_path() -> None:
    fd = descriptor_pb2.FileDescriptorProto(name="n.proto", package="n", syntax="proto3")
    m = fd.message_type.add(name="M")
    m.oneof_decl.add(name="choice")
    m.field.add(name="a", number=1, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL, oneof_index=0)
    m.field.add(name="b", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, oneof_index=0)
    r = fd.message_type.add(name="R")
    r.field.add(name="xs", number=1, type=F.TYPE_INT32, label=F.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    for name in ("n.M", "n.R"):
        message = pool.FindMessageTypeByName(name)
        assert ProtobufColumnsDecoder.for_message(message, avro_schema(message)) is None


@pytest.mark.parametrize("case", range(10))
def test_an_older_writer_reads_the_fields_it_lacks_as_the_row_path_does(case: int) -> None:
    """Values of an earlier version (fewer fields) read into the later output: the fields they lack are null where
    nullable, else the output's default, as the generated converter gives them."""
    rng = random.Random(500 + case)
    cls, fields = random_message(rng, 500 + case)
    out = avro_schema(cls.DESCRIPTOR)
    out = {**out, "fields": [*out["fields"], {"name": "later_n", "type": "long", "default": 42},
                             {"name": "later_s", "type": ["null", "string"], "default": None},
                             {"name": "later_t", "type": "string", "default": "x"}]}
    convert, lost = converter(cls.DESCRIPTOR, out)
    assert not lost
    decoder = ProtobufColumnsDecoder.for_message(cls.DESCRIPTOR, out)
    assert decoder is not None
    made = [payload(rng, cls, fields) for _ in range(200)]
    values = [raw for raw, odd in made if not odd]
    batch = decoder.decode_values(values)
    assert batch is not None
    expected = pa.Table.from_pylist([convert(cls.FromString(v)) for v in values], schema=ArrowMapping(out).schema)
    got = rows_of(batch)
    for g, e in zip(got, rows_of(expected), strict=True):
        assert (g["later_n"], g["later_s"], g["later_t"]) == (42, None, "x")
        for key in e:
            assert same(g[key], e[key]), (key, g[key], e[key])


@pytest.mark.parametrize("case", range(30))
def test_random_corruptions_are_refused_or_read_as_the_row_path_reads_them(case: int) -> None:
    """A byte of each message flipped, cut, or added: a batch decoded at all holds what the row path reads, and holds
    no message the row path rejects."""
    rng = random.Random(900 + case)
    cls, fields = random_message(rng, 900 + case)
    out = avro_schema(cls.DESCRIPTOR)
    convert, _ = converter(cls.DESCRIPTOR, out)
    decoder = ProtobufColumnsDecoder.for_message(cls.DESCRIPTOR, out)
    assert decoder is not None
    mapping = ArrowMapping(out).schema
    for _ in range(40):
        raw = bytearray(payload(rng, cls, fields)[0])
        how = rng.choice(["flip", "cut", "add"])
        if how == "flip" and raw:
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        elif how == "cut" and raw:
            del raw[rng.randrange(len(raw)):]
        else:
            raw.insert(rng.randint(0, len(raw)), rng.randrange(256))
        values = [bytes(raw)]
        row = row_path(cls, convert, values[0])
        batch = decoder.decode_values(values)
        if batch is None:
            continue
        assert row is not None, f"decoded a message the row path rejects: {values[0].hex()}"
        (got,) = rows_of(batch)
        (expected,) = rows_of(pa.Table.from_pylist([row], schema=mapping))
        for key in expected:
            assert same(got[key], expected[key]), (key, got[key], expected[key], values[0].hex())


def test_a_string_replaced_by_a_later_occurrence_is_still_checked_for_utf8() -> None:
    """Protobuf rejects a message whose *earlier* occurrence of a proto3 string is not UTF-8, though the last one is:
    the row path sends it to the error file, so the columnar path must not write it (found by the corruption fuzz)."""
    fd = descriptor_pb2.FileDescriptorProto(name="u.proto", package="u", syntax="proto3")
    fd.message_type.add(name="M").field.add(name="s", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    cls = GetMessageClass(pool.FindMessageTypeByName("u.M"))
    raw = b"\x0a\x02\xc3\x28" + b"\x0a\x01a"  # s = <bad UTF-8>, then s = "a"
    with pytest.raises(DecodeError):
        cls.FromString(raw)
    decoder = ProtobufColumnsDecoder.for_message(cls.DESCRIPTOR, avro_schema(cls.DESCRIPTOR))
    assert decoder is not None
    assert decoder.decode_values([raw]) is None
    assert decoder.decode_values([b"\x0a\x01b" + b"\x0a\x01a"]).to_pylist() == [{"s": "a"}]
