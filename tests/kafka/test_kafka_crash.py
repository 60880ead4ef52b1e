"""Exactly-once for the Kafka job: SIGKILL at every commit point and at random times while records keep
arriving, and a broker that stops answering mid-run."""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from support.jobs import write_job
from support.kafka_broker import LocalBroker, create_topic, end_offsets
from support.kafka_jobs import events, kafka_job, new_topic, output_ids, produce_events

from gobblin_py.state.store import StateStore
from gobblin_py.testing.crash import SIGKILLED, cli, commit_points, each_point, kill_at_random

pytestmark = [pytest.mark.kafka, pytest.mark.crash]

RUN = ["run", "job.yaml", "--in-process"]


def _assert_exactly_once(tmp: Path, bootstrap: str, topic: str, expected: set[int]) -> None:
    ids = output_ids(tmp / "output", topic)
    assert set(ids) == expected
    assert set(ids.values()) == {1}, f"duplicates: {[i for i, n in ids.items() if n > 1][:10]}"
    committed = {int(k): v for k, v in StateStore(tmp / "work", "k").watermarks()[topic].items()}
    assert committed == end_offsets(bootstrap, topic)
    assert cli(["inspect-commits", "job.yaml"], tmp).returncode == 0


def test_kill_at_every_commit_point(tmp_path_factory, broker, topic: str) -> None:
    data = new_topic(broker.bootstrap, topic, 2, 60)  # 2 partitions × 3 days: 6 files + watermarks + state
    expected = {e["id"] for evs in data.values() for e in evs}
    points = commit_points(8) + ["recovery.before_commit"]
    dirs = [tmp_path_factory.mktemp("kp") for _ in points]

    def check(n: int, point: str) -> None:
        tmp = dirs[n]
        write_job(tmp, kafka_job(tmp, broker.bootstrap, [topic]))
        if point.startswith("recovery."):
            assert cli(RUN, tmp, crash_at="commit.after_step:3").returncode == SIGKILLED
        crashed = cli(RUN, tmp, crash_at=point)
        assert crashed.returncode == SIGKILLED, f"{point}: {crashed.stdout}{crashed.stderr}"
        again = cli(RUN, tmp)
        assert again.returncode == 0, f"{point}: {again.stdout}{again.stderr}"
        _assert_exactly_once(tmp, broker.bootstrap, topic, expected)

    each_point(points, check)


def test_random_kills_while_records_keep_arriving(tmp_path: Path, broker, topic: str) -> None:
    data = new_topic(broker.bootstrap, topic, 3, 100)
    produced = {e["id"] for evs in data.values() for e in evs}
    stop = threading.Event()
    lock = threading.Lock()

    def keep_producing() -> None:
        rng = random.Random(7)
        while not stop.is_set():
            batch = {p: events(rng.randrange(1, 30)) for p in range(3)}
            produce_events(broker.bootstrap, topic, batch)
            with lock:
                produced.update(e["id"] for evs in batch.values() for e in evs)
            time.sleep(0.05)

    producer = threading.Thread(target=keep_producing, daemon=True)
    producer.start()
    write_job(tmp_path, kafka_job(tmp_path, broker.bootstrap, [topic]))
    rng = random.Random(11)
    try:
        for _ in range(15):
            kill_at_random(RUN, tmp_path, rng.uniform(0.3, 2.0), window_s=0.02)
    finally:
        stop.set()
        producer.join()
    final = cli(RUN, tmp_path)
    assert final.returncode == 0, final.stdout + final.stderr
    _assert_exactly_once(tmp_path, broker.bootstrap, topic, produced)


def _start_run(tmp: Path) -> subprocess.Popen[str]:
    """The CLI in a child process; returns once its tasks have started reading."""
    job = yaml.safe_load((tmp / "job.yaml").read_text())
    job["logging"] = {"level": "INFO"}  # its planning line, which run prints only at INFO
    (tmp / "job.yaml").write_text(yaml.safe_dump(job, sort_keys=False))
    proc = subprocess.Popen([sys.executable, "-m", "gobblin_py.cli.main", *RUN], cwd=tmp,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        if "planned" in line:
            return proc
    raise AssertionError(f"the run ended before planning: {proc.wait()}")


@pytest.fixture
def own_broker():
    """A broker of this test's own: it is paused or killed."""
    with LocalBroker() as b:
        yield b


@pytest.mark.parametrize(("failure", "client"), [("pause", "kafka-python"), ("kill", "kafka-python"), ("pause", "confluent")])
def test_broker_stops_answering_mid_run(tmp_path: Path, own_broker: LocalBroker, failure: str, client: str) -> None:
    topic = "events"
    create_topic(own_broker.bootstrap, topic, 2)
    data = {p: events(40_000) for p in range(2)}
    produce_events(own_broker.bootstrap, topic, data)
    job = kafka_job(tmp_path, own_broker.bootstrap, [topic], idle_timeout_s=3, request_timeout_ms=3000, fetch_max_bytes=64 * 1024,
                    max_partition_fetch_bytes=32 * 1024, client=client)
    job["job"]["max_task_retries"] = 0
    write_job(tmp_path, job)
    proc = _start_run(tmp_path)
    if failure == "pause":
        own_broker.pause()
    else:
        own_broker.kill()
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        if failure == "pause":
            own_broker.resume()
    assert proc.returncode == 1, out + err
    assert own_broker.bootstrap in out + err and "Traceback" not in err
    assert not (tmp_path / "output").exists()
    assert StateStore(tmp_path / "work", "k").watermarks() == {}
    if failure == "pause":  # the data survives a pause: the next run takes all of it, once
        again = cli(RUN, tmp_path)
        assert again.returncode == 0, again.stdout + again.stderr
        _assert_exactly_once(tmp_path, own_broker.bootstrap, topic, {e["id"] for evs in data.values() for e in evs})
