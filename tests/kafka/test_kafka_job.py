"""The Kafka job against a real broker: offsets as watermarks, exactly once, clear errors."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from support.jobs import run_cli, write_job
from support.kafka_broker import end_offsets, free_port, produce
from support.kafka_jobs import events, kafka_job, new_topic, output_ids, produce_events

from gobblin_py.config import load_job
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import DatasetStatus, JobRunner
from gobblin_py.state.store import StateStore, WatermarkFile
from gobblin_py.testing.outputs import read_avro_dir, read_error_files

pytestmark = pytest.mark.kafka


def _run(tmp: Path, job: dict):
    spec = load_job(write_job(tmp, job))
    return JobRunner(spec, InProcessExecutor()).run()


def _ids(data: dict[int, list[dict]]) -> set[int]:
    return {e["id"] for evs in data.values() for e in evs}


def _committed(tmp: Path, topic: str) -> dict[int, int]:
    return {int(k): v for k, v in StateStore(tmp / "work", "k").watermarks().get(topic, {}).items()}


@pytest.mark.spark
def test_two_topics_end_to_end_through_the_cli(tmp_path: Path, broker, topic: str) -> None:
    events_t, clicks_t = f"{topic}-events", f"{topic}-clicks"
    data = {t: new_topic(broker.bootstrap, t, 4, 250) for t in (events_t, clicks_t)}
    write_job(tmp_path, kafka_job(tmp_path, broker.bootstrap, [events_t, clicks_t]))
    first = run_cli("run", "job.yaml", cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    for t in (events_t, clicks_t):
        ids = output_ids(tmp_path / "output", t)
        assert set(ids) == _ids(data[t]) and set(ids.values()) == {1}
        assert _committed(tmp_path, t) == end_offsets(broker.bootstrap, t) == {p: 250 for p in range(4)}
        for rec in read_avro_dir(tmp_path / "output" / t):
            assert rec["_file"].startswith(rec["ts"].strftime("%Y/%m/%d/"))
            assert rec["_file"].split("/")[-1].startswith(f"{t}.")  # topic.partition.low-high.avro
    more = {p: events(40 + p) for p in range(4)}
    produce_events(broker.bootstrap, events_t, more)
    second = run_cli("run", "job.yaml", cwd=tmp_path)
    assert second.returncode == 0, second.stdout + second.stderr
    ids = output_ids(tmp_path / "output", events_t)
    assert set(ids) == _ids(data[events_t]) | _ids(more) and set(ids.values()) == {1}
    assert _committed(tmp_path, events_t) == end_offsets(broker.bootstrap, events_t) == {p: 290 + p for p in range(4)}
    assert "no new data" in second.stdout  # the clicks topic
    names = sorted(p.name for p in (tmp_path / "output" / events_t).rglob("*.avro"))
    prefixes = {n.rsplit("-", 1)[0] for n in names}  # topic.partition.low-high-<128-bit hash>.avro
    assert f"{events_t}.0.250-290" in prefixes and f"{events_t}.3.0-250" in prefixes


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_bad_records_go_to_the_error_file_with_topic_partition_and_offset(tmp_path: Path, broker, topic: str, client: str) -> None:
    from support.kafka_broker import create_topic

    create_topic(broker.bootstrap, topic, 1)
    good = events(3)
    produce(broker.bootstrap, topic, {0: [orjson.dumps(good[0]), b"{not json", orjson.dumps({"id": "x", "ts": 1}),
                                          orjson.dumps(good[1]), b"[1, 2]", orjson.dumps(good[2])]})
    result = _run(tmp_path, kafka_job(tmp_path, broker.bootstrap, [topic], client=client))
    assert result.succeeded, result.error
    assert set(output_ids(tmp_path / "output", topic)) == {e["id"] for e in good}
    errors = read_error_files(tmp_path / "output")
    assert [e["location"] for e in errors] == [f"{topic}/0@1", f"{topic}/0@2", f"{topic}/0@4"]
    assert "cannot decode as json" in errors[0]["reason"] and "'id'" in errors[1]["reason"] and "JSON object" in errors[2]["reason"]
    assert _committed(tmp_path, topic) == {0: 6}


def test_partitions_are_packed_into_at_most_max_workunits_tasks(tmp_path: Path, broker, topic: str) -> None:
    data = new_topic(broker.bootstrap, topic, 8, 20)
    result = _run(tmp_path, kafka_job(tmp_path, broker.bootstrap, [topic], max_workunits=3, client="confluent"))
    assert result.succeeded
    assert len(result.tasks) == 8 and set(output_ids(tmp_path / "output", topic)) == _ids(data)
    from gobblin_py.api import MultiWorkUnit, SourceState
    from gobblin_py.builtin.sources.kafka.source import KafkaSource
    spec = load_job(write_job(tmp_path, kafka_job(tmp_path, broker.bootstrap, [topic], max_workunits=3, min_records_per_workunit=1)))
    produce_events(broker.bootstrap, topic, {p: events(5 if p else 200) for p in range(8)})
    state = SourceState(StateStore(tmp_path / "work", "k").watermarks(), {topic: {str(p): {"records": 20, "bytes": 2000} for p in range(8)}})
    plan = KafkaSource(spec.source.settings).get_workunits(state)
    assert len(plan) == 3
    # a small run is one Spark task (the default: 50,000 records a task), or as many as its records fill
    small = KafkaSource(KafkaSource.Settings.model_validate({**spec.source.settings.model_dump(), "min_records_per_workunit": 50_000}))
    assert [len(u.workunits) for u in small.get_workunits(state)] == [8]
    two = KafkaSource(KafkaSource.Settings.model_validate({**spec.source.settings.model_dump(), "min_records_per_workunit": 200}))
    assert len(two.get_workunits(state)) == 2  # 235 records: two tasks of at least 200 where they can
    sizes = sorted(sum(int(w.expected_high_watermark) - int(w.low_watermark) for w in (u.workunits if isinstance(u, MultiWorkUnit) else (u,))) for u in plan)
    assert sizes[-1] == 200  # the big partition alone in one task
    assert sum(sizes) == 200 + 7 * 5


def test_bootstrap_latest_skips_history_and_a_never_seen_partition_starts_per_the_setting(tmp_path: Path, broker, topic: str) -> None:
    new_topic(broker.bootstrap, topic, 4, 30)
    # an earlier run knew partitions 0 and 1 only
    WatermarkFile(StateStore(tmp_path / "work", "k").dir, topic).write({"0": 10, "1": 30})
    result = _run(tmp_path, kafka_job(tmp_path, broker.bootstrap, [topic], bootstrap_with_offset="latest"))
    assert result.succeeded, result.error
    assert _committed(tmp_path, topic) == {0: 30, 1: 30, 2: 30, 3: 30}
    assert len(output_ids(tmp_path / "output", topic)) == 20  # offsets 10..29 of partition 0 only
    later = {2: events(5), 3: events(1)}
    produce_events(broker.bootstrap, topic, later)
    again = _run(tmp_path, kafka_job(tmp_path, broker.bootstrap, [topic], bootstrap_with_offset="latest"))
    assert again.succeeded and set(output_ids(tmp_path / "output", topic)) >= _ids(later)
    assert _committed(tmp_path, topic) == {0: 30, 1: 30, 2: 35, 3: 31}


def test_unknown_topic_unreachable_broker_and_deleted_partition_move_no_watermark(tmp_path: Path, broker, topic: str) -> None:
    new_topic(broker.bootstrap, topic, 2, 5)
    missing = _run(tmp_path, kafka_job(tmp_path, broker.bootstrap, [topic, f"{topic}-nope"]))
    assert not missing.succeeded and f"'{topic}-nope'" in missing.error and broker.bootstrap in missing.error
    dead = f"127.0.0.1:{free_port()}"
    unreachable = _run(tmp_path, kafka_job(tmp_path, dead, [topic]))
    assert not unreachable.succeeded and f"cannot reach Kafka broker(s) {dead}" in unreachable.error
    WatermarkFile(StateStore(tmp_path / "work", "k").dir, topic).write({"0": 1, "1": 1, "7": 3})
    deleted = _run(tmp_path, kafka_job(tmp_path, broker.bootstrap, [topic]))
    assert not deleted.succeeded and f"topic '{topic}'" in deleted.error and "partition(s) 7" in deleted.error
    assert _committed(tmp_path, topic) == {0: 1, 1: 1, 7: 3}
    assert not (tmp_path / "output").exists()


@pytest.mark.parametrize("policy", ["earliest", "latest", "fail"])
def test_committed_offset_out_of_range(tmp_path: Path, broker, topic: str, policy: str, caplog) -> None:
    new_topic(broker.bootstrap, topic, 1, 10)
    WatermarkFile(StateStore(tmp_path / "work", "k").dir, topic).write({"0": 500})  # past the end: topic recreated
    result = _run(tmp_path, kafka_job(tmp_path, broker.bootstrap, [topic], reset_on_offset_out_of_range=policy))
    if policy == "fail":
        assert not result.succeeded and "committed offset 500 is outside the available range [0, 10)" in result.error
        assert _committed(tmp_path, topic) == {0: 500}
    else:
        assert result.succeeded
        assert "out of range" in caplog.text and f"{topic}/0" in caplog.text
        assert _committed(tmp_path, topic) == {0: 10}
        assert len(output_ids(tmp_path / "output", topic)) == (10 if policy == "earliest" else 0)


def test_second_run_with_no_new_data_starts_no_task(tmp_path: Path, broker, topic: str) -> None:
    new_topic(broker.bootstrap, topic, 2, 5)
    assert _run(tmp_path, kafka_job(tmp_path, broker.bootstrap, [topic])).succeeded
    again = _run(tmp_path, kafka_job(tmp_path, broker.bootstrap, [topic]))
    assert again.succeeded and again.tasks == []
    assert [d.status for d in again.datasets] == [DatasetStatus.NO_NEW_DATA]


def test_a_topic_no_longer_selected_is_named_not_in_the_source(tmp_path: Path, broker, topic: str) -> None:
    """A committed topic the job no longer selects (deleted, or left out of `topics`) is named in the summary, not
    reported as "no new data"."""
    kept, dropped = f"{topic}-kept", f"{topic}-dropped"
    for t in (kept, dropped):
        new_topic(broker.bootstrap, t, 1, 5)
    job = kafka_job(tmp_path, broker.bootstrap, [kept, dropped])
    assert _run(tmp_path, job).succeeded
    result = _run(tmp_path, kafka_job(tmp_path, broker.bootstrap, [kept]))
    assert result.succeeded, result.error
    status = {d.dataset: d.status for d in result.datasets}
    assert status == {kept: DatasetStatus.NO_NEW_DATA, dropped: DatasetStatus.NOT_IN_SOURCE}, status
