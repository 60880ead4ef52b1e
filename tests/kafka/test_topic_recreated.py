"""A topic deleted and created again starts its offsets at 0: the committed offsets of the old topic must never be
read as positions in the new one. The topic's id is recorded with the watermarks and compared before each read."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.jobs import write_job
from support.kafka_broker import delete_topic, topic_id
from support.kafka_jobs import kafka_job, new_topic, output_ids

from gobblin_py.config import load_job
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import JobRunner
from gobblin_py.state.store import DatasetStateFile, StateStore, WatermarkFile

pytestmark = pytest.mark.kafka


def _run(tmp: Path, job: dict):
    return JobRunner(load_job(write_job(tmp, job)), InProcessExecutor()).run()


def _ids(data: dict[int, list[dict]]) -> set[int]:
    return {e["id"] for evs in data.values() for e in evs}


def _committed(tmp: Path, topic: str) -> dict[int, int]:
    return {int(k): v for k, v in StateStore(tmp / "work", "k").watermarks().get(topic, {}).items()}


def _recreate(bootstrap: str, topic: str, per_partition: int) -> tuple[dict[int, list[dict]], str | None]:
    """The topic deleted and created again with more records than the old one had: its data and its new id."""
    old = topic_id(bootstrap, topic)
    delete_topic(bootstrap, topic)
    data = new_topic(bootstrap, topic, 2, per_partition)
    new = topic_id(bootstrap, topic)
    assert new and new != old  # Tansu gives a re-created topic a new id, as Kafka does
    return data, new


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_a_recreated_topic_is_read_from_its_start_with_on_topic_recreated_earliest(tmp_path: Path, broker, topic: str,
                                                                                   client: str) -> None:
    first = new_topic(broker.bootstrap, topic, 2, 20)
    job = kafka_job(tmp_path, broker.bootstrap, [topic], client=client, on_topic_recreated="earliest")
    assert _run(tmp_path, job).succeeded
    assert _committed(tmp_path, topic) == {0: 20, 1: 20}
    second, new_id = _recreate(broker.bootstrap, topic, 50)  # past the old offsets: nothing looks out of range
    result = _run(tmp_path, job)
    assert result.succeeded, result.error
    ids = output_ids(tmp_path / "output", topic)
    assert set(ids) == _ids(first) | _ids(second) and set(ids.values()) == {1}  # offsets 0..19 of the new topic too
    assert _committed(tmp_path, topic) == {0: 50, 1: 50}
    (summary,) = result.datasets
    assert any("deleted and created again" in n and new_id in n for n in summary.notices), summary.notices
    assert StateStore(tmp_path / "work", "k").dataset_state(topic)["source"]["topic_ids"] == {"0": new_id, "1": new_id}


@pytest.mark.parametrize("policy", ["earliest", "fail"])
def test_a_recreated_topic_fails_the_run_by_default(tmp_path: Path, broker, topic: str, policy: str) -> None:
    """Before the fix this run read offsets 20..49 of the new topic and lost 0..19 of each partition, whatever
    reset_on_offset_out_of_range said."""
    new_topic(broker.bootstrap, topic, 2, 20)
    old_id = topic_id(broker.bootstrap, topic)
    job = kafka_job(tmp_path, broker.bootstrap, [topic], reset_on_offset_out_of_range=policy)
    assert _run(tmp_path, job).succeeded
    written = sorted(p.name for p in (tmp_path / "output").rglob("*.avro"))
    _, new_id = _recreate(broker.bootstrap, topic, 50)
    result = _run(tmp_path, job)
    assert not result.succeeded
    for part in (topic, old_id, new_id, "on_topic_recreated: earliest"):
        assert part in result.error, result.error
    assert _committed(tmp_path, topic) == {0: 20, 1: 20}  # nothing moved, nothing published
    assert sorted(p.name for p in (tmp_path / "output").rglob("*.avro")) == written
    # the user chooses: the next run reads the new topic whole
    again = _run(tmp_path, {**job, "source": {**job["source"], "on_topic_recreated": "earliest"}})
    assert again.succeeded, again.error
    assert _committed(tmp_path, topic) == {0: 50, 1: 50}


def test_a_state_without_a_topic_id_is_adopted_and_recorded(tmp_path: Path, broker, topic: str) -> None:
    data = new_topic(broker.bootstrap, topic, 2, 10)
    WatermarkFile(StateStore(tmp_path / "work", "k").dir, topic).write({"0": 4, "1": 10})  # written by an older version
    result = _run(tmp_path, kafka_job(tmp_path, broker.bootstrap, [topic]))
    assert result.succeeded, result.error
    assert len(output_ids(tmp_path / "output", topic)) == 6
    now = topic_id(broker.bootstrap, topic)
    # recorded with each partition's next commit: partition 1 had no new data (were the topic re-created now, a
    # partition 0 that differs marks every partition not known to be of the new topic)
    assert StateStore(tmp_path / "work", "k").dataset_state(topic)["source"]["topic_ids"] == {"0": now}
    assert data


def test_the_planner_sees_a_changed_id_in_state(tmp_path: Path, broker, topic: str) -> None:
    """The id recorded in state differs from the broker's (as after a re-creation the broker has forgotten)."""
    new_topic(broker.bootstrap, topic, 2, 10)
    job = kafka_job(tmp_path, broker.bootstrap, [topic])
    assert _run(tmp_path, job).succeeded
    state = DatasetStateFile(StateStore(tmp_path / "work", "k").dir, topic)
    body = state.read()
    body["source"]["topic_ids"]["1"] = "AAAAAAAAAAAAAAAAAAAAAA"
    state.write(body)
    result = _run(tmp_path, job)
    assert not result.succeeded and "AAAAAAAAAAAAAAAAAAAAAA" in result.error and f"topic '{topic}'" in result.error


