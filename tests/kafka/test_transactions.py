"""Topics written by transactional producers: every commit and abort leaves a control record that takes an offset
but is never given to the reader, so a range may end on offsets that hold no record at all.

What Tansu cannot show: it returns the records of an aborted transaction even to a read_committed consumer (Apache
Kafka does not), and it has no last stable offset (an open transaction does not hold back the end offset). So these
tests assert that every committed record is ingested exactly once and that the run completes; they cannot assert
that aborted records are left out, nor that a run stops before an open transaction.
"""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest
from support.jobs import write_job
from support.kafka_broker import create_topic, end_offsets
from support.kafka_jobs import events, kafka_job, output_ids

from gobblin_py.config import load_job
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import JobRunner
from gobblin_py.state.store import StateStore

pytestmark = pytest.mark.kafka


def _transactions(bootstrap: str, topic: str, committed: list[list[dict]], aborted: list[dict]) -> None:
    """Each list of `committed` in a transaction of its own, `aborted` in one aborted between the first two; the
    partition ends with the last commit's control record."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"gobblin-py-test-{topic}", "linger.ms": 5,
                         "log_level": 0})
    producer.init_transactions(10)

    def transaction(records: list[dict], commit: bool) -> None:
        producer.begin_transaction()
        for record in records:
            producer.produce(topic, value=orjson.dumps(record), partition=0)
        producer.flush(10)  # the records reach the broker whether the transaction commits or aborts
        (producer.commit_transaction if commit else producer.abort_transaction)(10)

    for i, records in enumerate(committed):
        transaction(records, True)
        if i == 0:
            transaction(aborted, False)


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_a_range_ending_in_a_transaction_marker_completes(tmp_path: Path, broker, topic: str, client: str) -> None:
    """Before the fix, `client: confluent` waited idle_timeout_s for a record at the marker's offset, then failed
    the task blaming the broker, on every attempt: the partition never moved on."""
    create_topic(broker.bootstrap, topic, 1)
    committed = [events(30), events(20)]
    _transactions(broker.bootstrap, topic, committed, events(10))
    end = end_offsets(broker.bootstrap, topic)[0]
    assert end == 30 + 1 + 10 + 1 + 20 + 1  # records and one control record per transaction
    job = kafka_job(tmp_path, broker.bootstrap, [topic], client=client, idle_timeout_s=20)
    started = time.monotonic()
    result = JobRunner(load_job(write_job(tmp_path, job)), InProcessExecutor()).run()
    assert result.succeeded, result.error
    assert time.monotonic() - started < 15  # no wait for a record the marker's offset never gives
    ids = output_ids(tmp_path / "output", topic)
    assert all(ids[e["id"]] == 1 for batch in committed for e in batch)  # Tansu also returns the aborted ones
    assert StateStore(tmp_path / "work", "k").watermarks()[topic] == {"0": end}


def test_both_clients_read_committed_and_a_job_cannot_turn_it_off() -> None:
    from gobblin_py.builtin.sources.kafka.confluent import confluent_settings
    from gobblin_py.builtin.sources.kafka.settings import KafkaSettings, consumer_settings
    from gobblin_py.errors import GobblinError

    s = KafkaSettings.model_validate({"bootstrap_servers": "b:9092", "topics": ["ev"]})
    assert consumer_settings(s)["isolation_level"] == "read_committed"
    assert confluent_settings(s, "g")["isolation.level"] == "read_committed"
    for key in ("isolation_level", "isolation.level"):
        with pytest.raises((ValueError, GobblinError), match="aborted"):
            KafkaSettings.model_validate({"bootstrap_servers": "b:9092", "topics": ["ev"], "consumer_config": {key: "read_uncommitted"}})
