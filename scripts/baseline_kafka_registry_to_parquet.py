"""The one-process pipeline a competent engineer writes for a topic of Confluent Avro values → Parquet, which
`deserializer: confluent_avro` is measured against: confluent-kafka `consume(10000)` over every partition until each
reaches its end offset → confluent-kafka's own `AvroDeserializer` (schema-registry client, writer schemas fetched by
id and cached) for each value → `pa.Table.from_pylist` per chunk → one `pq.ParquetWriter` (zstd), one file.

    python scripts/baseline_kafka_registry_to_parquet.py BOOTSTRAP REGISTRY_URL TOPIC OUT.parquet --ends 0=250000,1=250000

Prints one JSON line: records, seconds, records_per_s.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("bootstrap")
    p.add_argument("registry")
    p.add_argument("topic")
    p.add_argument("out", type=Path)
    p.add_argument("--ends", required=True, help="partition=end offset, comma separated")
    args = p.parse_args()
    ends = {int(k): int(v) for k, v in (kv.split("=") for kv in args.ends.split(","))}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    deserialize = AvroDeserializer(SchemaRegistryClient({"url": args.registry}))
    ctx = SerializationContext(args.topic, MessageField.VALUE)
    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": "baseline-kafka-registry-to-parquet",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest", "fetch.queue.backoff.ms": 10})
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
            rows.append(deserialize(msg.value(), ctx))
            if offset == ends[partition] - 1:
                left.discard(partition)
        if rows:
            table = pa.Table.from_pylist(rows)
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
