"""`deserializer: confluent_protobuf`: topics as Confluent's ProtobufSerializer writes them (magic byte 0, schema id,
message indexes, a Protobuf message), read into an Avro record schema derived from the message. Values are made by
confluent-kafka's own `ProtobufSerializer` against the test registry (tests/support/schema_registry.py), with message
classes built at test time (tests/support/protos.py), produced into Tansu, read by a run in this process, and the
output is read back by independent readers (Apache Avro's `DataFileReader`, pyarrow)."""

from __future__ import annotations

import datetime as dt
import struct
from pathlib import Path
from typing import Any

import pytest
from support.jobs import run_cli
from support.kafka_broker import create_topic, produce
from support.schema_registry import LocalSchemaRegistry

from gobblin_py.state.store import StateStore
from gobblin_py.testing.outputs import read_error_files

pytest.importorskip("google.protobuf", reason="needs protobuf (pip install -e '.[test]')")

from support.confluent_avro import read_avro, read_parquet, run
from support.kafka_jobs import kafka_job
from support.protos import message_class, order_file, tree_file

pytestmark = pytest.mark.kafka

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def serializer(registry_url: str, cls: Any) -> Any:
    """confluent-kafka's ProtobufSerializer for `cls` (registered on first use, as producers do)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    return ProtobufSerializer(cls, SchemaRegistryClient({"url": registry_url}), {"use.deprecated.format": False})


def serialize(ser: Any, topic: str, messages: list[Any]) -> list[bytes]:
    from confluent_kafka.serialization import MessageField, SerializationContext

    ctx = SerializationContext(topic, MessageField.VALUE)
    return [ser(m, ctx) for m in messages]


def order(cls: Any, i: int) -> Any:
    """An Order using every kind of field, varied by `i` (some left unset, to read as their defaults)."""
    m = cls(id=i, customer=f"c{i % 7}", amount=i / 4, status=i % 3, tags=[f"t{j}" for j in range(i % 3)],
            delta=-i, big=i * 1_000_000_007, flag=i % 2 == 0, blob=bytes([i % 256]), ratio=0.5)
    if i % 2:
        m.address.city, m.address.zip = f"city{i}", 10000 + i
        m.card = f"card{i}"
    else:
        m.voucher = i
    for j in range(i % 4):
        m.items.add(sku=f"s{j}", qty=j + 1)
    m.counts.update({f"k{j}": j * i for j in range(i % 3)})
    m.created.seconds, m.created.nanos = 1_767_225_600 + i, 123_456_000
    if i % 5 == 0:
        m.note = f"note{i}"
    if i % 3 == 0:
        m.parent.value = i - 1
    return m


def expected(i: int, **extra: Any) -> dict[str, Any]:
    """What the output holds for `order(cls, i)` (timestamps as epoch micros)."""
    return {"id": i, "customer": f"c{i % 7}", "amount": i / 4, "status": ["UNKNOWN", "PAID", "SHIPPED"][i % 3],
            "address": {"city": f"city{i}", "zip": 10000 + i} if i % 2 else None,
            "tags": [f"t{j}" for j in range(i % 3)], "items": [{"sku": f"s{j}", "qty": j + 1} for j in range(i % 4)],
            "counts": {f"k{j}": j * i for j in range(i % 3)},
            "card": f"card{i}" if i % 2 else None, "voucher": None if i % 2 else i,
            "created": (1_767_225_600 + i) * 1_000_000 + 123_456, "note": f"note{i}" if i % 5 == 0 else None,
            "parent": i - 1 if i % 3 == 0 else None, "delta": -i, "big": i * 1_000_000_007, "flag": i % 2 == 0,
            "blob": bytes([i % 256]), "ratio": 0.5, **extra}


def normalized(row: dict[str, Any]) -> dict[str, Any]:
    """A record as read back: timestamps as epoch micros, Parquet's maps (lists of pairs) as dicts."""
    out = dict(row)
    if isinstance(out.get("created"), dt.datetime):
        delta = out["created"] - EPOCH
        out["created"] = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(out.get("counts"), list):
        out["counts"] = dict(out["counts"])
    return out


