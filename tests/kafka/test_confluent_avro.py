"""`deserializer: confluent_avro`: topics as Confluent's serializers write them (magic byte 0, schema id, Avro datum),
read with the schemas of a schema registry. Values are made by confluent-kafka's own `AvroSerializer` against the
test registry (tests/support/schema_registry.py), produced into Tansu, read by a run in this process, and the output is
read back by independent readers (Apache Avro's `DataFileReader`, pyarrow)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from support.confluent_avro import V1, V2, job_for, orders, read_avro, read_parquet, run, serialize, serializer
from support.jobs import run_cli, write_job
from support.kafka_broker import create_topic, free_port, produce, produce_with_confluent
from support.kafka_jobs import kafka_job
from support.schema_registry import LocalSchemaRegistry

from gobblin_py.config import load_job
from gobblin_py.errors import ConfigError
from gobblin_py.state.store import StateStore
from gobblin_py.testing.outputs import read_error_files

pytestmark = pytest.mark.kafka

INCOMPATIBLE = {**V1, "fields": [{"name": "id", "type": "string"}, {"name": "customer", "type": "string"}]}
PASSWORD = "registry-pw-5c1e7a"


@pytest.mark.parametrize(("writer", "client"), [("avro", "kafka-python"), ("parquet", "confluent")])
def test_every_value_lands_once_with_the_registrys_schema(tmp_path: Path, broker, topic: str, schema_registry: LocalSchemaRegistry,
                                                          writer: str, client: str) -> None:
    create_topic(broker.bootstrap, topic, 2)
    ser = serializer(schema_registry.url, V1)
    data = {0: orders(0, 150), 1: orders(1000, 90)}
    produce(broker.bootstrap, topic, {p: serialize(ser, topic, recs) for p, recs in data.items()})
    result = run(tmp_path, job_for(tmp_path, broker.bootstrap, topic, {"url": schema_registry.url}, writer, client=client))
    assert result.succeeded, result.error
    out = tmp_path / "output" / topic
    got = read_avro(out) if writer == "avro" else read_parquet(out)
    want = [r for recs in data.values() for r in recs]
    assert sorted(got, key=lambda r: r["id"]) == sorted(want, key=lambda r: r["id"])  # each once, values as produced
    if writer == "avro":
        import avro.schema
        from avro.datafile import DataFileReader
        from avro.io import DatumReader

        first = next(p for p in out.rglob("*.avro"))
        with DataFileReader(open(first, "rb"), DatumReader()) as reader:  # the subject's schema, no converter between
            assert reader.datum_reader.writers_schema.canonical_form == avro.schema.parse(json.dumps(V1)).canonical_form
    state = StateStore(tmp_path / "work", "k")
    assert {int(k): v for k, v in state.watermarks()[topic].items()} == {0: 150, 1: 90}
    assert state.dataset_state(topic)["source"]["value_schema"] == {"subject": f"{topic}-value", "version": 1, "id": 1}


def test_a_field_added_mid_stream_reads_old_values_with_its_default(tmp_path: Path, broker, topic: str,
                                                                    schema_registry: LocalSchemaRegistry) -> None:
    create_topic(broker.bootstrap, topic, 1)
    old, new = orders(0, 40), [{**r, "channel": "app", "note": f"n{r['id']}"} for r in orders(40, 30)]
    values = serialize(serializer(schema_registry.url, V1), topic, old)
    produce(broker.bootstrap, topic, {0: values[:20]})
    first = run(tmp_path, job_for(tmp_path, broker.bootstrap, topic, {"url": schema_registry.url}))
    assert first.succeeded, first.error
    # the subject gains a version mid-stream: later values are written with it, earlier ones stay as they were
    produce(broker.bootstrap, topic, {0: values[20:] + serialize(serializer(schema_registry.url, V2), topic, new)})
    second = run(tmp_path, job_for(tmp_path, broker.bootstrap, topic, {"url": schema_registry.url}))
    assert second.succeeded, second.error
    records = sorted(read_avro(tmp_path / "output" / topic), key=lambda r: r["id"])
    assert [r["id"] for r in records] == list(range(70))  # every value once
    defaults = {"channel": "web", "note": None}
    assert records[:20] == old[:20]  # the first run wrote version 1
    assert records[20:40] == [{**r, **defaults} for r in old[20:]]  # version-1 values in version 2: the defaults
    assert records[40:] == new
    notices = [n for d in second.datasets for n in d.notices]
    assert any(f"the value schema of topic {topic!r} is now subject '{topic}-value' version 2" in n and "was version 1" in n
               for n in notices), notices
    kept = StateStore(tmp_path / "work", "k").dataset_state(topic)["source"]["value_schema"]
    assert kept == {"subject": f"{topic}-value", "version": 2, "id": 2}  # a later run can tell the schema changed


def test_values_that_cannot_be_read_go_to_the_error_file_naming_offset_and_schema_id(
        tmp_path: Path, broker, topic: str, schema_registry: LocalSchemaRegistry) -> None:
    create_topic(broker.bootstrap, topic, 1)
    good = serialize(serializer(schema_registry.url, V1), topic, orders(0, 10))
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    with pytest.raises(SchemaRegistryError, match="incompatible") as refused:  # the registry keeps it out of the subject …
        serialize(serializer(schema_registry.url, INCOMPATIBLE), topic, [{"id": "x1", "customer": "c"}])
    assert refused.value.http_status_code == 409
    # … but a producer registering it under another subject still writes it to the topic
    bad = serialize(serializer(schema_registry.url, INCOMPATIBLE), f"{topic}-elsewhere", [{"id": "x1", "customer": "c"}])[0]
    bad_id = struct.unpack(">I", bad[1:5])[0]
    v2 = serialize(serializer(schema_registry.url, V2), topic, [{"id": 99, "customer": "c9", "amount": 1.5,
                                                                  "channel": "app", "note": None}])
    unknown = b"\x00" + struct.pack(">I", 4242) + good[0][5:]
    foreign, truncated = b'{"id": 3}', good[1][:7]  # JSON, not Confluent's format; a payload cut short
    values = [*good[:3], foreign, *good[3:6], bad, *good[6:8], unknown, truncated, *good[8:], *v2]
    offsets = {v: i for i, v in enumerate(values)}
    produce(broker.bootstrap, topic, {0: values})
    # the output schema is the latest version (V2, id 3): it cannot read the INCOMPATIBLE values (id 2)
    result = run(tmp_path, job_for(tmp_path, broker.bootstrap, topic, {"url": schema_registry.url}))
    assert result.succeeded, result.error
    records = read_avro(tmp_path / "output" / topic)
    assert sorted(r["id"] for r in records) == [*range(10), 99]
    entries = read_error_files(tmp_path / "output")
    assert {e["record"] for e in entries} == {repr(v) for v in (foreign, bad, unknown, truncated)}  # each value's bytes
    errors = {e["location"]: e["reason"] for e in entries}
    where = f"{topic}/0@"
    assert set(errors) == {f"{where}{offsets[v]}" for v in (foreign, bad, unknown, truncated)}
    assert "not in Confluent's wire format" in errors[f"{where}{offsets[foreign]}"]
    assert f"schema id {bad_id} cannot be read as '{topic}-value' schema id" in errors[f"{where}{offsets[bad]}"]
    assert "schema id 4242: not in schema registry" in errors[f"{where}{offsets[unknown]}"]
    assert "the Avro payload does not decode" in errors[f"{where}{offsets[truncated]}"]


def test_an_unreachable_registry_fails_the_run_naming_its_url(tmp_path: Path, broker, topic: str) -> None:
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, {0: [b"\x00\x00\x00\x00\x01\x02"]})
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    result = run(tmp_path, job_for(tmp_path, broker.bootstrap, topic, {"url": url, "max_retries": 0, "timeout_s": 2}))
    assert not result.succeeded
    assert f"schema registry {url}" in result.error and "cannot reach" in result.error, result.error
    assert not (tmp_path / "output").exists()
    assert StateStore(tmp_path / "work", "k").watermarks() == {}


def test_metadata_columns_carry_each_messages_key_topic_partition_offset_and_timestamp(
        tmp_path: Path, broker, topic: str, schema_registry: LocalSchemaRegistry) -> None:
    import time

    create_topic(broker.bootstrap, topic, 2)
    ser = serializer(schema_registry.url, V1)
    data = {0: orders(0, 5), 1: orders(100, 4)}
    keyed = {p: [(None if r["id"] == 2 else f"k{r['id']}".encode(), v) for r, v in zip(recs, serialize(ser, topic, recs))]
             for p, recs in data.items()}
    before = int(time.time() * 1000)
    produce(broker.bootstrap, topic, keyed)
    after = int(time.time() * 1000)
    job = job_for(tmp_path, broker.bootstrap, topic, {"url": schema_registry.url}, "parquet",
                  metadata_columns=["key", "topic", "partition", "offset", "timestamp"])
    result = run(tmp_path, job)
    assert result.succeeded, result.error
    rows = {r["id"]: r for r in read_parquet(tmp_path / "output" / topic)}
    assert len(rows) == 9
    for p, recs in data.items():
        for offset, r in enumerate(recs):
            row = rows[r["id"]]
            assert {k: row[k] for k in r} == r
            assert row["_kafka_key"] == (None if r["id"] == 2 else f"k{r['id']}")
            assert (row["_kafka_topic"], row["_kafka_partition"], row["_kafka_offset"]) == (topic, p, offset)
            assert before - 1000 <= int(row["_kafka_timestamp"].timestamp() * 1000) <= after + 1000
    import pyarrow.parquet as pq

    schema = pq.read_schema(next((tmp_path / "output" / topic).rglob("*.parquet")))
    assert schema.names == ["id", "customer", "amount", "_kafka_key", "_kafka_topic", "_kafka_partition", "_kafka_offset",
                            "_kafka_timestamp"]


def test_the_registry_password_reaches_no_file_and_no_log(tmp_path: Path, broker, topic: str) -> None:
    with LocalSchemaRegistry(auth=("reader", PASSWORD)) as registry:
        create_topic(broker.bootstrap, topic, 1)
        ser = serializer(registry.url, V1, **{"basic.auth.user.info": f"reader:{PASSWORD}"})
        produce(broker.bootstrap, topic, {0: serialize(ser, topic, orders(0, 25))})
        login = {"url": registry.url, "basic_auth_user": "reader", "password_env": "GOBBLIN_TEST_REGISTRY_PW"}
        write_job(tmp_path, job_for(tmp_path, broker.bootstrap, topic, login))
        done = run_cli("run", "job.yaml", "--in-process", "-v", cwd=tmp_path, env={"GOBBLIN_TEST_REGISTRY_PW": PASSWORD})
        text = done.stdout + done.stderr
        assert done.returncode == 0, text
        assert PASSWORD not in text
        assert len(read_avro(tmp_path / "output" / topic)) == 25
        leaks = [str(p) for p in tmp_path.rglob("*") if p.is_file() and PASSWORD.encode() in p.read_bytes()]
        assert not leaks
        # a wrong password: a configuration to fix, naming the user and the variable, never the password
        write_job(tmp_path, job_for(tmp_path / "again", broker.bootstrap, topic, login))
        wrong = run_cli("run", "job.yaml", "--in-process", cwd=tmp_path, env={"GOBBLIN_TEST_REGISTRY_PW": "not-it"})
        text = wrong.stdout + wrong.stderr
        assert wrong.returncode == 2, text
        assert "refused" in text and "'reader'" in text and "$GOBBLIN_TEST_REGISTRY_PW" in text and "Traceback" not in text
        assert "not-it" not in text


def test_settings_refuse_a_registry_without_confluent_avro_and_a_password_in_the_url(tmp_path: Path) -> None:
    from gobblin_py.builtin.sources.kafka.settings import KafkaSettings

    with pytest.raises(ValueError, match="deserializer confluent_avro needs schema_registry"):
        KafkaSettings(bootstrap_servers="b:9092", topics=["t"], deserializer="confluent_avro")
    with pytest.raises(ValueError, match="schema_registry is read only with deserializer: confluent_avro"):
        KafkaSettings(bootstrap_servers="b:9092", topics=["t"], schema_registry={"url": "http://r:8081"})
    job = job_for(tmp_path, "b:9092", "t", {"url": f"http://u:{PASSWORD}@r:8081"})
    with pytest.raises(ConfigError, match=r"source.schema_registry: .*url holds a secret") as refused:
        load_job(write_job(tmp_path, job))
    assert PASSWORD not in str(refused.value)
    with pytest.raises(ValueError, match="metadata_columns needs deserializer avro, confluent_avro or confluent_protobuf"):
        KafkaSettings(bootstrap_servers="b:9092", topics=["t"], metadata_columns=["offset"])
    s = KafkaSettings(bootstrap_servers="b:9092", topics=["t"], deserializer="confluent_avro",
                      schema_registry={"url": "http://r:8081"}, subject="{topic}.v")
    assert s.subject_of("orders") == "orders.v"


def test_deserializer_avro_gives_its_schema_to_the_writer_with_metadata_columns(tmp_path: Path, broker, topic: str) -> None:
    import io

    import fastavro

    create_topic(broker.bootstrap, topic, 1)
    (tmp_path / "order.avsc").write_text(json.dumps(V1))
    parsed = fastavro.parse_schema(V1)

    def datum(r: dict[str, Any]) -> bytes:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, r)
        return buf.getvalue()

    data = orders(0, 12)
    produce(broker.bootstrap, topic, {0: [(b"\xff\xfe" if r["id"] == 5 else None, datum(r)) for r in data]})
    job = kafka_job(tmp_path, broker.bootstrap, [topic], deserializer="avro", avro_schema=str(tmp_path / "order.avsc"),
                    metadata_columns=["offset", "key"])
    del job["converters"]
    job["writer"] = {"class": "avro"}
    result = run(tmp_path, job)
    assert result.succeeded, result.error
    records = sorted(read_avro(tmp_path / "output" / topic), key=lambda r: r["id"])
    assert records == [{**r, "_kafka_offset": r["id"], "_kafka_key": None} for r in data if r["id"] != 5]
    (error,) = read_error_files(tmp_path / "output")  # a key that is not UTF-8 under metadata_key: string
    assert error["location"] == f"{topic}/0@5" and "the key is not UTF-8" in error["reason"]


def test_a_task_that_cannot_reach_the_registry_fails_as_unreachable_not_as_bad_records() -> None:
    """The registry went away after planning: fetching a writer schema is the service's fault (retried, one budget per
    run for the registry's endpoint), never a bad record."""
    from gobblin_py.builtin.sources.kafka.registry import ConfluentAvroDecoder
    from gobblin_py.builtin.sources.kafka.settings import SchemaRegistrySettings
    from gobblin_py.errors import UnreachableError

    url = f"http://127.0.0.1:{free_port()}"
    settings = SchemaRegistrySettings(url=url, max_retries=0, timeout_s=2)
    decode = ConfluentAvroDecoder(settings, V2, 2, "orders-value", 2)
    with pytest.raises(UnreachableError) as down:
        decode(b"\x00" + struct.pack(">I", 1) + b"\x02\x02c\x00\x00\x80\x3f")
    assert down.value.endpoint == f"schema registry {url}" and url in str(down.value) and "schema id 1" in str(down.value)


