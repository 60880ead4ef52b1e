"""A broker that dies after planning fails the run fast: one retry budget per run for one unreachable broker.

The first task to spend its retries on the broker marks it given up for the run; the run's other tasks are
not attempted, and the run fails naming the broker and what to check. Nothing is committed; the next run,
with the broker back, takes every record once.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import orjson
import pytest
from support.jobs import EVENT_SCHEMA, write_job
from support.kafka_broker import LocalBroker, create_topic, end_offsets, produce
from support.kafka_jobs import events, kafka_job, output_ids

from gobblin_py.config import load_job
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import JobRunner
from gobblin_py.runtime.task.results import TaskStatus
from gobblin_py.state.store import StateStore

PARTITIONS, RETRIES = 4, 2

# Stops the broker from inside the run (after planning): when a task opens (before its consumer connects)
# or at the first record a task reads (its consumer is connected and has a fetch in flight).
FAULT = textwrap.dedent('''
    import os, signal
    from typing import Literal
    from gobblin_py.api import OneToOneConverter, Settings

    class StopSettings(Settings):
        pid: int
        signal: Literal["SIGSTOP", "SIGKILL"]
        at: Literal["open", "record"]

    class StopBroker(OneToOneConverter):
        Settings = StopSettings

        def open(self, context):
            if self.settings.at == "open":
                self._stop()

        def convert_schema(self, schema):
            return schema

        def map_record(self, record):
            if self.settings.at == "record":
                self._stop()
            return record

        def _stop(self):
            try:
                os.kill(self.settings.pid, getattr(signal, self.settings.signal))
            except ProcessLookupError:
                pass
''')


@pytest.fixture
def own_broker():
    """A broker of this test's own: it is paused or killed."""
    with LocalBroker() as b:
        yield b


def _job(tmp: Path, broker: LocalBroker, topic: str, signal: str | None, at: str = "open") -> dict:
    job = kafka_job(tmp, broker.bootstrap, [topic], request_timeout_ms=1000, idle_timeout_s=2,
                    max_partition_fetch_bytes=1024, fetch_max_bytes=1024,
                    min_records_per_workunit=1)  # a task per partition, however few records: the test is about tasks
    job["job"]["max_task_retries"] = RETRIES
    if signal is not None:
        (tmp / "broker_fault.py").write_text(FAULT)
        job["converters"].insert(0, {"class": "broker_fault:StopBroker", "pid": broker.pid, "signal": signal, "at": at})
    return job


def _run(tmp: Path, job: dict):
    return JobRunner(load_job(write_job(tmp, job)), InProcessExecutor()).run()


