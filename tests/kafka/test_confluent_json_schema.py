"""`deserializer: confluent_json` with `json_schema_validation`: each value validated against its writer's JSON Schema.

Values are made by confluent-kafka's own `JSONSerializer` against the test registry (tests/support/schema_registry.py);
the documents that do not match their schema by a serializer with its own validation turned off (`validate: False`),
as a producer that skips it writes them. They are produced into Tansu, read by a run in this process, and the output is
read back with Apache Avro's `DataFileReader` and pyarrow."""

from __future__ import annotations

import ast
import json
import struct
from pathlib import Path
from typing import Any

import pytest
from support.confluent_avro import read_avro, read_parquet, run
from support.kafka_broker import create_topic, produce
from support.kafka_jobs import kafka_job
from support.schema_registry import LocalSchemaRegistry

from gobblin_py.testing.outputs import read_error_files

START_MS = 1767225600000
EVENT = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Event", "type": "object",
         "properties": {"id": {"type": "integer", "minimum": 0}, "ts": {"type": "integer"},
                        "user": {"type": "string", "minLength": 1}, "kind": {"enum": ["click", "view"]},
                        "tags": {"type": "array", "items": {"type": "string"}}},
         "required": ["id", "ts", "user", "kind"]}
# each breaks EVENT in one place, yet is a record json_to_avro takes (tags are not in its schema: dropped)
INVALID = {
    "kind": ({"kind": "buy"}, "$.kind", "'buy' is not one of ['click', 'view']"),
    "user": ({"user": ""}, "$.user", "should be non-empty"),
    "id": ({"id": -3}, "$.id", "-3 is less than the minimum of 0"),
    "tags": ({"tags": ["a", 7]}, "$.tags[1]", "7 is not of type 'string'"),
}


def event(i: int, **changes: Any) -> dict[str, Any]:
    return {"id": i, "ts": START_MS + i, "user": f"u{i}", "kind": "click" if i % 2 else "view", **changes}


