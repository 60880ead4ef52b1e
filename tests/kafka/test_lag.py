"""Kafka lag against the real broker: the figures a user computes by hand (end offset − committed offset, the age of
the first record not committed), 0 after a run that read everything, an error for a re-created topic, and the consumer
group copy of the committed offsets after each run."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from support.jobs import write_job
from support.kafka_broker import delete_topic, free_port
from support.kafka_jobs import events, kafka_job, new_topic, produce_events

from gobblin_py.config import load_job
from gobblin_py.operating.lag import measure_lag
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import JobRunner
from gobblin_py.state.events import EventLog
from gobblin_py.state.store import StateStore

pytestmark = pytest.mark.kafka


def _run(tmp: Path, job: dict):
    result = JobRunner(load_job(write_job(tmp, job)), InProcessExecutor()).run()
    assert result.succeeded, result.error
    return result


def _lag(tmp: Path, job: dict, timeout_s: float = 10.0):
    (lag,) = measure_lag(load_job(write_job(tmp, job)), timeout_s)
    return lag


def _committed(tmp: Path, topic: str) -> dict[int, int]:
    return {int(k): int(v) for k, v in StateStore(tmp / "work", "k").watermarks().get(topic, {}).items()}


def test_lag_is_what_was_produced_since_the_run_and_the_age_of_its_first_record(tmp_path: Path, broker, topic: str) -> None:
    new_topic(broker.bootstrap, topic, 2, 20)
    job = kafka_job(tmp_path, broker.bootstrap, [topic])
    before = _lag(tmp_path, job)  # never run: everything from the first offset (bootstrap_with_offset: earliest)
    assert (before.records, before.error) == (40, None)
    assert [(p.name, p.records) for p in before.partitions] == [(f"{topic}-0", 20), (f"{topic}-1", 20)]

    _run(tmp_path, job)
    done = _lag(tmp_path, job)
    assert (done.records, done.seconds, done.error, done.pending) == (0, None, None, False)

    sent_from = time.time()
    produce_events(broker.bootstrap, topic, {0: events(7), 1: events(3)})
    sent_until = time.time()
    time.sleep(1.5)
    measured_from = time.time()
    lag = _lag(tmp_path, job)
    measured_until = time.time()
    assert lag.error is None and lag.unit == "records"
    assert lag.records == 10
    assert [(p.name, p.records) for p in lag.partitions] == [(f"{topic}-0", 7), (f"{topic}-1", 3)]
    # the first of the new records was produced between sent_from and sent_until, and measured in between too
    assert measured_from - sent_until - 0.05 <= lag.seconds <= measured_until - sent_from + 0.05
    assert all(p.seconds is not None and p.seconds <= lag.seconds for p in lag.partitions)

    _run(tmp_path, job)
    assert _lag(tmp_path, job).records == 0


def test_lag_of_a_run_capped_by_checkpoint_max_records_is_the_rest(tmp_path: Path, broker, topic: str) -> None:
    new_topic(broker.bootstrap, topic, 2, 20)
    job = kafka_job(tmp_path, broker.bootstrap, [topic])
    job["job"]["checkpoint_max_records"] = 15
    _run(tmp_path, job)
    committed = _committed(tmp_path, topic)
    lag = _lag(tmp_path, job)
    assert lag.records == 40 - sum(committed.values()) == 25
    assert {p.name: p.records for p in lag.partitions} == {f"{topic}-{p}": 20 - committed[p] for p in (0, 1)}
    assert lag.seconds is not None and lag.seconds >= 0


def test_a_recreated_topic_shows_an_error_not_a_small_lag(tmp_path: Path, broker, topic: str) -> None:
    new_topic(broker.bootstrap, topic, 2, 20)
    job = kafka_job(tmp_path, broker.bootstrap, [topic])
    _run(tmp_path, job)
    delete_topic(broker.bootstrap, topic)
    new_topic(broker.bootstrap, topic, 2, 22)  # end offsets 22 against committed 20: a lag of 2 each, were it believed
    lag = _lag(tmp_path, job)
    assert lag.records is None and lag.seconds is None
    assert lag.error is not None and "deleted and created again" in lag.error, lag.error


def test_an_unreachable_broker_is_an_error_per_dataset_within_the_timeout(tmp_path: Path, broker, topic: str) -> None:
    new_topic(broker.bootstrap, topic, 1, 5)
    job = kafka_job(tmp_path, broker.bootstrap, [topic])
    _run(tmp_path, job)
    gone = kafka_job(tmp_path, f"127.0.0.1:{free_port()}", [topic])
    started = time.monotonic()
    lag = _lag(tmp_path, gone, timeout_s=2.0)
    assert time.monotonic() - started < 10
    assert lag.dataset == topic and lag.records is None and lag.error, lag


def _group_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        found = admin.list_group_offsets({group: None})[group]  # the broker's own OffsetFetch
    finally:
        admin.close()
    return {(tp.topic, tp.partition): meta.offset for tp, meta in found.items()}


def test_the_consumer_group_gets_the_committed_offsets_after_each_run(tmp_path: Path, broker, topic: str) -> None:
    new_topic(broker.bootstrap, topic, 2, 20)
    group = f"g-{topic}"
    job = kafka_job(tmp_path, broker.bootstrap, [topic], commit_offsets_to_group=group)
    job["job"]["checkpoint_max_records"] = 15
    for _ in range(2):  # 15 of 40, then 30
        _run(tmp_path, job)
        assert _group_offsets(broker.bootstrap, group) == {(topic, p): o for p, o in _committed(tmp_path, topic).items()}
    produce_events(broker.bootstrap, topic, {0: events(4)})
    del job["job"]["checkpoint_max_records"]
    _run(tmp_path, job)
    assert _committed(tmp_path, topic) == {0: 24, 1: 20}
    assert _group_offsets(broker.bootstrap, group) == {(topic, 0): 24, (topic, 1): 20}
    # the group's lag as Burrow computes it (end offsets − group offsets) is the job's
    produce_events(broker.bootstrap, topic, {1: events(5)})
    assert _lag(tmp_path, job).records == 5


def test_a_failed_group_commit_is_a_warning_and_an_event_never_a_failed_run(tmp_path: Path, broker, topic: str,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from gobblin_py.builtin.sources.kafka import consumer_group
    from gobblin_py.errors import SourceError

    def refuse(*args: object) -> None:
        raise SourceError("consumer group g refused the offsets")

    monkeypatch.setattr(consumer_group, "commit_offsets", refuse)
    new_topic(broker.bootstrap, topic, 1, 5)
    job = kafka_job(tmp_path, broker.bootstrap, [topic], commit_offsets_to_group="g")
    _run(tmp_path, job)
    assert _committed(tmp_path, topic) == {0: 5}
    failed = [e for e in EventLog(tmp_path / "work", "k").read() if e["name"] == "AfterCommitFailed"]
    assert len(failed) == 1 and "refused the offsets" in failed[0]["metadata"]["error"]


def test_run_metrics_prom_writes_the_measured_lag(tmp_path: Path, broker, topic: str) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from gobblin_py.testing.crash import cli

    new_topic(broker.bootstrap, topic, 2, 20)
    job = kafka_job(tmp_path, broker.bootstrap, [topic])
    job["job"]["checkpoint_max_records"] = 15
    write_job(tmp_path, job)
    run = cli(["run", "job.yaml", "--in-process", "--metrics-prom", "k.prom"], tmp_path)
    assert run.returncode == 0, run.stderr
    samples = {s.name: s.value for f in text_string_to_metric_families((tmp_path / "k.prom").read_text())
               for s in f.samples if s.labels.get("dataset") == topic and s.name.startswith("gobblin_py_dataset_lag")}
    lag = _lag(tmp_path, job)
    assert samples["gobblin_py_dataset_lag_records"] == lag.records == 40 - sum(_committed(tmp_path, topic).values()) == 25
    assert 0 <= samples["gobblin_py_dataset_lag_seconds"] <= lag.seconds
    assert samples["gobblin_py_dataset_lag_unknown"] == 0
