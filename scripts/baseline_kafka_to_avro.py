"""The hand-written pipeline gobblin-py is measured against: one process, kafka-python assign + seek +
poll → json.loads → fastavro writer, one Avro file per partition.

    python scripts/baseline_kafka_to_avro.py BOOTSTRAP TOPIC OUT_DIR --ends 0=250000,1=250000 [--codec deflate]

Prints one JSON line: records, seconds, records_per_s.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import fastavro
from kafka import KafkaConsumer, TopicPartition

SCHEMA = fastavro.parse_schema({
    "type": "record", "name": "BenchEvent", "fields": [
        {"name": "id", "type": "long"}, {"name": "user", "type": "string"}, {"name": "page", "type": "string"},
        {"name": "amount", "type": "double"}, {"name": "ts", "type": "long"}, {"name": "ok", "type": "boolean"},
    ]})


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("bootstrap")
    p.add_argument("topic")
    p.add_argument("out", type=Path)
    p.add_argument("--ends", required=True, help="partition=end offset, comma separated")
    p.add_argument("--codec", default="deflate")
    args = p.parse_args()
    ends = {int(k): int(v) for k, v in (kv.split("=") for kv in args.ends.split(","))}
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    consumer = KafkaConsumer(bootstrap_servers=args.bootstrap, group_id=None, enable_auto_commit=False,
                             fetch_max_bytes=64 * 1024 * 1024, max_partition_fetch_bytes=16 * 1024 * 1024,
                             fetch_max_wait_ms=200)
    total = 0
    for partition, end in sorted(ends.items()):
        tp = TopicPartition(args.topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        with open(args.out / f"{args.topic}-{partition}.avro", "wb") as f:
            writer = fastavro.write.Writer(f, SCHEMA, codec=args.codec)
            offset = 0
            while offset < end:
                for rec in consumer.poll(timeout_ms=1000, max_records=20000).get(tp, ()):
                    if rec.offset >= end:
                        offset = end
                        break
                    writer.write(json.loads(rec.value))
                    offset = rec.offset + 1
                    total += 1
            writer.flush()
    consumer.close()
    took = time.perf_counter() - t0
    print(json.dumps({"records": total, "seconds": round(took, 3), "records_per_s": round(total / took)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
