"""The test schema registry answers confluent-kafka's `SchemaRegistryClient` as Confluent's REST API does: ids,
versions, lookups, `/config`, and BACKWARD compatibility by Avro's resolution rules (409 on a refused registration).
No broker: the other registry tests depend on these answers being right."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.schema_registry import LocalSchemaRegistry

pytest.importorskip("confluent_kafka.schema_registry")


def record(*fields: dict[str, Any], name: str = "R") -> Any:
    from confluent_kafka.schema_registry import Schema

    return Schema(json.dumps({"type": "record", "name": name, "fields": list(fields)}), "AVRO")


def f(name: str, kind: Any, **more: Any) -> dict[str, Any]:
    return {"name": name, "type": kind, **more}


@pytest.fixture
def client(schema_registry: LocalSchemaRegistry) -> Any:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    return SchemaRegistryClient({"url": schema_registry.url})


def test_ids_versions_and_lookups(client: Any) -> None:
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    v1, v2 = record(f("a", "int")), record(f("a", "int"), f("b", "string", default="x"))
    assert client.register_schema("s-value", v1) == 1
    assert client.register_schema("s-value", record(f("a", "int"))) == 1  # the same schema again: its id, no version
    assert client.register_schema("s-value", v2) == 2
    assert client.register_schema("other-value", v1) == 1  # ids are global: one schema, one id
    assert client.get_versions("s-value") == [1, 2]
    latest = client.get_latest_version("s-value")
    assert (latest.version, latest.schema_id, json.loads(latest.schema.schema_str)) == (2, 2, json.loads(v2.schema_str))
    assert client.get_version("s-value", 1).schema_id == 1
    assert json.loads(client.get_schema(2).schema_str) == json.loads(v2.schema_str)
    assert client.lookup_schema("s-value", v1).version == 1
    with pytest.raises(SchemaRegistryError) as missing:
        client.get_schema(99)
    assert (missing.value.http_status_code, missing.value.error_code) == (404, 40403)
    with pytest.raises(SchemaRegistryError) as no_subject:
        client.get_latest_version("nope")
    assert (no_subject.value.http_status_code, no_subject.value.error_code) == (404, 40401)


@pytest.mark.parametrize(("old", "new", "ok"), [
    ([f("a", "int")], [f("a", "int"), f("b", "string", default="")], True),   # added with a default
    ([f("a", "int")], [f("a", "int"), f("b", "string")], False),              # added without one
    ([f("a", "int"), f("b", "string")], [f("a", "int")], True),               # removed
    ([f("a", "int")], [f("a", "long")], True),                                # promotions int→long→float→double
    ([f("a", "long")], [f("a", "float")], True),
    ([f("a", "float")], [f("a", "double")], True),
    ([f("a", "long")], [f("a", "int")], False),                               # not the other way
    ([f("a", "string")], [f("a", "bytes")], True),                            # string ↔ bytes
    ([f("a", "bytes")], [f("a", "string")], True),
    ([f("a", "int")], [f("a", "string")], False),
    ([f("a", "int")], [f("a", ["null", "int"], default=None)], True),         # made nullable
])
def test_backward_compatibility_follows_avro_resolution(client: Any, old: list, new: list, ok: bool) -> None:
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    client.register_schema("c-value", record(*old))
    assert client.test_compatibility("c-value", record(*new)) is ok
    if ok:
        assert client.register_schema("c-value", record(*new)) == 2
    else:
        with pytest.raises(SchemaRegistryError) as refused:
            client.register_schema("c-value", record(*new))
        assert refused.value.http_status_code == 409
        assert client.get_versions("c-value") == [1]


def test_config_sets_the_level_globally_and_per_subject(client: Any) -> None:
    assert client.get_compatibility() == "BACKWARD"
    client.register_schema("n-value", record(f("a", "int")))
    client.set_compatibility("n-value", "NONE")
    assert client.get_compatibility("n-value") == "NONE"
    assert client.register_schema("n-value", record(f("a", "string"))) == 2  # NONE checks nothing
    client.set_compatibility(level="FULL")
    assert client.get_compatibility() == "FULL"
    client.register_schema("full-value", record(f("a", "int")))
    assert not client.test_compatibility("full-value", record(f("a", "int"), f("b", "int")))  # the old can't read…