def test_under_bad_records_fail_a_value_not_in_the_wire_format_fails_the_run(tmp_path: Path, broker, topic: str,
                                                                            schema_registry: LocalSchemaRegistry) -> None:
    create_topic(broker.bootstrap, topic, 1)
    good = serialize(serializer(schema_registry.url, V1), topic, orders(0, 4))
    produce(broker.bootstrap, topic, {0: [*good[:2], b"plain text", *good[2:]]})
    job = job_for(tmp_path, broker.bootstrap, topic, {"url": schema_registry.url})
    job["quality"] = {"bad_records": "FAIL"}
    result = run(tmp_path, job)
    assert not result.succeeded
    assert f"{topic}/0@2" in result.error and "not in Confluent's wire format" in result.error, result.error
    assert not (tmp_path / "output").exists()
    assert StateStore(tmp_path / "work", "k").watermarks() == {}


def test_a_gobblin_confluent_avro_job_validates_and_runs_with_the_registrys_schema(
        tmp_path: Path, broker, topic: str, schema_registry: LocalSchemaRegistry) -> None:
    """Gobblin's KafkaDeserializerSource with kafka.deserializer.type=CONFLUENT_AVRO and kafka.schema.registry.url, run
    as it is: every value once, in the subject's schema."""
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, {0: serialize(serializer(schema_registry.url, V1), topic, orders(0, 40))})
    pull = tmp_path / "orders.pull"
    pull.write_text(
        "job.name=confluent-orders\n"
        "source.class=org.apache.gobblin.source.extractor.extract.kafka.KafkaDeserializerSource\n"
        f"kafka.brokers={broker.bootstrap}\nkafka.deserializer.type=CONFLUENT_AVRO\n"
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
    got = read_avro(tmp_path / "output")
    assert sorted(got, key=lambda r: r["id"]) == orders(0, 40)

    other = pull.read_text().replace("ConfluentKafkaSchemaRegistry", "LiKafkaSchemaRegistry")
    pull.write_text(other)
    refused = run_cli("validate", str(pull), cwd=tmp_path)
    assert refused.returncode == 2 and "only ConfluentKafkaSchemaRegistry is supported" in refused.stderr, refused.stderr
    pull.write_text(other.replace("LiKafkaSchemaRegistry", "ConfluentKafkaSchemaRegistry").replace("CONFLUENT_AVRO", "CONFLUENT_JSON"))
    converted = run_cli("convert", str(pull), cwd=tmp_path)  # JSON carries no Avro schema: only a converter gives one
    assert "kafka.deserializer.type" not in converted.stderr and "no converter gives one" in converted.stderr, converted.stderr


EVENT_JSON_SCHEMA = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Event", "type": "object",
                     "properties": {"id": {"type": "integer"}, "ts": {"type": "integer"}, "user": {"type": "string"},
                                    "kind": {"type": "string"}}, "required": ["id", "ts", "user", "kind"]}