def serializers(registry_url: str, schema: dict[str, Any]) -> tuple[Any, Any]:
    """confluent-kafka's JSONSerializer for `schema`, validating (as by default) and not (to write invalid documents)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.json_schema import JSONSerializer

    client = SchemaRegistryClient({"url": registry_url})
    return (JSONSerializer(json.dumps(schema), client),
            JSONSerializer(json.dumps(schema), client, conf={"validate": False}))


def context(topic: str) -> Any:
    from confluent_kafka.serialization import MessageField, SerializationContext

    return SerializationContext(topic, MessageField.VALUE)


def mixed_topic(bootstrap: str, topic: str, registry_url: str, n: int = 400) -> tuple[list[dict[str, Any]], dict[int, str], int]:
    """`n` valid events with one invalid document of each INVALID kind among them (an invalid one in the first poll
    and in the last): the valid events, offset → INVALID kind, and the schema id."""
    good, lax = serializers(registry_url, EVENT)
    ctx = context(topic)
    valid = [event(i) for i in range(n)]
    values = [good(e, ctx) for e in valid]
    bad_at: dict[int, str] = {}
    for place, name in zip((3, n // 3, n // 2, n - 2), INVALID):
        changes, _, _ = INVALID[name]
        values.insert(place, lax(event(10_000 + place, **changes), ctx))
        bad_at[place] = name
    schema_id = struct.unpack(">I", values[0][1:5])[0]
    assert {struct.unpack(">I", v[1:5])[0] for v in values} == {schema_id}  # both serializers: the one registration
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, {0: values})
    return valid, bad_at, schema_id


def json_job(tmp: Path, bootstrap: str, topic: str, registry_url: str, **source: Any) -> dict[str, Any]:
    return kafka_job(tmp, bootstrap, [topic], deserializer="confluent_json", schema_registry={"url": registry_url},
                     **source)


@pytest.mark.kafka
@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_documents_that_do_not_match_their_json_schema_are_bad_records_naming_schema_id_path_and_error(
        tmp_path: Path, broker, topic: str, schema_registry: LocalSchemaRegistry, client: str) -> None:
    valid, bad_at, schema_id = mixed_topic(broker.bootstrap, topic, schema_registry.url)
    result = run(tmp_path, json_job(tmp_path, broker.bootstrap, topic, schema_registry.url, client=client))
    assert result.succeeded, result.error
    got = sorted((r["id"], r["user"], r["kind"]) for r in read_avro(tmp_path / "output" / topic))
    assert got == [(e["id"], e["user"], e["kind"]) for e in valid]  # every valid one once, no invalid one
    errors = {e["location"]: e for e in read_error_files(tmp_path / "output")}
    assert set(errors) == {f"{topic}/0@{offset}" for offset in bad_at}
    for offset, name in bad_at.items():
        _, path, message = INVALID[name]
        reason = errors[f"{topic}/0@{offset}"]["reason"]
        assert f"schema id {schema_id}: the document does not match its JSON Schema at {path}: " in reason, reason
        assert message in reason, reason
        raw = ast.literal_eval(errors[f"{topic}/0@{offset}"]["record"])  # the value's bytes, as read
        assert struct.unpack(">bI", raw[:5]) == (0, schema_id) and json.loads(raw[5:]) == event(10_000 + offset, **INVALID[name][0])


@pytest.mark.kafka
@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_the_columnar_path_validates_too_and_writes_the_row_paths_files(
        tmp_path: Path, broker, topic: str, schema_registry: LocalSchemaRegistry, client: str) -> None:
    """Polls of valid documents only go columnar; a poll holding an invalid one goes record by record, so each invalid
    one lands in the error file with its offset and every valid one in the data files, the same bytes either way."""
    valid, bad_at, schema_id = mixed_topic(broker.bootstrap, topic, schema_registry.url, n=2000)
    outputs = {}
    for columnar in (True, False):
        out = tmp_path / str(columnar)
        out.mkdir()
        job = json_job(out, broker.bootstrap, topic, schema_registry.url, client=client, max_poll_records=250)
        job["writer"] = {"class": "parquet"}
        job["job"]["columnar"] = columnar
        result = run(out, job)
        assert result.succeeded, result.error
        taken = sum(t.records_columnar for t in result.tasks)
        assert (taken > 0) is columnar and taken < len(valid)  # the polls with an invalid document went row by row
        assert sorted(r["id"] for r in read_parquet(out / "output" / topic)) == [e["id"] for e in valid]
        errors = read_error_files(out / "output")
        assert sorted(e["location"] for e in errors) == sorted(f"{topic}/0@{o}" for o in bad_at)
        assert all(f"schema id {schema_id}: the document does not match" in e["reason"] for e in errors)
        outputs[columnar] = sorted((p.relative_to(out / "output").as_posix(), p.read_bytes())
                                   for p in (out / "output").rglob("*")
                                   if p.is_file() and "_gobblin-py" not in p.parts)  # not the claim: its work dir's id
    assert outputs[True] == outputs[False]


@pytest.mark.kafka
@pytest.mark.parametrize("columnar", [True, False])
def test_without_validation_documents_that_do_not_match_are_written(
        tmp_path: Path, broker, topic: str, schema_registry: LocalSchemaRegistry, columnar: bool) -> None:
    valid, bad_at, _ = mixed_topic(broker.bootstrap, topic, schema_registry.url)
    job = json_job(tmp_path, broker.bootstrap, topic, schema_registry.url, json_schema_validation=False,
                   max_poll_records=100)
    job["writer"] = {"class": "parquet"}
    job["job"]["columnar"] = columnar
    result = run(tmp_path, job)
    assert result.succeeded, result.error
    ids = sorted(r["id"] for r in read_parquet(tmp_path / "output" / topic))
    assert ids == sorted([e["id"] for e in valid] + [event(10_000 + o, **INVALID[n][0])["id"] for o, n in bad_at.items()])
    assert not read_error_files(tmp_path / "output")
    # not validated, the polls go columnar (but for one Arrow's JSON reader hands back: its tags mix types)
    assert (sum(t.records_columnar for t in result.tasks) >= len(ids) - 100) is columnar


@pytest.mark.kafka
def test_a_schema_id_whose_json_schema_does_not_compile_makes_its_values_bad_records(
        tmp_path: Path, broker, topic: str, schema_registry: LocalSchemaRegistry) -> None:
    """The test registry holds any JSON as a JSON Schema (the real one would refuse this one): every value of the id
    is a bad record naming why, and the other ids' values are read."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    good, _ = serializers(schema_registry.url, EVENT)
    broken_id = SchemaRegistryClient({"url": schema_registry.url}).register_schema(
        "elsewhere-value", Schema(json.dumps({"type": "record-ish"}), "JSON"))
    ctx = context(topic)
    broken = struct.pack(">bI", 0, broken_id) + json.dumps(event(99)).encode()
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, {0: [good(event(0), ctx), broken, good(event(1), ctx)]})
    result = run(tmp_path, json_job(tmp_path, broker.bootstrap, topic, schema_registry.url))
    assert result.succeeded, result.error
    assert sorted(r["id"] for r in read_avro(tmp_path / "output" / topic)) == [0, 1]
    (error,) = read_error_files(tmp_path / "output")
    assert error["location"] == f"{topic}/0@1"
    assert f"schema id {broken_id}: not a valid JSON Schema of its draft: $.type: " in error["reason"], error