@pytest.mark.kafka
@pytest.mark.parametrize(("signal", "at"), [("SIGSTOP", "open"), ("SIGSTOP", "record"), ("SIGKILL", "record")])
def test_the_first_task_to_give_up_on_the_broker_fails_the_others_at_once(tmp_path: Path, own_broker: LocalBroker, topic: str,
                                                                          signal: str, at: str) -> None:
    # one record a batch: a task's first fetch (1 KiB at most) cannot hold its whole range, so a task stopped at its
    # first record needs the stopped broker again (a batch of all 200 let it finish from what it had prefetched)
    create_topic(own_broker.bootstrap, topic, PARTITIONS)
    data = {p: events(200) for p in range(PARTITIONS)}
    produce(own_broker.bootstrap, topic, {p: [orjson.dumps(e) for e in evs] for p, evs in data.items()},
            producer_config={"batch_size": 1, "linger_ms": 0})
    try:
        failed = _run(tmp_path, _job(tmp_path, own_broker, topic, signal, at))
    finally:
        if signal == "SIGSTOP":
            own_broker.resume()
    assert not failed.succeeded
    tasks = failed.tasks
    assert len(tasks) == PARTITIONS and all(t.status is TaskStatus.FAILED for t in tasks), [t.error for t in tasks]
    attempts = [t.attempts for t in tasks]
    # before: every task spent its own budget, PARTITIONS × (RETRIES + 1) = 12 attempts, each waiting on its timeouts
    assert attempts == [RETRIES + 1] + [0] * (PARTITIONS - 1)
    broker = f"Kafka broker {own_broker.bootstrap} unreachable"
    gave_up = tasks[0].workunit.id
    assert tasks[0].error.startswith(f"{broker} (this task gave up after {RETRIES + 1} attempts: ")
    for t in tasks[1:]:
        assert t.error.startswith(f"{broker} (task {gave_up} gave up after {RETRIES + 1} attempts: ")
        assert "); not attempted. Check" in t.error
    for t in tasks:
        assert t.error.endswith("Check that the broker is running and `source.bootstrap_servers` is right; "
                                "the next run resumes from the committed offsets.")
    assert broker in failed.error
    assert not (tmp_path / "output").exists()  # exactly once: nothing of the failed run is published
    assert StateStore(tmp_path / "work", "k").watermarks() == {}
    assert not list((tmp_path / "work" / "staging" / "k").glob("*/.gave-up"))  # the marker lives as long as its run

    if signal == "SIGKILL":
        return  # the broker keeps its data in memory only: nothing to read again
    again = _run(tmp_path, _job(tmp_path, own_broker, topic, None))
    assert again.succeeded, again.error
    assert all(t.attempts == 1 for t in again.tasks)  # the new run tries the broker afresh
    ids = output_ids(tmp_path / "output", topic)
    assert set(ids) == {e["id"] for evs in data.values() for e in evs} and set(ids.values()) == {1}
    committed = {int(k): v for k, v in StateStore(tmp_path / "work", "k").watermarks()[topic].items()}
    assert committed == end_offsets(own_broker.bootstrap, topic)


# A source that names no endpoints up front: each of its tasks fails, as if its service were down.
DOWN_SOURCE = textwrap.dedent('''
    from gobblin_py.api import Extractor, Settings, Source, WorkUnit
    from gobblin_py.errors import UnreachableError

    class DownSettings(Settings):
        tasks: int

    class DownExtractor(Extractor):
        def get_schema(self):
            return {}

        def read_records(self):
            raise UnreachableError("connection refused by db.example:5432", "database db.example:5432",
                                   "Check that the database is up.")
            yield

        def actual_high_watermark(self):
            return 0

    class DownSource(Source):
        Settings = DownSettings

        def get_workunits(self, state):
            return [WorkUnit(f"wu{i}", "rows", str(i), 0, 1) for i in range(self.settings.tasks)]

        def get_extractor(self, workunit, context):
            return DownExtractor()
''')


def test_a_task_that_failed_on_a_service_another_task_gave_up_on_is_not_retried(tmp_path: Path) -> None:
    """Without `endpoints` declared up front, each later task learns of the service on its first failure and stops there."""
    (tmp_path / "down_source.py").write_text(DOWN_SOURCE)
    job = {"job": {"name": "k", "work_dir": str(tmp_path / "work"), "max_task_retries": RETRIES},
           "source": {"class": "down_source:DownSource", "tasks": 3},
           "converters": [{"class": "json_to_avro", "schema": str(EVENT_SCHEMA)}],
           "writer": {"class": "jsonl"}, "publisher": {"final_dir": str(tmp_path / "output")}}
    result = _run(tmp_path, job)
    assert not result.succeeded
    assert [t.attempts for t in result.tasks] == [RETRIES + 1, 1, 1]  # before: 3 × 3
    assert result.tasks[0].error == ("database db.example:5432 unreachable (this task gave up after 3 attempts: connection "
                                     "refused by db.example:5432); the other tasks of this run that need it are not attempted "
                                     "again. Check that the database is up.")
    for t in result.tasks[1:]:
        assert t.error == ("database db.example:5432 unreachable (task wu0 gave up after 3 attempts: connection refused by "
                           "db.example:5432); not attempted again after 1 failed attempt. Check that the database is up.")
    assert not (tmp_path / "output").exists()
