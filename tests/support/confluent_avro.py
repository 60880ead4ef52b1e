"""Confluent Avro test values and jobs shared by the kafka tests: schemas, confluent-kafka's own `AvroSerializer`
against the test registry, a `confluent_avro` job, a run in this process, and the Avro output read back with Apache
Avro (not the fastavro the tool writes with)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gobblin_py.config import load_job
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import JobRunner
from support.jobs import write_job
from support.kafka_jobs import kafka_job

V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "int"},
    {"name": "customer", "type": "string"},
    {"name": "amount", "type": "float"},
]}
V2 = {**V1, "fields": [  # backward compatible: id and amount promoted, a field added with a default
    {"name": "id", "type": "long"},
    {"name": "customer", "type": "string"},
    {"name": "amount", "type": "double"},
    {"name": "channel", "type": "string", "default": "web"},
    {"name": "note", "type": ["null", "string"], "default": None},
]}


def datum(record: dict[str, Any], schema: dict[str, Any] = V1) -> bytes:
    """`record` as a bare Avro datum of `schema` (no Confluent header: the `avro` deserializer's wire format)."""
    import io

    import fastavro

    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), record)
    return buf.getvalue()


def serializer(registry_url: str, schema: dict[str, Any], **conf: Any) -> Any:
    """confluent-kafka's AvroSerializer for `schema` (registered on first use, as producers do)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer

    client = SchemaRegistryClient({"url": registry_url, **conf})
    return AvroSerializer(client, json.dumps(schema))


def serialize(ser: Any, topic: str, records: list[dict[str, Any]]) -> list[bytes]:
    from confluent_kafka.serialization import MessageField, SerializationContext

    ctx = SerializationContext(topic, MessageField.VALUE)
    return [ser(r, ctx) for r in records]


def orders(first: int, n: int) -> list[dict[str, Any]]:
    return [{"id": i, "customer": f"c{i % 7}", "amount": float(i) / 4} for i in range(first, first + n)]


def job_for(tmp: Path, bootstrap: str, topic: str, registry: dict[str, Any], writer: str = "avro", **source: Any) -> dict[str, Any]:
    job = kafka_job(tmp, bootstrap, [topic], deserializer="confluent_avro", schema_registry=registry, **source)
    del job["converters"]  # the registry's schema reaches the writer without json_to_avro
    job["writer"] = {"class": writer}
    return job


def run(tmp: Path, job: dict[str, Any]) -> Any:
    return JobRunner(load_job(write_job(tmp, job)), InProcessExecutor()).run()


def read_avro(root: Path) -> list[dict[str, Any]]:
    """Every record of every data file under `root`, read with Apache Avro (not the fastavro the tool writes with)."""
    from avro.datafile import DataFileReader
    from avro.io import DatumReader

    out = []
    for path in sorted(p for p in root.rglob("*.avro") if "_errors" not in p.parts):
        with DataFileReader(open(path, "rb"), DatumReader()) as reader:
            out.extend(reader)
    return out


def read_parquet(root: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    return [row for p in sorted(root.rglob("*.parquet")) for row in pq.read_table(p).to_pylist()]