def test_each_schema_is_validated_by_the_draft_it_names_and_draft_07_without_one() -> None:
    from gobblin_py.builtin.sources.kafka.json_schema import compile_validator, first_error
    from gobblin_py.builtin.sources.kafka.registry import Unusable

    pair = {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]}  # 2020-12 only
    newer = compile_validator(json.dumps({"$schema": "https://json-schema.org/draft/2020-12/schema", **pair}))
    assert not newer.is_valid([1, 2]) and newer.is_valid([1, "a"])
    assert first_error(newer, [1, 2]) == "$[1]: 2 is not of type 'string'"
    assert compile_validator(json.dumps(pair)).is_valid([1, 2])  # draft-07 knows no prefixItems: an annotation
    dependent = {"dependencies": {"a": ["b"]}}  # draft-07's; draft 2020-12 spells it dependentRequired
    assert not compile_validator(json.dumps(dependent)).is_valid({"a": 1})
    old = compile_validator(json.dumps({"$schema": "http://json-schema.org/draft-04/schema#",
                                        "properties": {"n": {"type": "number", "maximum": 3, "exclusiveMaximum": True}}}))
    assert not old.is_valid({"n": 3})  # draft-04's boolean exclusiveMaximum
    for text, why in [("{", "not JSON"), ("[1]", "a list, not an object"),
                      (json.dumps({"$schema": "http://example.com/my-draft"}), "an unknown draft"),
                      (json.dumps({"type": 5}), "not a valid JSON Schema of its draft: $.type: ")]:
        found = compile_validator(text)
        assert isinstance(found, Unusable) and why in found, (text, found)
    assert compile_validator("true").is_valid({"anything": 1})


def test_json_schema_validation_is_a_setting_of_confluent_json_only() -> None:
    from gobblin_py.builtin.sources.kafka.settings import KafkaSettings

    registry = {"url": "http://r:8081"}
    assert KafkaSettings(bootstrap_servers="b:9092", topics=["t"], deserializer="confluent_json",
                         schema_registry=registry).validates_json  # the default
    off = KafkaSettings(bootstrap_servers="b:9092", topics=["t"], deserializer="confluent_json", schema_registry=registry,
                        json_schema_validation=False)
    assert not off.validates_json
    again = KafkaSettings.model_validate(off.model_dump())  # settings dumped and read again (as a commit record does)
    assert not again.validates_json
    plain = KafkaSettings(bootstrap_servers="b:9092", topics=["t"])
    assert KafkaSettings.model_validate(plain.model_dump()) == plain
    with pytest.raises(ValueError, match="json_schema_validation applies to deserializer confluent_json only"):
        KafkaSettings(bootstrap_servers="b:9092", topics=["t"], deserializer="json", json_schema_validation=False)