def test_without_topic_ids_the_first_records_tell_a_recreated_topic(tmp_path: Path, broker, topic: str, monkeypatch) -> None:
    """A broker older than Kafka 2.8 has no topic ids: the timestamp of a record read before is compared instead."""
    from gobblin_py.builtin.sources.kafka import identity

    monkeypatch.setattr(identity, "NO_TOPIC_ID", _EverythingIsNoId())
    first = new_topic(broker.bootstrap, topic, 2, 20)
    job = kafka_job(tmp_path, broker.bootstrap, [topic])
    assert _run(tmp_path, job).succeeded
    kept = StateStore(tmp_path / "work", "k").dataset_state(topic)["source"]
    assert "topic_ids" not in kept and set(kept["first_records"]) == {"0", "1"}
    _recreate(broker.bootstrap, topic, 50)
    result = _run(tmp_path, job)
    assert not result.succeeded and f"topic '{topic}'" in result.error and "on_topic_recreated" in result.error
    again = _run(tmp_path, {**job, "source": {**job["source"], "on_topic_recreated": "earliest"}})
    assert again.succeeded, again.error
    ids = output_ids(tmp_path / "output", topic)
    assert set(ids.values()) == {1} and len(ids) == 40 + 100 and _ids(first) <= set(ids)


class _EverythingIsNoId:
    def __contains__(self, item: object) -> bool:
        return True


def test_offsets_deleted_by_retention_are_reported_as_lost(tmp_path: Path, broker, topic: str) -> None:
    """Tansu has no DeleteRecords: a committed offset below the log start is simulated by one past the end."""
    new_topic(broker.bootstrap, topic, 1, 10)
    WatermarkFile(StateStore(tmp_path / "work", "k").dir, topic).write({"0": 500})
    result = _run(tmp_path, kafka_job(tmp_path, broker.bootstrap, [topic], reset_on_offset_out_of_range="earliest"))
    assert result.succeeded, result.error
    (summary,) = result.datasets
    assert any(f"{topic}/0" in n and "500" in n for n in summary.notices), summary.notices



def test_offsets_below_the_log_start_are_named_as_lost() -> None:
    """Tansu has no DeleteRecords: the planner is given a log start past the committed offset."""
    from kafka import TopicPartition

    from gobblin_py.api import SourceState
    from gobblin_py.builtin.sources.kafka.enumerator import plan_partition
    from gobblin_py.builtin.sources.kafka.settings import KafkaSettings

    for policy, planned in (("earliest", (10, 20)), ("latest", (20, 20))):
        settings = KafkaSettings.model_validate({"bootstrap_servers": "b:9092", "topics": ["ev"],
                                                 "reset_on_offset_out_of_range": policy})
        state = SourceState({})
        assert plan_partition(settings, TopicPartition("ev", 3), 4, 10, 20, state) == planned
        (notice,) = state.notices["ev"]
        assert notice.startswith("ev/3: committed offset 4 is out of range [10, 20): offsets 4..9 (6 records) were deleted "
                                 "by retention"), notice
        assert "records lost" in notice and ("skipping offsets 10..19" in notice) == (policy == "latest")
    failing = KafkaSettings.model_validate({"bootstrap_servers": "b:9092", "topics": ["ev"],
                                            "reset_on_offset_out_of_range": "fail"})
    with pytest.raises(Exception, match="ev/3 on b:9092: committed offset 4 is outside the available range"):
        plan_partition(failing, TopicPartition("ev", 3), 4, 10, 20, SourceState({}))


