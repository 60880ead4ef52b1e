"""`schema_evolution` for `deserializer: confluent_avro`: a subject's new version evolves the output when every version
the topic may still hold reads into it losslessly; otherwise `fail` (the default) stops the topic naming the subject,
both versions and the offset, `evolve` keeps every field in a merged output schema, and `dead_letter` diverts exactly
the records that would lose data. Values are made by confluent-kafka's own AvroSerializer against the test registry,
produced into the broker, and read back by readers that did not write them (Apache Avro, pyiceberg, DuckDB)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.confluent_avro import V1, V2, job_for, orders, read_avro, run, serialize, serializer
from support.jobs import run_cli, write_job
from support.kafka_broker import create_topic, produce
from support.schema_registry import LocalSchemaRegistry

from gobblin_py.state.store import StateStore
from gobblin_py.testing.outputs import read_error_files

pytestmark = pytest.mark.kafka

WITHOUT_NOTE = {**V2, "fields": [f for f in V2["fields"] if f["name"] != "note"]}  # BACKWARD allows removing it


def removed_field_topic(registry: LocalSchemaRegistry, bootstrap: str, topic: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Six version-2 values with a note, then four of version 3, which removed it (the subject's latest)."""
    create_topic(bootstrap, topic, 1)
    first = [{**r, "channel": "app", "note": f"n{r['id']}"} for r in orders(0, 6)]
    later = [{**r, "channel": "pos"} for r in orders(6, 4)]
    values = serialize(serializer(registry.url, V2), topic, first) + serialize(serializer(registry.url, WITHOUT_NOTE), topic, later)
    produce(bootstrap, topic, {0: values})
    return first, later


def test_a_removed_fields_values_are_never_dropped_silently(tmp_path: Path, broker, topic: str,
                                                            schema_registry: LocalSchemaRegistry) -> None:
    """The subject's latest version removed `note` (BACKWARD allows it): reading the older values into it would lose
    their notes, so by default the run stops, naming the subject, both versions and ids, and the first such offset,
    and says what to do; the command exits non-zero without a traceback."""
    removed_field_topic(schema_registry, broker.bootstrap, topic)
    write_job(tmp_path, job_for(tmp_path, broker.bootstrap, topic, {"url": schema_registry.url}))
    done = run_cli("run", "job.yaml", "--in-process", cwd=tmp_path)
    said = done.stdout + done.stderr
    assert done.returncode != 0, said
    assert f"{topic}/0@0: subject '{topic}-value' version 1 (schema id 1) does not read into the output schema, " \
           "version 2 (schema id 2), without loss: field note would be dropped" in " ".join(said.split()), said
    assert "schema_evolution: evolve" in said and "dead_letter" in said and "Traceback" not in said
    assert not read_avro(tmp_path / "output")
    assert not StateStore(tmp_path / "work", "k").watermarks().get(topic)


def test_under_evolve_a_removed_field_stays_in_the_output_with_its_values(tmp_path: Path, broker, topic: str,
                                                                          schema_registry: LocalSchemaRegistry) -> None:
    first, later = removed_field_topic(schema_registry, broker.bootstrap, topic)
    job = job_for(tmp_path, broker.bootstrap, topic, {"url": schema_registry.url}, schema_evolution="evolve")
    done = run(tmp_path, job)
    assert done.succeeded, done.error
    records = sorted(read_avro(tmp_path / "output" / topic), key=lambda r: r["id"])
    assert records == first + [{**r, "note": None} for r in later]  # the older values keep their notes
    kept = StateStore(tmp_path / "work", "k").dataset_state(topic)["source"]
    assert kept["value_schema"] == {"subject": f"{topic}-value", "version": 2, "id": 2}
    assert kept["value_schema_evolved"]["versions"] == [1, 2] and len(kept["value_schema_evolved"]["fingerprint"]) == 32
    # a second run plans the same merged schema: the state stays, and no notice says the schema changed
    produce(broker.bootstrap, topic, {0: serialize(serializer(schema_registry.url, WITHOUT_NOTE), topic,
                                                    [{**r, "channel": "pos"} for r in orders(10, 2)])})
    again = run(tmp_path, job)
    assert again.succeeded, again.error
    assert not [n for d in again.datasets for n in d.notices if "value schema" in n]
    assert StateStore(tmp_path / "work", "k").dataset_state(topic)["source"]["value_schema_evolved"] == kept["value_schema_evolved"]
    assert sorted(r["id"] for r in read_avro(tmp_path / "output" / topic)) == list(range(12))