def test_confluent_json_values_are_read_through_json_to_avro_and_bad_ones_named(
        tmp_path: Path, broker, topic: str, schema_registry: LocalSchemaRegistry) -> None:
    """Values from confluent-kafka's own JSONSerializer (header, then a JSON document) become records as plain JSON
    values do; a value without the header, or whose id names an Avro schema, is a bad record naming offset and id."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    create_topic(broker.bootstrap, topic, 1)
    ser = JSONSerializer(json.dumps(EVENT_JSON_SCHEMA), SchemaRegistryClient({"url": schema_registry.url}))
    ctx = SerializationContext(topic, MessageField.VALUE)
    events = [{"id": i, "ts": 1767225600000 + i, "user": f"u{i}", "kind": "click"} for i in range(30)]
    avro_id = SchemaRegistryClient({"url": schema_registry.url}).register_schema(
        "other-value", __import__("confluent_kafka.schema_registry", fromlist=["Schema"]).Schema(json.dumps(V1), "AVRO"))
    odd = [json.dumps(events[0]).encode(), struct.pack(">bI", 0, avro_id) + b'{"id": 99}']  # no header; an Avro id
    produce(broker.bootstrap, topic, {0: [ser(e, ctx) for e in events[:20]] + odd + [ser(e, ctx) for e in events[20:]]})
    job = kafka_job(tmp_path, broker.bootstrap, [topic], deserializer="confluent_json",
                    schema_registry={"url": schema_registry.url})
    result = run(tmp_path, job)
    assert result.succeeded, result.error
    got = sorted((r["id"], r["user"]) for r in read_avro(tmp_path / "output" / topic))
    assert got == [(e["id"], e["user"]) for e in events]
    errors = read_error_files(tmp_path / "output" / topic)
    assert len(errors) == 2 and f"{topic}/0@20" in str(errors) and f"{topic}/0@21" in str(errors), errors
    assert any("not in Confluent's wire format" in e["reason"] for e in errors)
    assert any(f"schema id {avro_id}: an AVRO schema, not a JSON Schema" in e["reason"] for e in errors)


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_confluent_json_batches_take_the_columnar_path_with_the_row_paths_output(
        tmp_path: Path, broker, topic: str, schema_registry: LocalSchemaRegistry, client: str) -> None:
    """A batch whose every value has the header and a JSON Schema's id is parsed by Arrow after the header; a batch
    holding a value without it goes record by record; the Parquet files are the row path's either way."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    create_topic(broker.bootstrap, topic, 1)
    ser = JSONSerializer(json.dumps(EVENT_JSON_SCHEMA), SchemaRegistryClient({"url": schema_registry.url}))
    ctx = SerializationContext(topic, MessageField.VALUE)
    events = [ser({"id": i, "ts": 1767225600000 + i, "user": f"u{i}", "kind": "view"}, ctx) for i in range(3000)]
    produce(broker.bootstrap, topic, {0: events[:2500] + [b'{"id": 1}'] + events[2500:]})
    outputs = {}
    for columnar in (True, False):
        out = tmp_path / str(columnar)
        out.mkdir()
        job = kafka_job(out, broker.bootstrap, [topic], deserializer="confluent_json", client=client,
                        schema_registry={"url": schema_registry.url}, max_poll_records=500)
        job["writer"] = {"class": "parquet"}
        job["job"]["columnar"] = columnar
        result = run(out, job)
        assert result.succeeded, result.error
        taken = sum(t.records_columnar for t in result.tasks)
        assert (taken > 0) is columnar and taken < 3000  # the poll with the bare value went record by record
        outputs[columnar] = sorted((p.relative_to(out / "output").as_posix(), p.read_bytes())
                                   for p in (out / "output").rglob("*")
                                   if p.is_file() and "_gobblin-py" not in p.parts)  # not the claim: its work dir's id
        assert sorted(r["id"] for r in read_parquet(out / "output" / topic)) == list(range(3000))
    assert outputs[True] == outputs[False]