def event_schema_with(tmp: Path, names: list[str]) -> Path:
    """jobs/schemas/event.avsc with the metadata fields `names` (as `metadata_fields` gives them) appended."""
    from support.jobs import EVENT_SCHEMA

    from gobblin_py.builtin.sources.kafka.metadata import metadata_fields
    from gobblin_py.builtin.sources.kafka.settings import KafkaSettings

    schema = json.loads(EVENT_SCHEMA.read_text())
    settings = KafkaSettings(bootstrap_servers="b:9092", topics=["t"], deserializer="confluent_json",
                             schema_registry={"url": "http://r:8081"}, metadata_columns=names)
    schema["fields"] += metadata_fields(settings)
    path = tmp / "event-kafka.avsc"
    path.write_text(json.dumps(schema))
    return path


METADATA = ["key", "topic", "partition", "offset", "timestamp", "headers"]


@pytest.mark.kafka
@pytest.mark.parametrize(("writer", "client"), [("avro", "kafka-python"), ("parquet", "confluent")])
def test_metadata_columns_reach_records_whose_json_to_avro_schema_lists_them(
        tmp_path: Path, broker, topic: str, schema_registry: LocalSchemaRegistry, writer: str, client: str) -> None:
    good, lax = serializers(schema_registry.url, EVENT)
    ctx = context(topic)
    values = [good(event(i), ctx) for i in range(6)]
    values[4] = lax(event(4, kind="buy"), ctx)  # still validated: a bad record with its offset
    messages = [(None if i == 2 else f"k{i}".encode(), v, [("trace", f"t{i}".encode()), ("tag", b"")])
                for i, v in enumerate(values)]
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, {0: messages})
    job = json_job(tmp_path, broker.bootstrap, topic, schema_registry.url, client=client, metadata_columns=METADATA)
    job["converters"] = [{"class": "json_to_avro", "schema": str(event_schema_with(tmp_path, METADATA))}]
    job["writer"] = {"class": writer}
    result = run(tmp_path, job)
    assert result.succeeded, result.error
    assert sum(t.records_columnar for t in result.tasks) == 0  # metadata is added record by record
    out = tmp_path / "output" / topic
    rows = sorted(read_avro(out) if writer == "avro" else read_parquet(out), key=lambda r: r["_kafka_offset"])
    assert [r["id"] for r in rows] == [0, 1, 2, 3, 5]
    for r in rows:
        i = r["_kafka_offset"]
        assert (r["_kafka_key"], r["_kafka_topic"], r["_kafka_partition"]) == (None if i == 2 else f"k{i}", topic, 0)
        assert r["_kafka_timestamp"] is not None
        assert r["_kafka_headers"] == [{"key": "trace", "value": f"t{i}".encode()}, {"key": "tag", "value": b""}]
    (error,) = read_error_files(tmp_path / "output")
    assert error["location"] == f"{topic}/0@4" and "at $.kind" in error["reason"]


@pytest.mark.kafka
def test_metadata_columns_the_json_to_avro_schema_lacks_fail_before_a_record_is_written(
        tmp_path: Path, broker, topic: str, schema_registry: LocalSchemaRegistry) -> None:
    good, _ = serializers(schema_registry.url, EVENT)
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, {0: [good(event(i), context(topic)) for i in range(3)]})
    job = json_job(tmp_path, broker.bootstrap, topic, schema_registry.url, metadata_columns=["partition", "offset"])
    job["converters"] = [{"class": "json_to_avro", "schema": str(event_schema_with(tmp_path, ["partition"]))}]
    result = run(tmp_path, job)
    assert not result.succeeded
    assert "lacks field(s) _kafka_offset that the source adds to each record" in result.error, result.error
    assert '{"name": "_kafka_offset", "type": "long"}' in result.error and "Traceback" not in result.error
    assert not (tmp_path / "output").exists()