def job_for(tmp: Path, bootstrap: str, topic: str, registry_url: str, writer: str = "avro", **source: Any) -> dict[str, Any]:
    job = kafka_job(tmp, bootstrap, [topic], deserializer="confluent_protobuf", schema_registry={"url": registry_url},
                    **source)
    del job["converters"]  # the derived schema reaches the writer without json_to_avro
    job["writer"] = {"class": writer}
    return job


@pytest.mark.parametrize(("writer", "client"), [("avro", "kafka-python"), ("parquet", "confluent")])
def test_every_value_lands_once_with_every_kind_of_field(tmp_path: Path, broker, topic: str,
                                                         schema_registry: LocalSchemaRegistry, writer: str, client: str) -> None:
    Order = message_class(order_file(), message="shop.Order")
    create_topic(broker.bootstrap, topic, 2)
    ser = serializer(schema_registry.url, Order)
    ids = {0: range(0, 60), 1: range(1000, 1045)}
    produce(broker.bootstrap, topic, {p: [(f"k{i}".encode(), v) for i, v in zip(r, serialize(ser, topic, [order(Order, i) for i in r]))]
                                      for p, r in ids.items()})
    job = job_for(tmp_path, broker.bootstrap, topic, schema_registry.url, writer, client=client,
                  metadata_columns=["key", "partition", "offset"])
    result = run(tmp_path, job)
    assert result.succeeded, result.error
    out = tmp_path / "output" / topic
    got = [normalized(r) for r in (read_avro(out) if writer == "avro" else read_parquet(out))]
    assert sorted(r["id"] for r in got) == sorted(i for r in ids.values() for i in r)  # each once
    by_id = {r["id"]: r for r in got}
    for p, r in ids.items():
        for offset, i in enumerate(r):
            assert by_id[i] == expected(i, _kafka_key=f"k{i}", _kafka_partition=p, _kafka_offset=offset)
    assert not read_error_files(tmp_path / "output")
    state = StateStore(tmp_path / "work", "k")
    assert {int(k): v for k, v in state.watermarks()[topic].items()} == {0: 60, 1: 45}
    assert state.dataset_state(topic)["source"]["value_schema"] == {"subject": f"{topic}-value", "version": 1, "id": 1}


def test_a_field_added_mid_stream_reads_old_values_with_its_default(tmp_path: Path, broker, topic: str,
                                                                    schema_registry: LocalSchemaRegistry) -> None:
    V1 = message_class(order_file(), message="shop.Order")
    V2 = message_class(order_file(extra=True), message="shop.Order")
    create_topic(broker.bootstrap, topic, 1)
    old = serialize(serializer(schema_registry.url, V1), topic, [order(V1, i) for i in range(30)])
    produce(broker.bootstrap, topic, {0: old[:10]})
    first = run(tmp_path, job_for(tmp_path, broker.bootstrap, topic, schema_registry.url))
    assert first.succeeded, first.error
    new = []
    for i in range(30, 45):
        m = order(V2, i)
        m.channel = f"app{i}"
        new.append(m)
    produce(broker.bootstrap, topic, {0: old[10:] + serialize(serializer(schema_registry.url, V2), topic, new)})
    second = run(tmp_path, job_for(tmp_path, broker.bootstrap, topic, schema_registry.url))
    assert second.succeeded, second.error
    records = sorted((normalized(r) for r in read_avro(tmp_path / "output" / topic)), key=lambda r: r["id"])
    assert [r["id"] for r in records] == list(range(45))
    assert records[:10] == [expected(i) for i in range(10)]  # the first run wrote version 1
    assert records[10:30] == [expected(i, channel="") for i in range(10, 30)]  # version-1 values: proto3's default
    assert records[30:] == [expected(i, channel=f"app{i}") for i in range(30, 45)]
    notices = [n for d in second.datasets for n in d.notices]
    assert any(f"is now subject '{topic}-value' version 2" in n for n in notices), notices