def test_a_value_whose_fields_the_output_schema_would_drop_fails_the_range_until_its_schema_is_the_subjects(
        tmp_path: Path, broker, topic: str, schema_registry: LocalSchemaRegistry) -> None:
    """A producer writes the topic in a schema with more fields that is no version of the topic's subject (here: under
    another subject; a version since deleted is the same case to the registry's lookup). Read into the subject's version those fields would be lost for good
    once the offsets are committed, so the dataset fails naming the schema id, the fields and the offset, nothing of
    the range is published, and once the schema is the subject's newest version every value is read once, whole."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer

    create_topic(broker.bootstrap, topic, 1)
    elsewhere = AvroSerializer(SchemaRegistryClient({"url": schema_registry.url}), json.dumps(V2),
                               conf={"subject.name.strategy": lambda ctx, name: "elsewhere-value"})
    old, new = orders(0, 10), [{**r, "channel": "app", "note": f"n{r['id']}"} for r in orders(10, 5)]
    produce(broker.bootstrap, topic, {0: serialize(serializer(schema_registry.url, V1), topic, old)
                                         + serialize(elsewhere, topic, new)})
    job = job_for(tmp_path, broker.bootstrap, topic, {"url": schema_registry.url})
    failed = run(tmp_path, job)
    assert not failed.succeeded
    error = failed.error
    assert f"{topic}/0@10: schema id 2 (no version of subject '{topic}-value') has field(s) channel, note that the " \
           "output schema (version 1, schema id 1) lacks" in error, error
    assert not read_avro(tmp_path / "output")
    assert not StateStore(tmp_path / "work", "k").watermarks().get(topic)

    serializer(schema_registry.url, V2)(new[0], _value_context(topic))  # V2 becomes the topic subject's newest version
    done = run(tmp_path, job)
    assert done.succeeded, done.error
    records = sorted(read_avro(tmp_path / "output" / topic), key=lambda r: r["id"])
    assert records == [{**r, "channel": "web", "note": None} for r in old] + new


@pytest.mark.parametrize("policy", [None, "evolve", "dead_letter"])
def test_an_older_version_read_into_a_newer_one_that_removed_a_field_never_loses_it_silently(
        tmp_path: Path, broker, topic: str, schema_registry: LocalSchemaRegistry, policy: str | None) -> None:
    """The subject's newest version removed a field (BACKWARD allows it): the older values still in the topic would
    lose it. By default the range fails naming subject, both versions and the offset; `evolve` keeps the field's values
    (null in the newer ones); `dead_letter` puts exactly the older values in the error file (tests/kafka/
    test_schema_evolution.py has more)."""
    create_topic(broker.bootstrap, topic, 1)
    without_note = {**V2, "fields": [f for f in V2["fields"] if f["name"] != "note"]}
    first = [{**r, "channel": "app", "note": "x"} for r in orders(0, 6)]
    later = [{**r, "channel": "pos"} for r in orders(6, 4)]
    values = serialize(serializer(schema_registry.url, V2), topic, first)
    produce(broker.bootstrap, topic, {0: values + serialize(serializer(schema_registry.url, without_note), topic, later)})
    extra = {"schema_evolution": policy} if policy else {}
    done = run(tmp_path, job_for(tmp_path, broker.bootstrap, topic, {"url": schema_registry.url}, **extra))
    records = sorted(read_avro(tmp_path / "output" / topic), key=lambda r: r["id"])
    if policy is None:
        assert not done.succeeded
        assert f"{topic}/0@0: subject '{topic}-value' version 1 (schema id 1) does not read into the output schema, " \
               "version 2 (schema id 2), without loss: field note would be dropped" in done.error, done.error
        assert not records and not StateStore(tmp_path / "work", "k").watermarks().get(topic)
    elif policy == "evolve":
        assert done.succeeded, done.error
        assert records == first + [{**r, "note": None} for r in later]
    else:
        assert done.succeeded, done.error
        assert records == later
        assert {e["location"] for e in read_error_files(tmp_path / "output")} == {f"{topic}/0@{i}" for i in range(6)}


def _value_context(topic: str) -> Any:
    from confluent_kafka.serialization import MessageField, SerializationContext

    return SerializationContext(topic, MessageField.VALUE)


HEADERS = [  # as produced, one list a message in turn: several, repeated, an empty and a null value; none; binary
    [("trace", b"t-1"), ("tag", b"a"), ("tag", b"b"), ("empty", b""), ("none", None)],
    None,
    [("tag", b"\xff\x00\x01")],
    [],
]
BOTH_READERS = [("avro", "kafka-python"), ("parquet", "kafka-python"), ("avro", "confluent"), ("parquet", "confluent")]


def read_output(root: Path, writer: str) -> list[dict[str, Any]]:
    return read_avro(root) if writer == "avro" else read_parquet(root)


@pytest.mark.parametrize(("writer", "client"), BOTH_READERS)
def test_headers_land_in_order_with_repeats_and_null_values(tmp_path: Path, broker, topic: str,
                                                            schema_registry: LocalSchemaRegistry, writer: str, client: str) -> None:
    create_topic(broker.bootstrap, topic, 1)
    values = serialize(serializer(schema_registry.url, V1), topic, orders(0, 12))
    produce_with_confluent(broker.bootstrap, topic, 0, [(None, v, HEADERS[i % 4]) for i, v in enumerate(values)])
    job = job_for(tmp_path, broker.bootstrap, topic, {"url": schema_registry.url}, writer, client=client,
                  metadata_columns=["offset", "headers"])
    result = run(tmp_path, job)
    assert result.succeeded, result.error
    rows = sorted(read_output(tmp_path / "output" / topic, writer), key=lambda r: r["_kafka_offset"])
    assert [r["id"] for r in rows] == list(range(12))
    for r in rows:
        assert r["_kafka_headers"] == [{"key": k, "value": v} for k, v in HEADERS[r["_kafka_offset"] % 4] or []]


class _RawKey(str):
    """A header key kafka-python's producer writes as these bytes, which are not UTF-8 (no producer sends such a key
    otherwise: both take keys as str)."""

    def encode(self, *args: Any, **kwargs: Any) -> bytes:
        return b"\xff\xfe-k"


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_a_header_key_that_is_not_utf8_is_a_bad_record_or_names_the_client_that_reads_it(
        tmp_path: Path, broker, topic: str, schema_registry: LocalSchemaRegistry, client: str) -> None:
    create_topic(broker.bootstrap, topic, 1)
    values = serialize(serializer(schema_registry.url, V1), topic, orders(0, 6))
    produce(broker.bootstrap, topic, {0: [(None, v, [(_RawKey("k"), b"x")] if i == 3 else [("ok", b"1")])
                                          for i, v in enumerate(values)]})
    job = job_for(tmp_path, broker.bootstrap, topic, {"url": schema_registry.url}, client=client,
                  metadata_columns=["offset", "headers"])
    result = run(tmp_path, job)
    if client == "confluent":
        assert result.succeeded, result.error
        assert sorted(r["_kafka_offset"] for r in read_avro(tmp_path / "output" / topic)) == [0, 1, 2, 4, 5]
        (error,) = read_error_files(tmp_path / "output")
        assert error["location"] == f"{topic}/0@3" and "a header key is not UTF-8" in error["reason"], error
    else:  # kafka-python fails the whole fetch holding it, whatever metadata_columns asks
        assert not result.succeeded
        assert f"{topic}/0@" in result.error and "header key that is not UTF-8" in result.error, result.error
        assert "client: confluent" in result.error
        assert not StateStore(tmp_path / "work", "k").watermarks().get(topic)


KEY_V1 = {"type": "record", "name": "OrderKey", "namespace": "shop.keys", "fields": [
    {"name": "region", "type": "string"},
    {"name": "id", "type": "int"},
]}
KEY_V2 = {**KEY_V1, "fields": [*KEY_V1["fields"], {"name": "shard", "type": "int", "default": 0}]}


def key_serializer(registry_url: str, schema: Any) -> Any:
    """confluent-kafka's AvroSerializer for keys (subject `{topic}-key`): a function of (key, topic)."""
    from confluent_kafka.serialization import MessageField, SerializationContext

    ser = serializer(registry_url, schema)
    return lambda key, topic: ser(key, SerializationContext(topic, MessageField.KEY))


