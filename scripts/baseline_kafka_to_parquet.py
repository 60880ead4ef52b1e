"""The one-process pipeline a competent engineer writes for a Kafka topic → Parquet, which gobblin-py's Parquet and
Iceberg sinks are measured against: confluent-kafka `consume(10000)` over every partition until each reaches its end
offset → each value decoded (`orjson.loads` of JSON; with `--registry`, Confluent Avro through confluent-kafka's own
`AvroDeserializer`, writer schemas fetched by id and cached; with `--registry` and `--protobuf`, Confluent Protobuf through
confluent-kafka's `ProtobufDeserializer` and a hand-written message → dict of the bench's order,
scripts/bench_protobuf_orders.py) → `pa.Table.from_pylist` per chunk (JSON: an explicit
schema; Avro: the first chunk's) → one `pq.ParquetWriter` (zstd, as gobblin-py's parquet writer), one file.

    python scripts/baseline_kafka_to_parquet.py BOOTSTRAP TOPIC OUT.parquet --ends 0=250000,1=250000 [--registry URL [--protobuf]]

Prints one JSON line: records, seconds, records_per_s.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import Consumer, KafkaError, TopicPartition

SCHEMA = pa.schema([("id", pa.int64()), ("user", pa.string()), ("page", pa.string()), ("amount", pa.float64()),
                    ("ts", pa.int64()), ("ok", pa.bool_())])


def avro_values(registry: str, topic: str) -> Callable[[bytes], Any]:
    """A value in Confluent's wire format as a dict, by confluent-kafka's `AvroDeserializer`."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    deserialize = AvroDeserializer(SchemaRegistryClient({"url": registry}))
    ctx = SerializationContext(topic, MessageField.VALUE)
    return lambda value: deserialize(value, ctx)


def protobuf_values(topic: str) -> Callable[[bytes], Any]:
    """A value of the bench's Protobuf order in Confluent's wire format as a dict, by confluent-kafka's
    `ProtobufDeserializer` (the message class known, as a consumer of generated code has it) and a per-field dict."""
    from bench_protobuf_orders import order_class, row
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    deserialize = ProtobufDeserializer(order_class(), {"use.deprecated.format": False})
    ctx = SerializationContext(topic, MessageField.VALUE)
    return lambda value: row(deserialize(value, ctx))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("bootstrap")
    p.add_argument("topic")
    p.add_argument("out", type=Path)
    p.add_argument("--ends", required=True, help="partition=end offset, comma separated")
    p.add_argument("--registry", help="the schema registry's URL: values are Confluent Avro")
    p.add_argument("--protobuf", action="store_true", help="with --registry: values are Confluent Protobuf (the bench's order)")
    args = p.parse_args()
    ends = {int(k): int(v) for k, v in (kv.split("=") for kv in args.ends.split(","))}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    decode = (protobuf_values(args.topic) if args.protobuf else avro_values(args.registry, args.topic)) if args.registry \
        else orjson.loads
    schema = None if args.registry else SCHEMA
    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": "baseline-kafka-to-parquet",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         # the default 1 s would idle the loop whenever the prefetch queue fills; gobblin-py sets 10 ms too
                         "fetch.queue.backoff.ms": 10})
    consumer.assign([TopicPartition(args.topic, partition, 0) for partition in ends])
    left = {partition for partition, end in ends.items() if end > 0}
    total, writer = 0, None
    while left:
        rows = []
        for msg in consumer.consume(10000, timeout=1.0):
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise SystemExit(f"consume failed: {msg.error()}")
            partition, offset = msg.partition(), msg.offset()
            if partition not in left or offset >= ends[partition]:
                continue
            rows.append(decode(msg.value()))
            if offset == ends[partition] - 1:
                left.discard(partition)
        if rows:
            table = pa.Table.from_pylist(rows, schema=schema)
            if writer is None:
                writer = pq.ParquetWriter(args.out, table.schema, compression="zstd")
            writer.write_table(table)
            total += len(rows)
    if writer is not None:
        writer.close()
    consumer.close()
    took = time.perf_counter() - t0
    print(json.dumps({"records": total, "seconds": round(took, 3), "records_per_s": round(total / took)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
