"""A `LossyRead` (a value whose writer schema has fields the planned output schema lacks) fails its task at once: every
attempt of the run would meet the same value in the same planned schema, so retrying it only spends
`job.max_task_retries` and time. What the user sees: one attempt in the task's event, the message naming
topic/partition@offset and the fix, the exit code of a task that failed (1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.confluent_avro import V1, V2, job_for, orders, read_avro, serialize, serializer
from support.jobs import run_cli, write_job
from support.kafka_broker import create_topic, produce
from support.schema_registry import LocalSchemaRegistry

from gobblin_py.errors import PermanentTaskError, is_retriable
from gobblin_py.state.events import EventLog
from gobblin_py.state.store import StateStore

pytestmark = pytest.mark.kafka


def test_config_class_task_failures_are_not_retriable() -> None:
    from gobblin_py.builtin.sources.kafka.registry import IncompatibleVersion, LossyRead

    for error in (LossyRead("t/0@1: …"), IncompatibleVersion("t/0@1: …"), PermanentTaskError("…")):
        assert not is_retriable(error), type(error).__name__


def test_a_lossy_read_under_schema_evolution_fail_is_attempted_once(tmp_path: Path, broker, topic: str,
                                                                     schema_registry: LocalSchemaRegistry) -> None:
    """Ten values of the subject's version 1, then five written in a newer schema with two more fields that is no
    version of the subject (registered under another subject): with `max_task_retries: 3` the task still has one
    attempt, and nothing of the range is published."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer

    create_topic(broker.bootstrap, topic, 1)
    elsewhere = AvroSerializer(SchemaRegistryClient({"url": schema_registry.url}), json.dumps(V2),
                               conf={"subject.name.strategy": lambda ctx, name: "elsewhere-value"})
    newer = [{**r, "channel": "app", "note": f"n{r['id']}"} for r in orders(10, 5)]
    produce(broker.bootstrap, topic, {0: serialize(serializer(schema_registry.url, V1), topic, orders(0, 10))
                                         + serialize(elsewhere, topic, newer)})
    job = job_for(tmp_path, broker.bootstrap, topic, {"url": schema_registry.url}, schema_evolution="fail")
    job["job"]["max_task_retries"] = 3
    write_job(tmp_path, job)

    done = run_cli("run", "job.yaml", "--in-process", cwd=tmp_path)
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 1, said  # a task that failed (docs/architecture.md: a bad configuration inside a task)
    assert f"{topic}/0@10: schema id 2 (no version of subject '{topic}-value') has field(s) channel, note that the " \
           "output schema (version 1, schema id 1) lacks" in said, said
    assert "Register the writer's schema as the subject's newest version" in said, said
    assert "attempt 2" not in said and "Traceback" not in said, said

    [finished] = [e["metadata"] for e in EventLog(tmp_path / "work", "k").read() if e["name"] == "TaskFinished"]
    assert finished["status"] == "failed" and finished["attempts"] == 1, finished
    assert f"{topic}/0@10" in finished["error"]
    assert not read_avro(tmp_path / "output")
    assert not StateStore(tmp_path / "work", "k").watermarks().get(topic)