def keyed_job(tmp: Path, bootstrap: str, topic: str, registry_url: str, writer: str = "avro", **source: Any) -> dict[str, Any]:
    return job_for(tmp, bootstrap, topic, {"url": registry_url}, writer, metadata_columns=["key", "offset"],
                   metadata_key="confluent_avro", **source)


@pytest.mark.parametrize("key_schema", [KEY_V1, "long"], ids=["record", "primitive"])
@pytest.mark.parametrize(("writer", "client"), BOTH_READERS)
def test_confluent_avro_keys_are_read_with_the_key_subjects_schema(
        tmp_path: Path, broker, topic: str, schema_registry: LocalSchemaRegistry, writer: str, client: str,
        key_schema: Any) -> None:
    create_topic(broker.bootstrap, topic, 1)
    data = orders(0, 10)
    keys = [{"region": f"r{r['id'] % 3}", "id": r["id"]} if key_schema == KEY_V1 else r["id"] * 1000 for r in data]
    ser = key_serializer(schema_registry.url, key_schema)
    values = serialize(serializer(schema_registry.url, V1), topic, data)
    produce(broker.bootstrap, topic, {0: [(None if i == 4 else ser(k, topic), v) for i, (k, v) in enumerate(zip(keys, values))]})
    result = run(tmp_path, keyed_job(tmp_path, broker.bootstrap, topic, schema_registry.url, writer, client=client))
    assert result.succeeded, result.error
    rows = sorted(read_output(tmp_path / "output" / topic, writer), key=lambda r: r["_kafka_offset"])
    assert [r["_kafka_key"] for r in rows] == [None if i == 4 else k for i, k in enumerate(keys)]
    assert [{k: r[k] for k in V1_NAMES} for r in rows] == data
    kept = StateStore(tmp_path / "work", "k").dataset_state(topic)["source"]
    assert kept["key_schema"] == {"subject": f"{topic}-key", "version": 1, "id": kept["key_schema"]["id"]}
    assert kept["value_schema"]["id"] != kept["key_schema"]["id"]
    if writer == "avro":
        import avro.schema
        from avro.datafile import DataFileReader
        from avro.io import DatumReader

        with DataFileReader(open(next((tmp_path / "output" / topic).rglob("*.avro")), "rb"), DatumReader()) as reader:
            key_field = reader.datum_reader.writers_schema.fields_dict["_kafka_key"]
        assert [s.canonical_form for s in key_field.type.schemas] == [
            avro.schema.parse('"null"').canonical_form, avro.schema.parse(json.dumps(key_schema)).canonical_form]