def test_under_dead_letter_exactly_the_values_that_would_lose_a_field_go_to_the_error_file(
        tmp_path: Path, broker, topic: str, schema_registry: LocalSchemaRegistry) -> None:
    _first, later = removed_field_topic(schema_registry, broker.bootstrap, topic)
    done = run(tmp_path, job_for(tmp_path, broker.bootstrap, topic, {"url": schema_registry.url},
                                 schema_evolution="dead_letter"))
    assert done.succeeded, done.error
    assert sorted(read_avro(tmp_path / "output" / topic), key=lambda r: r["id"]) == later
    errors = {e["location"]: e["reason"] for e in read_error_files(tmp_path / "output")}
    assert set(errors) == {f"{topic}/0@{i}" for i in range(6)}
    for reason in errors.values():
        assert f"subject '{topic}-value' version 1 (schema id 1) does not read into the output schema, version 2 " \
               "(schema id 2), without loss: field note would be dropped" in reason, reason
    assert sum(d.records_rejected for d in done.datasets) == 6  # the summary counts them


WIDE = {**V1, "fields": [{"name": "id", "type": "long"}, {"name": "customer", "type": "string"},
                         {"name": "amount", "type": "double"}]}
NARROW = {**V1, "fields": [{"name": "id", "type": "long"}, {"name": "customer", "type": "string"},
                           {"name": "amount", "type": "float"}, {"name": "region", "type": "string"}]}  # no default


