"""Output names of the Kafka source: a pure function of cluster, topic identity, partition and offset range."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.jobs import write_job
from support.kafka_broker import delete_topic, topic_id
from support.kafka_jobs import kafka_job, new_topic, output_ids

from gobblin_py.config import load_job
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import JobRunner

pytestmark = pytest.mark.kafka


def _run(tmp: Path, job: dict) -> None:
    result = JobRunner(load_job(write_job(tmp, job)), InProcessExecutor()).run()
    assert result.succeeded, result.error


def test_a_recreated_topic_never_reuses_an_earlier_runs_names(tmp_path: Path, broker, topic: str) -> None:
    first = new_topic(broker.bootstrap, topic, 2, 100)
    old_id = topic_id(broker.bootstrap, topic)
    _run(tmp_path, kafka_job(tmp_path, broker.bootstrap, [topic]))
    delete_topic(broker.bootstrap, topic)
    second = new_topic(broker.bootstrap, topic, 2, 100)  # offsets start at 0 again
    assert topic_id(broker.bootstrap, topic) != old_id
    # the operator resets the job's state (here: a fresh work directory) to read the new topic from its start
    job = kafka_job(tmp_path, broker.bootstrap, [topic])
    job["job"]["work_dir"] = str(tmp_path / "work-after-reset")
    import shutil

    shutil.rmtree(tmp_path / "output" / "_gobblin-py" / "claims")  # the new directory takes the output over, as the
    # claim's refusal says to
    _run(tmp_path, job)
    ids = output_ids(tmp_path / "output", topic)
    expected = {e["id"] for data in (first, second) for evs in data.values() for e in evs}
    assert set(ids) == expected and set(ids.values()) == {1}


def test_names_are_readable_and_carry_a_128_bit_hash(tmp_path: Path, broker, topic: str) -> None:
    new_topic(broker.bootstrap, topic, 1, 30, days=1)
    _run(tmp_path, kafka_job(tmp_path, broker.bootstrap, [topic]))
    (name,) = [p.name for p in (tmp_path / "output" / topic).rglob("*.avro")]
    assert re.fullmatch(rf"{re.escape(topic)}\.0\.0-30-[0-9a-f]{{32}}\.avro", name), name


def test_without_topic_ids_the_first_records_timestamp_tells_a_recreated_topic_apart(broker, topic: str) -> None:
    from kafka import TopicPartition

    from gobblin_py.builtin.sources.kafka.identity import TopicIdentity, first_timestamps
    from gobblin_py.builtin.sources.kafka.settings import open_consumer
    from gobblin_py.builtin.sources.kafka.source import KafkaSource

    settings = KafkaSource.Settings.model_validate({"bootstrap_servers": broker.bootstrap, "topics": [topic], "idle_timeout_s": 5})
    starts = {TopicPartition(topic, 0): 0, TopicPartition(topic, 1): 5}

    def incarnation() -> TopicIdentity:
        new_topic(broker.bootstrap, topic, 2, 10)
        consumer = open_consumer(settings)
        try:
            return TopicIdentity("cluster", {}, first_timestamps(settings, consumer, starts))
        finally:
            consumer.close()

    first = incarnation()
    assert first.first_timestamps.keys() == {(topic, 0), (topic, 1)}
    delete_topic(broker.bootstrap, topic)
    second = incarnation()
    tp = TopicPartition(topic, 0)
    assert first.of(tp, 0) != second.of(tp, 0)
    assert first.of(tp, 0) == TopicIdentity("cluster", {}, dict(first.first_timestamps)).of(tp, 0)  # deterministic