V1_NAMES = [f["name"] for f in V1["fields"]]


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_keys_that_do_not_decode_go_to_the_error_file_naming_offset_and_schema_id(
        tmp_path: Path, broker, topic: str, schema_registry: LocalSchemaRegistry, client: str) -> None:
    create_topic(broker.bootstrap, topic, 1)
    ser = key_serializer(schema_registry.url, KEY_V1)
    good = [ser({"region": "eu", "id": i}, topic) for i in range(6)]
    key_id = struct.unpack(">I", good[0][1:5])[0]
    other = serializer(schema_registry.url, {**KEY_V1, "fields": [{"name": "region", "type": "int"}]})
    from confluent_kafka.serialization import MessageField, SerializationContext

    foreign = other({"region": 7}, SerializationContext(f"{topic}-elsewhere", MessageField.KEY))  # another subject's
    foreign_id = struct.unpack(">I", foreign[1:5])[0]
    bad = {1: b"plain-key", 2: b"\x00" + struct.pack(">I", 4242) + good[2][5:], 3: good[3][:7], 5: foreign}
    keys = [bad.get(i, k) for i, k in enumerate(good)]
    values = serialize(serializer(schema_registry.url, V1), topic, orders(0, 6))
    produce(broker.bootstrap, topic, {0: list(zip(keys, values))})
    result = run(tmp_path, keyed_job(tmp_path, broker.bootstrap, topic, schema_registry.url, client=client))
    assert result.succeeded, result.error
    assert sorted(r["_kafka_offset"] for r in read_avro(tmp_path / "output" / topic)) == [0, 4]
    errors = {e["location"]: e["reason"] for e in read_error_files(tmp_path / "output")}
    assert set(errors) == {f"{topic}/0@{i}" for i in bad}
    assert "the key cannot be decoded as confluent_avro: not in Confluent's wire format" in errors[f"{topic}/0@1"]
    assert "schema id 4242: not in schema registry" in errors[f"{topic}/0@2"]
    assert f"schema id {key_id}: the Avro payload does not decode" in errors[f"{topic}/0@3"]
    assert f"schema id {foreign_id} cannot be read as '{topic}-key' schema id {key_id}" in errors[f"{topic}/0@5"]