@pytest.mark.parametrize("policy", ["fail", "earliest"])
def test_a_continuous_run_sees_the_topic_recreated_between_checkpoints(tmp_path: Path, broker, topic: str, policy: str) -> None:
    """Every checkpoint plans from the committed state: the check runs before each one, not only at the run's start."""
    import threading

    from gobblin_py.scheduling.continuous import run_continuous

    first = new_topic(broker.bootstrap, topic, 2, 20)
    job = kafka_job(tmp_path, broker.bootstrap, [topic], on_topic_recreated=policy)
    job["job"] |= {"checkpoint_interval": "100ms"}
    runner = JobRunner(load_job(write_job(tmp_path, job)), InProcessExecutor())
    stop, seen = threading.Event(), []
    second: dict = {}

    def after(result) -> None:
        seen.append(result.checkpoints[-1])
        if len(seen) == 1:
            second.update(_recreate(broker.bootstrap, topic, 50)[0])
        elif len(seen) == 2:
            stop.set()

    run_continuous(runner, stop, after)
    assert seen[0]["status"] == "succeeded"
    ids = output_ids(tmp_path / "output", topic)
    if policy == "fail":
        assert seen[1]["status"] == "failed" and "deleted and created again" in seen[1]["error"], seen[1]
        assert _committed(tmp_path, topic) == {0: 20, 1: 20} and set(ids) == _ids(first)
    else:
        assert seen[1]["status"] == "succeeded", seen[1]
        assert _committed(tmp_path, topic) == {0: 50, 1: 50}
        assert set(ids) == _ids(first) | _ids(second) and set(ids.values()) == {1}


def test_a_corrupt_dataset_state_file_blocks_its_dataset_not_the_topic_check(tmp_path: Path, broker, topic: str) -> None:
    """The topic ids live in the dataset state file: before the fix a torn file was read as "no ids recorded", the
    re-created topic was read from the old offsets and 2 × 20 of its records were lost while the run said committed."""
    new_topic(broker.bootstrap, topic, 2, 20)
    job = kafka_job(tmp_path, broker.bootstrap, [topic])
    assert _run(tmp_path, job).succeeded
    state = DatasetStateFile(StateStore(tmp_path / "work", "k").dir, topic)
    state.path.write_bytes(state.path.read_bytes()[:-9])  # torn by a bad disk or a hand edit
    second, _ = _recreate(broker.bootstrap, topic, 50)
    result = _run(tmp_path, job)
    assert not result.succeeded
    (summary,) = result.datasets
    assert summary.status == "blocked" and str(state.path) in summary.message, summary
    assert _committed(tmp_path, topic) == {0: 20, 1: 20}  # nothing moved
    assert not set(output_ids(tmp_path / "output", topic)) & {e["id"] for evs in second.values() for e in evs}


@pytest.mark.parametrize("to", [["--to", "0=10", "--to", "1=10"], []])
def test_state_reset_after_a_recreation_sets_positions_in_the_new_topic(tmp_path: Path, broker, topic: str, to: list) -> None:
    """The operator's repair: before the fix the reset kept the old topic's ids, so every later run still failed
    as "deleted and created again", whatever positions the reset gave."""
    from gobblin_py.testing.crash import cli

    new_topic(broker.bootstrap, topic, 2, 20)
    job = kafka_job(tmp_path, broker.bootstrap, [topic])
    assert _run(tmp_path, job).succeeded
    second, new_id = _recreate(broker.bootstrap, topic, 50)
    assert not _run(tmp_path, job).succeeded
    reset = cli(["state", "reset", "job.yaml", "--dataset", topic, *to, "--yes"], tmp_path)
    assert reset.returncode == 0, reset.stderr
    result = _run(tmp_path, job)
    assert result.succeeded, result.error
    assert "topic ids" in reset.stdout, reset.stdout  # says the recorded identities go with the positions
    start = 10 if to else 0
    wanted = {e["id"] for p, evs in second.items() for e in evs[start:]}
    new_ids = set(output_ids(tmp_path / "output", topic)) & {e["id"] for evs in second.values() for e in evs}
    assert new_ids == wanted
    assert StateStore(tmp_path / "work", "k").dataset_state(topic)["source"]["topic_ids"] == {"0": new_id, "1": new_id}