def test_values_that_cannot_be_read_go_to_the_error_file_naming_offset_and_schema_id(
        tmp_path: Path, broker, topic: str, schema_registry: LocalSchemaRegistry) -> None:
    Order = message_class(order_file(), message="shop.Order")
    create_topic(broker.bootstrap, topic, 1)
    good = serialize(serializer(schema_registry.url, Order), topic, [order(Order, i) for i in range(10)])
    unknown = b"\x00" + struct.pack(">I", 4242) + good[0][5:]
    foreign = b'{"id": 3}'  # JSON, not Confluent's format
    cut = order(Order, 7)
    cut.customer = "a customer name long enough to cut"
    whole = serialize(serializer(schema_registry.url, Order), topic, [cut])[0]
    truncated = whole[:whole.index(b"a customer") + 5]  # cut inside the string
    bad_index = good[1][:5] + b"\x02\x0e" + good[1][6:]  # indexes [7]: no such message
    values = [*good[:3], foreign, *good[3:6], unknown, truncated, bad_index, *good[6:]]
    offsets = {v: i for i, v in enumerate(values)}
    produce(broker.bootstrap, topic, {0: values})
    result = run(tmp_path, job_for(tmp_path, broker.bootstrap, topic, schema_registry.url))
    assert result.succeeded, result.error
    assert sorted(r["id"] for r in read_avro(tmp_path / "output" / topic)) == list(range(10))
    entries = read_error_files(tmp_path / "output")
    errors = {e["location"]: e["reason"] for e in entries}
    where = f"{topic}/0@"
    assert set(errors) == {f"{where}{offsets[v]}" for v in (foreign, unknown, truncated, bad_index)}
    assert "not in Confluent's wire format" in errors[f"{where}{offsets[foreign]}"]
    assert "schema id 4242: not in schema registry" in errors[f"{where}{offsets[unknown]}"]
    assert "schema id 1: the Protobuf payload does not parse" in errors[f"{where}{offsets[truncated]}"]
    assert "schema id 1: message indexes [7]" in errors[f"{where}{offsets[bad_index]}"]


def test_a_recursive_message_is_refused_at_planning_naming_it(tmp_path: Path, broker, topic: str,
                                                             schema_registry: LocalSchemaRegistry) -> None:
    Tree = message_class(tree_file(), message="shop.Tree")
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, {0: serialize(serializer(schema_registry.url, Tree), topic, [Tree(label="root")])})
    result = run(tmp_path, job_for(tmp_path, broker.bootstrap, topic, schema_registry.url))
    assert not result.succeeded
    assert f"topic {topic!r}: subject '{topic}-value' version 1 (schema id 1): message shop.Tree is recursive" in result.error, \
        result.error
    assert not (tmp_path / "output").exists()
    assert StateStore(tmp_path / "work", "k").watermarks() == {}


def test_imports_registered_as_references_are_resolved(tmp_path: Path, broker, topic: str,
                                                      schema_registry: LocalSchemaRegistry) -> None:
    """The serializer registers an imported file under its own subject and the message's schema with a reference to
    it: the reader fetches that version, as Confluent's deserializer does."""
    from google.protobuf import descriptor_pb2
    from support.protos import _field

    common = descriptor_pb2.FileDescriptorProto(name="shop/common.proto", package="shop.common", syntax="proto3")
    money = common.message_type.add(name="Money")
    money.field.extend([_field("currency", 1, "string"), _field("cents", 2, "int64")])
    main = descriptor_pb2.FileDescriptorProto(name="shop/payment.proto", package="shop", syntax="proto3",
                                              dependency=["shop/common.proto"])
    payment = main.message_type.add(name="Payment")
    payment.field.extend([_field("id", 1, "int32"), _field("total", 2, "message", type_name=".shop.common.Money")])
    Payment = message_class(common, main, message="shop.Payment")
    create_topic(broker.bootstrap, topic, 1)
    msgs = [Payment(id=i, total={"currency": "EUR", "cents": i * 100}) for i in range(5)]
    produce(broker.bootstrap, topic, {0: serialize(serializer(schema_registry.url, Payment), topic, msgs)})
    assert schema_registry.state.references  # registered with a reference, as Confluent's serializer does
    result = run(tmp_path, job_for(tmp_path, broker.bootstrap, topic, schema_registry.url, "parquet"))
    assert result.succeeded, result.error
    assert sorted(read_parquet(tmp_path / "output" / topic), key=lambda r: r["id"]) == [
        {"id": i, "total": {"currency": "EUR", "cents": i * 100}} for i in range(5)]