def test_the_key_schema_version_is_kept_and_a_new_one_named_in_the_summary(
        tmp_path: Path, broker, topic: str, schema_registry: LocalSchemaRegistry) -> None:
    create_topic(broker.bootstrap, topic, 1)
    values = serialize(serializer(schema_registry.url, V1), topic, orders(0, 8))
    old = key_serializer(schema_registry.url, KEY_V1)
    produce(broker.bootstrap, topic, {0: [(old({"region": "eu", "id": i}, topic), v) for i, v in enumerate(values[:4])]})
    job = keyed_job(tmp_path, broker.bootstrap, topic, schema_registry.url)
    first = run(tmp_path, job)
    assert first.succeeded, first.error
    state = StateStore(tmp_path / "work", "k")
    assert state.dataset_state(topic)["source"]["key_schema"]["version"] == 1
    new = key_serializer(schema_registry.url, KEY_V2)
    produce(broker.bootstrap, topic, {0: [(new({"region": "us", "id": i, "shard": 3}, topic), v)
                                          for i, v in enumerate(values[4:], 4)]})
    second = run(tmp_path, job)
    assert second.succeeded, second.error
    notices = [n for d in second.datasets for n in d.notices]
    assert any(f"the key schema of topic {topic!r} is now subject '{topic}-key' version 2" in n and "was version 1" in n
               for n in notices), notices
    kept = StateStore(tmp_path / "work", "k").dataset_state(topic)["source"]["key_schema"]
    assert kept["subject"] == f"{topic}-key" and kept["version"] == 2
    keys = [r["_kafka_key"] for r in sorted(read_avro(tmp_path / "output" / topic), key=lambda r: r["_kafka_offset"])]
    assert keys == [{"region": "eu", "id": i} for i in range(4)] + [{"region": "us", "id": i, "shard": 3} for i in range(4, 8)]


