"""`deserializer: confluent_protobuf` on the columnar path (a poll's payloads decoded into Arrow a field at a time,
`schemas/protobuf_columns.py`) against the same job record by record (`job.columnar: false`), on a real broker with a
schema registry and values made by confluent-kafka's `ProtobufSerializer`: a partition of clean flat messages takes the
columnar path whole and its files are byte for byte the row path's; a partition with a string that is not UTF-8, a
tombstone and a cut payload has its other batches columnar, and both paths write the same files and bad records."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from support.jobs import write_job
from support.kafka_broker import create_topic, produce
from support.schema_registry import LocalSchemaRegistry

from gobblin_py.builtin.sources.kafka.split import KafkaSplit
from gobblin_py.config import load_job
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import JobRunner
from gobblin_py.testing.outputs import read_error_files

pytest.importorskip("google.protobuf", reason="needs protobuf (pip install -e '.[test]')")

from support.kafka_jobs import kafka_job

pytestmark = pytest.mark.kafka


def serialize(registry_url: str, cls: Any, topic: str, messages: list[Any]) -> list[bytes]:
    """`messages` as confluent-kafka's ProtobufSerializer writes them (registering the schema on first use)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    ser = ProtobufSerializer(cls, SchemaRegistryClient({"url": registry_url}), {"use.deprecated.format": False})
    ctx = SerializationContext(topic, MessageField.VALUE)
    return [ser(m, ctx) for m in messages]


def flat_order() -> Any:
    """shop.Flat: every flat scalar kind, an enum, proto3 `optional`, a Timestamp."""
    from google.protobuf import descriptor_pb2, descriptor_pool, timestamp_pb2
    from google.protobuf.message_factory import GetMessageClass

    F = descriptor_pb2.FieldDescriptorProto
    fd = descriptor_pb2.FileDescriptorProto(name="shop/flat.proto", package="shop", syntax="proto3",
                                            dependency=["google/protobuf/timestamp.proto"])
    m = fd.message_type.add(name="Flat")
    kinds = [("id", F.TYPE_INT64), ("customer", F.TYPE_STRING), ("amount", F.TYPE_DOUBLE), ("qty", F.TYPE_INT32),
             ("paid", F.TYPE_BOOL), ("channel", F.TYPE_ENUM), ("delta", F.TYPE_SINT64), ("small", F.TYPE_SINT32),
             ("u32", F.TYPE_UINT32), ("u64", F.TYPE_UINT64), ("f32", F.TYPE_FIXED32), ("sf64", F.TYPE_SFIXED64),
             ("score", F.TYPE_FLOAT), ("blob", F.TYPE_BYTES), ("ts", F.TYPE_MESSAGE), ("note", F.TYPE_STRING),
             ("discount", F.TYPE_DOUBLE)]
    for number, (name, kind) in enumerate(kinds, 1):
        extra: dict[str, Any] = {}
        if name == "channel":
            extra["type_name"] = ".shop.Flat.Channel"
        if name == "ts":
            extra["type_name"] = ".google.protobuf.Timestamp"
        if name in ("note", "discount"):
            extra.update(oneof_index=len(m.oneof_decl), proto3_optional=True)
            m.oneof_decl.add(name=f"_{name}")
        m.field.add(name=name, number=number, type=kind, label=F.LABEL_OPTIONAL, json_name=name, **extra)
    channel = m.enum_type.add(name="Channel")
    for number, name in enumerate(("WEB", "APP", "POS")):
        channel.value.add(name=name, number=number)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(timestamp_pb2.DESCRIPTOR.serialized_pb))
    pool.Add(fd)
    return GetMessageClass(pool.FindMessageTypeByName("shop.Flat"))


def flat(cls: Any, i: int) -> Any:
    m = cls(id=i, customer=("", "zoë", "客户", f"c{i % 97}")[i % 4], amount=(math.nan, -0.0, 1e300, i / 8)[i % 4],
            qty=(-(2**31), 2**31 - 1, 0, i)[i % 4], paid=i % 3 == 0, channel=i % 3, delta=-i * 7919, small=-i,
            u32=2**32 - 1 - i, u64=i * 1_000_000_007, f32=i, sf64=-i, score=(math.inf, i / 3)[i % 2],
            blob=bytes([i % 256]) * (i % 5))
    if i % 4:
        m.ts.seconds, m.ts.nanos = 1_767_225_600 + i, (i * 1_000_123) % 1_000_000_000
    if i % 2 == 0:
        m.note = f"n-{i}"
    if i % 5 == 0:
        m.discount = i / 100
    return m