def narrowed_topic(registry: LocalSchemaRegistry, bootstrap: str, topic: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Five values of a version with a double, then three of one (registered under compatibility NONE) that narrowed it
    to float and added a field without default: no earlier value reads into it."""
    create_topic(bootstrap, topic, 1)
    registry.state.set_config(f"{topic}-value", "NONE")
    old = [{**r, "amount": r["id"] + 0.1} for r in orders(0, 5)]  # 0.1 is not a float: narrowed, it would change
    new = [{**r, "amount": 0.5, "region": "eu"} for r in orders(5, 3)]
    produce(bootstrap, topic, {0: serialize(serializer(registry.url, WIDE), topic, old)
                               + serialize(serializer(registry.url, NARROW), topic, new)})
    return old, new


def test_a_narrowed_type_fails_by_default_naming_the_field(tmp_path: Path, broker, topic: str,
                                                           schema_registry: LocalSchemaRegistry) -> None:
    narrowed_topic(schema_registry, broker.bootstrap, topic)
    done = run(tmp_path, job_for(tmp_path, broker.bootstrap, topic, {"url": schema_registry.url}))
    assert not done.succeeded
    assert f"{topic}/0@0: subject '{topic}-value' version 1 (schema id 1) does not read into the output schema, " \
           "version 2 (schema id 2), without loss: amount: double would be narrowed to float; field region has no " \
           "default" in done.error, done.error
    assert not read_avro(tmp_path / "output") and not read_error_files(tmp_path / "output")
    assert not StateStore(tmp_path / "work", "k").watermarks().get(topic)


def test_under_evolve_a_narrowed_type_keeps_the_wider_one(tmp_path: Path, broker, topic: str,
                                                          schema_registry: LocalSchemaRegistry) -> None:
    old, new = narrowed_topic(schema_registry, broker.bootstrap, topic)
    done = run(tmp_path, job_for(tmp_path, broker.bootstrap, topic, {"url": schema_registry.url},
                                 schema_evolution="evolve"))
    assert done.succeeded, done.error
    records = sorted(read_avro(tmp_path / "output" / topic), key=lambda r: r["id"])
    assert records == [{**r, "region": None} for r in old] + new  # doubles whole; no region before it existed
    from avro.datafile import DataFileReader
    from avro.io import DatumReader

    with DataFileReader(open(next((tmp_path / "output" / topic).rglob("*.avro")), "rb"), DatumReader()) as reader:
        fields = {f.name: str(f.type) for f in reader.datum_reader.writers_schema.fields}
    assert fields["amount"] == '"double"' and "null" in fields["region"]


def test_types_no_schema_holds_both_of_fail_the_topic_under_evolve_naming_the_versions(
        tmp_path: Path, broker, topic: str, schema_registry: LocalSchemaRegistry) -> None:
    create_topic(broker.bootstrap, topic, 1)
    schema_registry.state.set_config(f"{topic}-value", "NONE")
    as_record = {**V1, "fields": [*V1["fields"][:2], {"name": "amount", "type": {"type": "record", "name": "Money", "fields": [
        {"name": "cents", "type": "long"}]}}]}
    produce(broker.bootstrap, topic, {0: serialize(serializer(schema_registry.url, V1), topic, orders(0, 2))
                                      + serialize(serializer(schema_registry.url, as_record), topic,
                                                  [{"id": 9, "customer": "c", "amount": {"cents": 5}}])})
    done = run(tmp_path, job_for(tmp_path, broker.bootstrap, topic, {"url": schema_registry.url}, schema_evolution="evolve"))
    assert not done.succeeded
    assert f"subject '{topic}-value' cannot be merged" in done.error and "version 2 (schema id 2) and the merge of " \
           "version 1 (schema id 1): amount: float and record shop.Money cannot be merged" in done.error, done.error
    assert not (tmp_path / "output").exists()


def test_a_field_added_mid_stream_evolves_one_iceberg_table_in_the_commit_that_first_writes_it(
        tmp_path: Path, broker, topic: str, schema_registry: LocalSchemaRegistry) -> None:
    pytest.importorskip("pyiceberg")
    duckdb = pytest.importorskip("duckdb")
    from pyiceberg.catalog import load_catalog

    create_topic(broker.bootstrap, topic, 1)
    old = orders(0, 30)
    new = [{**r, "channel": "app", "note": f"n{r['id']}"} for r in orders(30, 20)]
    values = serialize(serializer(schema_registry.url, V1), topic, old)
    produce(broker.bootstrap, topic, {0: values[:20]})
    job = job_for(tmp_path, broker.bootstrap, topic, {"url": schema_registry.url}, "parquet")
    job["publisher"] = {"class": "iceberg", "table": "db.{dataset}", "warehouse": str(tmp_path / "warehouse")}
    first = run(tmp_path, job)
    assert first.succeeded, first.error
    produce(broker.bootstrap, topic, {0: values[20:] + serialize(serializer(schema_registry.url, V2), topic, new)})
    second = run(tmp_path, job)  # a compatible version: it evolves, whatever schema_evolution says
    assert second.succeeded, second.error

    catalog = load_catalog("gobblin_py", type="sql", uri=f"sqlite:///{tmp_path / 'work' / 'iceberg' / 'catalog.db'}")
    table = catalog.load_table(f"db.{topic}")
    snapshots = table.metadata.snapshots
    assert len(snapshots) == 2  # one per run: the column came with the commit that first wrote it
    assert [f.name for f in table.schema().fields] == ["id", "customer", "amount", "channel", "note"]
    assert len(table.schemas()) == 2
    in_effect = [json.loads(s.summary["gobblin-py.source-state"])["value_schema"] for s in snapshots]
    assert [(v["subject"], v["version"]) for v in in_effect] == [(f"{topic}-value", 1), (f"{topic}-value", 2)]
    rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert [r["id"] for r in rows] == list(range(50))  # every record once
    assert [(r["channel"], r["note"]) for r in rows[:20]] == [(None, None)] * 20  # written before the column existed
    assert [(r["channel"], r["note"]) for r in rows[20:30]] == [("web", None)] * 10  # version 1 read into 2: defaults
    assert rows[30:] == [{**r, "amount": r["amount"]} for r in new]
    paths = [t.file.file_path.removeprefix("file://") for t in table.scan().plan_files()]
    counted = duckdb.connect().execute("SELECT count(*), count(DISTINCT id) FROM read_parquet(?, union_by_name = true)",
                                       [paths]).fetchone()
    assert counted == (50, 50)


@pytest.mark.parametrize("policy", ["fail", "evolve", "dead_letter"])
def test_a_version_registered_after_planning_fails_the_range_for_the_next_run_under_every_policy(
        schema_registry: LocalSchemaRegistry, policy: str) -> None:
    """A task meets a version newer than its planned output schema (registered mid-run) that the output would lose a
    field of: not a bad record (its values are no mistake) and never dropped: the range fails, the next run plans with
    it."""
    from gobblin_py.builtin.sources.kafka.registry import ConfluentAvroDecoder, IncompatibleVersion
    from gobblin_py.builtin.sources.kafka.settings import SchemaRegistrySettings

    serialize(serializer(schema_registry.url, V1), "orders", orders(0, 1))  # version 1, planned
    decode = ConfluentAvroDecoder(SchemaRegistrySettings(url=schema_registry.url), V1, 1, "orders-value", 1, policy)
    (newer,) = serialize(serializer(schema_registry.url, V2), "orders", [{**orders(1, 1)[0], "channel": "app", "note": "n"}])
    with pytest.raises(IncompatibleVersion, match=r"subject 'orders-value' version 2 \(schema id 2\) does not read into "
                                                  r"the output schema, version 1 \(schema id 1\), without loss: .*field "
                                                  r"channel would be dropped.*registered after this run was planned"):
        decode(newer)