def test_settings_need_a_registry_and_protobuf_message_only_with_confluent_protobuf() -> None:
    from gobblin_py.builtin.sources.kafka.settings import KafkaSettings

    with pytest.raises(ValueError, match="deserializer confluent_protobuf needs schema_registry"):
        KafkaSettings(bootstrap_servers="127.0.0.1:9", topics=["t"], deserializer="confluent_protobuf")
    with pytest.raises(ValueError, match="protobuf_message is read only with deserializer: confluent_protobuf"):
        KafkaSettings(bootstrap_servers="127.0.0.1:9", topics=["t"], deserializer="confluent_avro",
                      schema_registry={"url": "http://127.0.0.1:9"}, protobuf_message="shop.Order")


def test_a_gobblin_confluent_protobuf_job_validates_and_runs(tmp_path: Path, broker, topic: str,
                                                             schema_registry: LocalSchemaRegistry) -> None:
    Order = message_class(order_file(), message="shop.Order")
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, {0: serialize(serializer(schema_registry.url, Order), topic,
                                                   [order(Order, i) for i in range(20)])})
    pull = tmp_path / "orders.pull"
    pull.write_text(
        "job.name=confluent-orders\n"
        "source.class=org.apache.gobblin.source.extractor.extract.kafka.KafkaDeserializerSource\n"
        f"kafka.brokers={broker.bootstrap}\nkafka.deserializer.type=CONFLUENT_PROTOBUF\n"
        f"kafka.schema.registry.url={schema_registry.url}\n"
        "kafka.schema.registry.class=org.apache.gobblin.kafka.schemareg.ConfluentKafkaSchemaRegistry\n"
        f"topic.whitelist={topic}\nbootstrap.with.offset=earliest\n"
        "writer.builder.class=org.apache.gobblin.writer.AvroDataWriterBuilder\nwriter.output.format=AVRO\n"
        "writer.file.path.type=tablename\n"
        f"data.publisher.final.dir={tmp_path / 'output'}\nstate.store.dir={tmp_path / 'state'}\n"
        f"writer.staging.dir={tmp_path / 'staging'}\nwriter.output.dir={tmp_path / 'task-output'}\n")
    checked = run_cli("validate", str(pull), cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    ran = run_cli("run", str(pull), "--in-process", cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    got = sorted((normalized(r) for r in read_avro(tmp_path / "output")), key=lambda r: r["id"])
    assert got == [expected(i) for i in range(20)]


def test_a_writer_whose_fields_the_output_would_drop_fails_the_range(tmp_path: Path, broker, topic: str,
                                                                     schema_registry: LocalSchemaRegistry) -> None:
    """A writer with a field the output lacks, registered under no version of the subject (another subject here): read
    into the output its values would be lost, so the task fails, as confluent_avro's LossyRead."""
    V1 = message_class(order_file(), message="shop.Order")
    V2 = message_class(order_file(extra=True), message="shop.Order")
    create_topic(broker.bootstrap, topic, 1)
    good = serialize(serializer(schema_registry.url, V1), topic, [order(V1, i) for i in range(3)])
    newer = order(V2, 3)
    newer.channel = "app"
    stray = serialize(serializer(schema_registry.url, V2), f"{topic}-elsewhere", [newer])
    produce(broker.bootstrap, topic, {0: [*good, *stray]})
    failed = run(tmp_path, job_for(tmp_path, broker.bootstrap, topic, schema_registry.url))
    assert not failed.succeeded
    assert f"{topic}/0@3" in failed.error and f"(no version of subject '{topic}-value') has field(s) channel" in failed.error, \
        failed.error
    assert StateStore(tmp_path / "work", "k").watermarks() == {}