def _files(output: Path) -> dict[str, bytes]:
    return {str(p.relative_to(output)): p.read_bytes() for p in sorted(output.rglob("*"))
            if p.is_file() and p.suffix == ".parquet" and "_errors" not in p.parts}


def test_the_columnar_confluent_protobuf_path_writes_what_the_row_path_writes(
        tmp_path: Path, broker, topic: str, schema_registry: LocalSchemaRegistry) -> None:
    import io

    import pyarrow.parquet as pq

    cls = flat_order()
    create_topic(broker.bootstrap, topic, 2)
    clean = serialize(schema_registry.url, cls, topic, [flat(cls, i) for i in range(400)])
    mixed = serialize(schema_registry.url, cls, topic, [flat(cls, i) for i in range(1000, 1300)])
    header = mixed[0][:6]  # magic byte, schema id, message indexes [0]
    not_utf8 = header + bytes([0x08, 0x05, 0x12, 0x02, 0xC3, 0x28])  # id 5, customer: invalid UTF-8 (proto3 rejects)
    cut = mixed[150][:-3]
    produce(broker.bootstrap, topic, {
        0: [(f"k{i}".encode(), v) for i, v in enumerate(clean)],
        1: [(f"m{i}".encode(), v) for i, v in enumerate(mixed[:150])] + [(b"bad", not_utf8), (b"cut", cut),
                                                                           (b"tomb", None)]
           + [(f"m{i}".encode(), v) for i, v in enumerate(mixed[151:])],
    })
    results = {}
    for columnar in (True, False):
        tmp = tmp_path / ("columnar" if columnar else "rows")
        tmp.mkdir()
        job = kafka_job(tmp, broker.bootstrap, [topic], deserializer="confluent_protobuf",
                        schema_registry={"url": schema_registry.url}, client="confluent", max_poll_records=64,
                        metadata_columns=["key", "topic", "partition", "offset", "timestamp"])
        del job["converters"]
        job["writer"] = {"class": "parquet"}
        job["job"]["columnar"] = columnar
        results[columnar] = JobRunner(load_job(write_job(tmp, job)), InProcessExecutor()).run()
        assert results[columnar].succeeded, results[columnar].error
    fast, slow = _files(tmp_path / "columnar" / "output"), _files(tmp_path / "rows" / "output")
    assert fast.keys() == slow.keys() and fast
    for name in fast:
        a, b = pq.read_table(io.BytesIO(fast[name])).to_pylist(), pq.read_table(io.BytesIO(slow[name])).to_pylist()
        assert repr(a) == repr(b), name  # repr: NaN equal to NaN, -0.0 told from 0.0
        assert fast[name] == slow[name], name
    rows = [r for data in fast.values() for r in pq.read_table(io.BytesIO(data)).to_pylist()]
    assert sorted(r["id"] for r in rows) == sorted([*range(400), *(i for i in range(1000, 1300) if i != 1150)])
    by_id = {r["id"]: r for r in rows}
    assert by_id[1000]["ts"] is None and by_id[1001]["note"] is None and by_id[1000]["note"] == "n-1000"
    assert by_id[1000]["discount"] == 10.0 and by_id[1001]["discount"] is None and by_id[2]["channel"] == "POS"
    errors = {str(e) for e in read_error_files(tmp_path / "columnar" / "output")}
    assert errors == {str(e) for e in read_error_files(tmp_path / "rows" / "output")} and len(errors) >= 2
    by_partition = {KafkaSplit.of(t.workunit).partition: t for t in results[True].tasks}
    assert by_partition[0].records_columnar == by_partition[0].records_extracted == 400  # every batch whole
    assert 0 < by_partition[1].records_columnar < by_partition[1].records_extracted  # the odd batches by record
    assert all(t.records_columnar == 0 for t in results[False].tasks)
