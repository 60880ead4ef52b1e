"""The Protobuf twin of the registry bench's 12-field Avro order (bench.Order), built at run time (no protoc here): a
FileDescriptorProto written with descriptor_pb2, its class made by message_factory. Shared by
scripts/bench_kafka_registry.py --format protobuf (which serializes it) and scripts/baseline_kafka_to_parquet.py
--protobuf (which reads it back with confluent-kafka's ProtobufDeserializer)."""

from __future__ import annotations

from typing import Any

CHANNELS = ("WEB", "APP", "POS")


def order_class() -> Any:
    """bench.Order: id int64, customer, country, amount double, qty int32, paid bool, channel enum, discount optional
    double, ts Timestamp, sku, score float, note optional string."""
    from google.protobuf import descriptor_pb2, descriptor_pool, timestamp_pb2
    from google.protobuf.message_factory import GetMessageClass

    F = descriptor_pb2.FieldDescriptorProto
    fd = descriptor_pb2.FileDescriptorProto(name="bench/order.proto", package="bench", syntax="proto3",
                                            dependency=["google/protobuf/timestamp.proto"])
    order = fd.message_type.add(name="Order")
    order.oneof_decl.add(name="_discount")
    order.oneof_decl.add(name="_note")
    for number, (name, kind, extra) in enumerate([
            ("id", F.TYPE_INT64, {}), ("customer", F.TYPE_STRING, {}), ("country", F.TYPE_STRING, {}),
            ("amount", F.TYPE_DOUBLE, {}), ("qty", F.TYPE_INT32, {}), ("paid", F.TYPE_BOOL, {}),
            ("channel", F.TYPE_ENUM, {"type_name": ".bench.Order.Channel"}),
            ("discount", F.TYPE_DOUBLE, {"oneof_index": 0, "proto3_optional": True}),
            ("ts", F.TYPE_MESSAGE, {"type_name": ".google.protobuf.Timestamp"}), ("sku", F.TYPE_STRING, {}),
            ("score", F.TYPE_FLOAT, {}), ("note", F.TYPE_STRING, {"oneof_index": 1, "proto3_optional": True})], 1):
        order.field.add(name=name, number=number, type=kind, label=F.LABEL_OPTIONAL, json_name=name, **extra)
    channel = order.enum_type.add(name="Channel")
    for number, name in enumerate(CHANNELS):
        channel.value.add(name=name, number=number)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(timestamp_pb2.DESCRIPTOR.serialized_pb))
    pool.Add(fd)
    return GetMessageClass(pool.FindMessageTypeByName("bench.Order"))


def row(m: Any) -> dict[str, Any]:
    """An Order as the row a hand-written script makes of it (ts as epoch micros, unset optionals as None)."""
    return {"id": m.id, "customer": m.customer, "country": m.country, "amount": m.amount, "qty": m.qty, "paid": m.paid,
            "channel": CHANNELS[m.channel], "discount": m.discount if m.HasField("discount") else None,
            "ts": m.ts.seconds * 1_000_000 + m.ts.nanos // 1000, "sku": m.sku, "score": m.score,
            "note": m.note if m.HasField("note") else None}
