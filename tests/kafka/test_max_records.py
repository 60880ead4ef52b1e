"""job.checkpoint_max_records: a run (or a continuous run's checkpoint) takes at most that many records, shared
among the partitions by backlog; the runs after it take the rest, each record once."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.jobs import write_job
from support.kafka_broker import end_offsets
from support.kafka_jobs import events, kafka_job, new_topic, output_ids, produce_events

from gobblin_py.config import load_job
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import JobRunner
from gobblin_py.state.store import StateStore

pytestmark = pytest.mark.kafka


def test_each_run_takes_at_most_the_limit_and_the_next_runs_take_the_rest_once(tmp_path: Path, broker, topic: str) -> None:
    new_topic(broker.bootstrap, topic, 4, 0)
    data = {0: events(300), 1: events(100), 2: events(20), 3: []}
    produce_events(broker.bootstrap, topic, {p: evs for p, evs in data.items() if evs})
    ends = end_offsets(broker.bootstrap, topic)
    job = kafka_job(tmp_path, broker.bootstrap, [topic])
    job["job"]["checkpoint_max_records"] = 150
    spec = load_job(write_job(tmp_path, job))
    taken: list[int] = []
    for _ in range(10):
        result = JobRunner(spec, InProcessExecutor()).run()
        assert result.succeeded, result.error
        extracted = sum(t.records_extracted for t in result.tasks)
        if not extracted:
            break
        taken.append(extracted)
    total = sum(ends.values())
    assert taken[:-1] == [150] * (len(taken) - 1) and 0 < taken[-1] <= 150 and sum(taken) == total
    marks = {int(k): v for k, v in StateStore(tmp_path / "work", "k").watermarks()[topic].items()}
    assert marks == ends
    ids = output_ids(tmp_path / "output", topic)
    assert set(ids.values()) == {1} and len(ids) == sum(len(v) for v in data.values())


def test_the_first_run_shares_the_limit_by_backlog(tmp_path: Path, broker, topic: str) -> None:
    new_topic(broker.bootstrap, topic, 2, 0)
    produce_events(broker.bootstrap, topic, {0: events(300), 1: events(100)})
    job = kafka_job(tmp_path, broker.bootstrap, [topic])
    job["job"]["checkpoint_max_records"] = 100
    result = JobRunner(load_job(write_job(tmp_path, job)), InProcessExecutor()).run()
    assert result.succeeded, result.error
    by_partition = {t.workunit.watermark_key: t.records_extracted for t in result.tasks}
    assert by_partition == {"0": 75, "1": 25}
