"""Benchmark: a topic of Confluent Avro (or Protobuf) values (12 fields) → Parquet, gobblin-py against a one-process script.

    .venv/bin/python scripts/bench_kafka_registry.py [--records 2000000] [--rounds 2] [--format avro|protobuf] [--row-path]

Starts a local broker (Tansu, 127.0.0.1) and the tests' schema-registry server (tests/support/schema_registry.py: no
registry installs here; the clients are confluent-kafka's own), produces N values serialized by confluent-kafka's
`AvroSerializer` into 4 sealed partitions, then, `rounds` times, each cold in a child process from a fresh directory,
the order rotated: `gobblin-py run` (kafka source, `client: confluent`, `deserializer: confluent_avro` → the parquet
writer, local[2], placed as shipped) and scripts/baseline_kafka_to_parquet.py --registry (confluent-kafka `consume` →
`AvroDeserializer` → pyarrow → one Parquet file). Both outputs are read back with pyarrow: a tool that loses or doubles
a record is WRONG and never the fastest. Writes scripts/results/bench_kafka_registry-<N>.json.

`--format protobuf`: the same order as a Protobuf message (scripts/bench_protobuf_orders.py) serialized by
confluent-kafka's `ProtobufSerializer`; gobblin-py reads it with `deserializer: confluent_protobuf`, the baseline with
`ProtobufDeserializer` and a hand-written message → dict. Writes scripts/results/bench_kafka_registry_protobuf-<N>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # the local broker and the registry are test helpers
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from bench_common import (  # noqa: E402  (scripts/ is on sys.path: these run as scripts)
    Tool,
    compare,
    cpu_seconds,
    data_files,
    gobblin_details,
    parquet_read_back,
    print_comparison,
    run_rounds,
)
from bench_kafka import PARTITIONS, produce  # noqa: E402
from bench_results import save  # noqa: E402
from support.kafka_broker import LocalBroker, create_topic  # noqa: E402
from support.schema_registry import LocalSchemaRegistry  # noqa: E402

TOPIC = "orders"
SCHEMA = {"type": "record", "name": "Order", "namespace": "bench", "fields": [
    {"name": "id", "type": "long"}, {"name": "customer", "type": "string"}, {"name": "country", "type": "string"},
    {"name": "amount", "type": "double"}, {"name": "qty", "type": "int"}, {"name": "paid", "type": "boolean"},
    {"name": "channel", "type": "string"}, {"name": "discount", "type": ["null", "double"], "default": None},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}}, {"name": "sku", "type": "string"},
    {"name": "score", "type": "float"}, {"name": "note", "type": ["null", "string"], "default": None},
]}
COUNTRIES = ["DE", "FR", "US", "GB", "JP", "BR", "IN", "NL", "SE", "PL"]


def avro_orders(registry: str) -> Callable[[int], bytes]:
    """Order `i` serialized by confluent-kafka's AvroSerializer (the schema registered on first use, as producers do)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serialize = AvroSerializer(SchemaRegistryClient({"url": registry}), json.dumps(SCHEMA))
    ctx = SerializationContext(TOPIC, MessageField.VALUE)
    rng = random.Random(3)

    def value(i: int) -> bytes:
        return serialize({"id": i, "customer": f"c-{rng.randrange(100000):06d}", "country": rng.choice(COUNTRIES),
                          "amount": round(rng.random() * 1000, 2), "qty": rng.randrange(1, 20), "paid": i % 3 != 0,
                          "channel": ("web", "app", "pos")[i % 3], "discount": None if i % 4 else 0.1,
                          "ts": 1767225600000 + i * 37, "sku": f"sku-{i % 5000}", "score": rng.random(),
                          "note": None if i % 5 else f"note {i}"}, ctx)
    return value