def test_a_key_whose_fields_the_key_schema_would_drop_fails_the_range(
        tmp_path: Path, broker, topic: str, schema_registry: LocalSchemaRegistry) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    create_topic(broker.bootstrap, topic, 1)
    elsewhere = AvroSerializer(SchemaRegistryClient({"url": schema_registry.url}), json.dumps(KEY_V2),
                               conf={"subject.name.strategy": lambda ctx, name: "elsewhere-key"})
    values = serialize(serializer(schema_registry.url, V1), topic, orders(0, 4))
    keys = [key_serializer(schema_registry.url, KEY_V1)({"region": "eu", "id": i}, topic) for i in range(3)]
    keys.append(elsewhere({"region": "eu", "id": 3, "shard": 9}, SerializationContext(topic, MessageField.KEY)))
    produce(broker.bootstrap, topic, {0: list(zip(keys, values))})
    failed = run(tmp_path, keyed_job(tmp_path, broker.bootstrap, topic, schema_registry.url))
    assert not failed.succeeded
    assert f"{topic}/0@3: the key: schema id" in failed.error and f"(no version of subject '{topic}-key') has field(s) " \
           "shard" in failed.error, failed.error
    assert not read_avro(tmp_path / "output")


def test_metadata_key_confluent_avro_needs_a_schema_registry(tmp_path: Path) -> None:
    from gobblin_py.builtin.sources.kafka.settings import KafkaSettings

    with pytest.raises(ValueError, match="metadata_key confluent_avro needs schema_registry"):
        KafkaSettings(bootstrap_servers="b:9092", topics=["t"], metadata_key="confluent_avro")
    (tmp_path / "order.avsc").write_text(json.dumps(V1))
    job = kafka_job(tmp_path, "b:9092", ["t"], deserializer="avro", avro_schema=str(tmp_path / "order.avsc"),
                    metadata_columns=["key"], metadata_key="confluent_avro")
    with pytest.raises(ConfigError, match=r"source: .*metadata_key confluent_avro needs schema_registry"):
        load_job(write_job(tmp_path, job))
    with pytest.raises(ValueError, match=r"key_subject '\{name\}-key': only \{topic\} may stand in it"):
        KafkaSettings(bootstrap_servers="b:9092", topics=["t"], deserializer="confluent_avro", metadata_key="confluent_avro",
                      schema_registry={"url": "http://r:8081"}, key_subject="{name}-key")
    s = KafkaSettings(bootstrap_servers="b:9092", topics=["t"], deserializer="avro", avro_schema=tmp_path / "order.avsc",
                      metadata_columns=["key"], metadata_key="confluent_avro", schema_registry={"url": "http://r:8081"})
    assert s.avro_keys and s.key_subject_of("orders") == "orders-key"


def test_a_key_record_named_as_the_values_record_is_refused_at_planning(
        tmp_path: Path, broker, topic: str, schema_registry: LocalSchemaRegistry) -> None:
    create_topic(broker.bootstrap, topic, 1)
    same_name = {**KEY_V1, "name": "Order", "namespace": "shop"}  # V1's full name: one output schema cannot hold both
    ser = key_serializer(schema_registry.url, same_name)
    values = serialize(serializer(schema_registry.url, V1), topic, orders(0, 2))
    produce(broker.bootstrap, topic, {0: [(ser({"region": "eu", "id": i}, topic), v) for i, v in enumerate(values)]})
    result = run(tmp_path, keyed_job(tmp_path, broker.bootstrap, topic, schema_registry.url))
    assert not result.succeeded
    assert f"subject '{topic}-key' version 1" in result.error and "cannot be a field of the value's record" in result.error, \
        result.error
    assert not (tmp_path / "output").exists()
