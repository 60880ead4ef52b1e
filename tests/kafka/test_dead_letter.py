"""`quality.dead_letter: {topic: …}`: each bad record of a committed range reaches a Kafka topic once, with its
original key, value and headers and `gobblin.error.*` provenance headers — after SIGKILLs at every commit point too.

The dead-letter topic is read back with kafka-python's consumer (not the code that wrote it)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.jobs import write_job
from support.kafka_broker import create_topic, produce
from support.kafka_jobs import events, kafka_job, output_ids, read_topic

from gobblin_py.testing.crash import SIGKILLED, cli, commit_points, each_point
from gobblin_py.testing.outputs import read_error_files

pytestmark = pytest.mark.kafka

RUN = ["run", "job.yaml", "--in-process"]


def source_with_bad_records(bootstrap: str, topic: str) -> tuple[set[int], list[tuple[bytes | None, bytes | None, Any]]]:
    """A topic of good events and bad messages (not JSON, not an object, not the schema's types) on two partitions;
    the good ids and the bad messages as (key, value, headers)."""
    create_topic(bootstrap, topic, 2)
    good = {p: events(20, days=1) for p in range(2)}
    bad = [(b"k-0", b"{not json", [("trace", b"t-0")]),
           (b"k-1", b"[1, 2, 3]", [("trace", b"t-1"), ("trace", b"t-1b")]),
           (None, orjson.dumps({"id": "not-a-number", "ts": 1, "user": "x", "kind": "k", "amount": 1.0, "country": "DE"}),
            [])]
    per_partition: dict[int, list[Any]] = {0: [], 1: []}
    for p in range(2):
        per_partition[p] = [(None, orjson.dumps(e), []) for e in good[p]]
    per_partition[0][3:3] = [bad[0], bad[2]]
    per_partition[1][7:7] = [bad[1]]
    produce(bootstrap, topic, per_partition)
    return {e["id"] for evs in good.values() for e in evs}, bad


def dead_letter_job(tmp: Path, bootstrap: str, topic: str, dlq: str) -> dict[str, Any]:
    job = kafka_job(tmp, bootstrap, [topic])
    job["quality"] = {"dead_letter": {"topic": dlq}}
    return job


def assert_dead_letters_once(bootstrap: str, dlq: str, bad: list[Any], topic: str) -> None:
    records = read_topic(bootstrap, dlq)
    values = Counter(r.value for r in records)
    assert values == Counter(v for _, v, _ in bad), f"dead letters: {values}"
    for r in records:
        key, _value, headers = next(b for b in bad if b[1] == r.value)
        assert r.key == key
        got = list(r.headers)
        assert got[:len(headers)] == headers  # the original headers first, in order, repeats kept
        provenance = dict(got[len(headers):])
        assert provenance["gobblin.error.topic"] == topic.encode()
        assert int(provenance["gobblin.error.offset"]) >= 0
        assert provenance["gobblin.error.stage"] in (b"extractor", b"converters[0] (json_to_avro)")
        assert provenance["gobblin.error.reason"]
        assert provenance["gobblin.error.dataset"] == topic.encode()


def test_bad_records_reach_the_dead_letter_topic_once_with_their_original_message(tmp_path: Path, broker, topic: str) -> None:
    good, bad = source_with_bad_records(broker.bootstrap, topic)
    dlq = f"{topic}.dlq"
    create_topic(broker.bootstrap, dlq, 3)
    write_job(tmp_path, dead_letter_job(tmp_path, broker.bootstrap, topic, dlq))
    done = cli(RUN, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert set(output_ids(tmp_path / "output", topic)) == good
    errors = read_error_files(tmp_path / "output")
    assert len(errors) == 3  # the error files keep them too
    assert_dead_letters_once(broker.bootstrap, dlq, bad, topic)
    again = cli(RUN, tmp_path)  # nothing new: nothing more sent
    assert again.returncode == 0, again.stdout + again.stderr
    assert_dead_letters_once(broker.bootstrap, dlq, bad, topic)


def test_a_missing_dead_letter_topic_stops_the_run_before_anything_is_read(tmp_path: Path, broker, topic: str) -> None:
    source_with_bad_records(broker.bootstrap, topic)
    write_job(tmp_path, dead_letter_job(tmp_path, broker.bootstrap, topic, f"{topic}.missing-dlq"))
    done = cli(RUN, tmp_path)
    assert done.returncode != 0
    assert f"{topic}.missing-dlq" in done.stdout + done.stderr and "does not exist" in done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "output" / topic).exists()


def test_settings_refuse_bad_records_fail_and_a_secret_in_producer_config(tmp_path: Path) -> None:
    from gobblin_py.config import load_job
    from gobblin_py.errors import ConfigError

    job = dead_letter_job(tmp_path, "127.0.0.1:9", "t", "t.dlq")
    job["quality"]["bad_records"] = "FAIL"
    job["quality"]["dead_letter"]["producer_config"] = {"sasl_plain_password": "x"}
    path = write_job(tmp_path, job)
    with pytest.raises(ConfigError) as exc:
        load_job(path)
    assert "bad_records FAIL" in str(exc.value) and "sasl_plain_password" in str(exc.value)
    assert "'x'" not in str(exc.value)


@pytest.mark.crash
def test_kill_at_every_commit_point_leaves_each_bad_record_once(tmp_path_factory, broker, topic: str) -> None:
    good, bad = source_with_bad_records(broker.bootstrap, topic)
    # 2 data files (one day, 2 partitions), 2 error files, the watermarks, the dead letters, the state: every point
    # but those between the file steps, where the dead letters stand as before the first
    points = [p for p in commit_points(7) if p not in ("commit.after_step:1", "commit.after_step:2", "commit.after_step:3")]
    points += ["dead_letter.midway", "recovery.before_commit"]
    dirs = [tmp_path_factory.mktemp("dl") for _ in points]
    for n in range(len(points)):
        create_topic(broker.bootstrap, f"{topic}.dlq{n}", 2)

    def check(n: int, point: str) -> None:
        dlq = f"{topic}.dlq{n}"
        tmp = dirs[n]
        write_job(tmp, dead_letter_job(tmp, broker.bootstrap, topic, dlq))
        if point.startswith("recovery."):
            assert cli(RUN, tmp, crash_at="commit.after_step:5").returncode == SIGKILLED  # after the watermarks
        crashed = cli(RUN, tmp, crash_at=point)
        assert crashed.returncode == SIGKILLED, f"{point}: {crashed.stdout}{crashed.stderr}"
        again = cli(RUN, tmp)
        assert again.returncode == 0, f"{point}: {again.stdout}{again.stderr}"
        ids = output_ids(tmp / "output", topic)
        assert set(ids) == good and set(ids.values()) == {1}, point
        assert_dead_letters_once(broker.bootstrap, dlq, bad, topic)

    each_point(points, check)


@pytest.mark.crash
def test_a_dead_letter_topic_deleted_and_created_again_mid_commit_gets_each_bad_record_once(tmp_path: Path, broker,
                                                                                            topic: str) -> None:
    """Killed halfway through sending, the dead-letter topic then deleted and created again (empty, its offsets from 0
    again): the next run finds another topic id than its mark kept, reads the new topic from its start and sends
    every bad record of the commit, once (it used to stop on the offsets for good: 'deleted, re-created or
    truncated', nothing sent, run after run). Filler records ahead of the mark make the old topic's offsets
    meaningless in the new one."""
    from support.kafka_broker import delete_topic

    good, bad = source_with_bad_records(broker.bootstrap, topic)
    dlq = f"{topic}.dlq"
    create_topic(broker.bootstrap, dlq, 1)
    produce(broker.bootstrap, dlq, {0: [(None, b"filler", [])] * 4})
    produce(broker.bootstrap, dlq, {0: [(None, b"seal", [])]})
    write_job(tmp_path, dead_letter_job(tmp_path, broker.bootstrap, topic, dlq))
    crashed = cli(RUN, tmp_path, crash_at="dead_letter.midway")
    assert crashed.returncode == SIGKILLED, crashed.stdout + crashed.stderr
    delete_topic(broker.bootstrap, dlq)
    create_topic(broker.bootstrap, dlq, 1)
    again = cli(RUN, tmp_path)
    said = again.stdout + again.stderr
    assert again.returncode == 0, said
    assert "was deleted and created again" in said and "Traceback" not in said
    ids = output_ids(tmp_path / "output", topic)
    assert set(ids) == good and set(ids.values()) == {1}
    assert_dead_letters_once(broker.bootstrap, dlq, bad, topic)
    assert cli(RUN, tmp_path).returncode == 0
    assert_dead_letters_once(broker.bootstrap, dlq, bad, topic)


def on_host(host: Path, job: Path, crash: str | None = None) -> Any:
    """`gobblin-py run JOB --in-process` as a driver on a host of its own: its own cwd and temp directory."""
    from support.jobs import run_cli

    from gobblin_py.crashpoints import ENV as CRASH_ENV

    host.mkdir(parents=True, exist_ok=True)
    env = {"TMPDIR": str(host), **({CRASH_ENV: crash} if crash else {})}
    return run_cli("run", str(job), "--in-process", cwd=host, env=env)


@pytest.mark.crash
@pytest.mark.s3
def test_on_a_work_directory_on_a_store_a_commit_killed_mid_send_is_finished_by_another_host_once(
        tmp_path: Path, broker, topic: str, s3: Any) -> None:
    """The step's mark (the topic's end offsets kept before it sends) lives on the store with the job's other state,
    so a driver on another host that finishes the killed commit finds it and sends only what is missing."""
    pytest.importorskip("obstore")
    from support.world import avro_ids

    good, bad = source_with_bad_records(broker.bootstrap, topic)
    dlq = f"{topic}.dlq"
    create_topic(broker.bootstrap, dlq, 2)
    bucket = s3.new_bucket()
    job = dead_letter_job(tmp_path, broker.bootstrap, topic, dlq)
    job["job"].update(work_dir=f"s3://{bucket}/work", filesystems=s3.options)
    job["publisher"] = {"final_dir": f"s3://{bucket}/output"}
    path = write_job(tmp_path, job)

    crashed = on_host(tmp_path / "host-a", path, crash="dead_letter.midway")
    assert crashed.returncode == SIGKILLED, crashed.stdout + crashed.stderr
    assert not (tmp_path / "host-a" / "s3:").exists()  # nothing of the job's state kept on the host
    assert any("/dead_letter/" in k for k in s3.keys(f"{bucket}/work/state"))  # the mark, on the store

    finished = on_host(tmp_path / "host-b", path)
    assert finished.returncode == 0, finished.stdout + finished.stderr
    ids = avro_ids(s3.download(f"{bucket}/output/{topic}", tmp_path / "read"))
    assert set(ids) == good and set(ids.values()) == {1}
    assert_dead_letters_once(broker.bootstrap, dlq, bad, topic)