def protobuf_orders(registry: str) -> Callable[[int], bytes]:
    """Order `i` (the Avro order's values) serialized by confluent-kafka's ProtobufSerializer."""
    from bench_protobuf_orders import order_class
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    Order = order_class()
    serialize = ProtobufSerializer(Order, SchemaRegistryClient({"url": registry}), {"use.deprecated.format": False})
    ctx = SerializationContext(TOPIC, MessageField.VALUE)
    rng = random.Random(3)

    def value(i: int) -> bytes:
        m = Order(id=i, customer=f"c-{rng.randrange(100000):06d}", country=rng.choice(COUNTRIES),
                  amount=round(rng.random() * 1000, 2), qty=rng.randrange(1, 20), paid=i % 3 != 0, channel=i % 3,
                  sku=f"sku-{i % 5000}", score=rng.random())
        ms = 1767225600000 + i * 37
        m.ts.seconds, m.ts.nanos = ms // 1000, ms % 1000 * 1_000_000
        if i % 4 == 0:
            m.discount = 0.1
        if i % 5 == 0:
            m.note = f"note {i}"
        return serialize(m, ctx)
    return value


def job_file(tmp: Path, bootstrap: str, registry: str, deserializer: str = "confluent_avro", columnar: bool = True) -> Path:
    job = {"job": {"name": "bench", "work_dir": str(tmp / "work"), **({} if columnar else {"columnar": False})},
           "source": {"class": "kafka", "bootstrap_servers": bootstrap, "topics": [TOPIC], "max_workunits": PARTITIONS,
                      "client": "confluent", "deserializer": deserializer, "schema_registry": {"url": registry}},
           "writer": {"class": "parquet"},
           "publisher": {"final_dir": str(tmp / "output")},
           "spark": {"master": "local[2]"}}
    path = tmp / "job.yaml"
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--format", choices=("avro", "protobuf"), default="avro")
    ap.add_argument("--row-path", action="store_true",
                    help="also run gobblin-py with job.columnar: false (the row path: the code before a columnar "
                         "decoder, in the same invocation)")
    args = ap.parse_args()
    proto = args.format == "protobuf"
    py = sys.executable
    # the children run this checkout's package, not whichever one the venv installed (a worktree measures itself)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1",
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}
    with LocalBroker() as broker, LocalSchemaRegistry() as registry, tempfile.TemporaryDirectory(prefix="bench-reg-") as scratch:
        create_topic(broker.bootstrap, TOPIC, PARTITIONS)
        t0 = time.perf_counter()
        ends = produce(broker.bootstrap, args.records, (protobuf_orders if proto else avro_orders)(registry.url), TOPIC)
        total = sum(ends.values())
        print(f"produced {total} records in {time.perf_counter() - t0:.1f}s: {ends}", flush=True)
        ends_arg = ",".join(f"{p}={e}" for p, e in sorted(ends.items()))
        script = str(REPO / "scripts" / "baseline_kafka_to_parquet.py")
        contenders = [
            Tool("gobblin-py", "parquet", lambda d: [py, "-m", "gobblin_py.cli.main", "run",
                                                     str(job_file(d, broker.bootstrap, registry.url,
                                                                  "confluent_protobuf" if proto else "confluent_avro"))],
                 lambda d: parquet_read_back(data_files(d / "output", ".parquet")), env=lambda d: env,
                 details=gobblin_details),
            Tool(f"confluent+{args.format}+pyarrow", "parquet",
                 lambda d: [py, script, broker.bootstrap, TOPIC, str(d / "orders.parquet"), "--ends", ends_arg,
                            "--registry", registry.url, *(["--protobuf"] if proto else [])],
                 lambda d: parquet_read_back([d / "orders.parquet"]), env=lambda d: env),
        ]
        if args.row_path:
            contenders.insert(1, Tool("gobblin-py-rows", "parquet", lambda d: [
                py, "-m", "gobblin_py.cli.main", "run", str(job_file(
                    d, broker.bootstrap, registry.url, "confluent_protobuf" if proto else "confluent_avro", False))],
                lambda d: parquet_read_back(data_files(d / "output", ".parquet")), env=lambda d: env,
                details=gobblin_details))
        figures = run_rounds(contenders, args.rounds, total, Path(scratch) / "runs", lambda: cpu_seconds(broker.pid))
    comparison = compare(figures, total, {t.name: t.writes for t in contenders})
    print_comparison(comparison)
    save(f"bench_kafka_registry{'_protobuf' if proto else ''}-{total}", {"records": total, "rounds": args.rounds, "machine_cores": os.cpu_count(),
                                           "comparison": comparison, "figures": figures})


if __name__ == "__main__":
    main()
