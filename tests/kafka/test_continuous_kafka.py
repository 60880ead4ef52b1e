"""Continuous runs with the Kafka source on real local Spark (the real CLI in a child process, local[2]): a run
killed with SIGKILL again and again while a producer keeps writing, and a broker that stops answering under a
run. Each ends with every produced record in the output exactly once and the watermarks at the end offsets."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.jobs import write_job
from support.kafka_broker import LocalBroker, create_topic, end_offsets
from support.kafka_jobs import events, kafka_job, output_ids, produce_events

from gobblin_py.crashpoints import ENV, WINDOW_ENV
from gobblin_py.state.store import StateStore
from gobblin_py.testing.crash import SIGKILLED, cli

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.crash]

CONTINUOUS = ["run", "job.yaml", "--continuous"]
PARTITIONS = 4


def _job(tmp: Path, bootstrap: str, topic: str, spark: dict[str, Any] | None = None, **settings: Any) -> None:
    job = kafka_job(tmp, bootstrap, [topic], request_timeout_ms=2000, idle_timeout_s=3)
    job["job"] |= {"checkpoint_interval": "500ms", **settings}
    job.setdefault("spark", {}).update(spark or {})
    write_job(tmp, job)


def _start(tmp: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """The CLI in a child process of its own process group (its Spark JVM and Python workers join it), logs to files."""
    child_env = {k: v for k, v in os.environ.items() if k not in (ENV, WINDOW_ENV)} | (env or {})
    n = len(list(tmp.glob("run-*.err")))
    with open(tmp / f"run-{n}.out", "wb") as out, open(tmp / f"run-{n}.err", "wb") as err:
        return subprocess.Popen([sys.executable, "-m", "gobblin_py.cli.main", *CONTINUOUS], cwd=tmp, env=child_env,
                                stdout=out, stderr=err, start_new_session=True)


def _reap(proc: subprocess.Popen[bytes], timeout: float = 120.0) -> int:
    """Wait for the CLI to end (SIGKILL after `timeout`), then SIGKILL what is left of its group (a JVM whose driver
    died exits by itself, but not at once); its return code."""
    try:
        rc = proc.wait(timeout) if timeout else proc.poll()
        if rc is None:
            raise subprocess.TimeoutExpired(proc.args, timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return rc


def _log(tmp: Path) -> str:
    """The newest run's stdout and stderr."""
    n = len(list(tmp.glob("run-*.err"))) - 1
    return (tmp / f"run-{n}.out").read_text(errors="replace") + (tmp / f"run-{n}.err").read_text(errors="replace")


def _committed(tmp: Path, topic: str) -> dict[int, int]:
    try:
        return {int(p): v for p, v in StateStore(tmp / "work", "k").watermarks().get(topic, {}).items()}
    except Exception:  # noqa: BLE001 - read while the run writes: try again
        return {}


def _events(tmp: Path) -> list[dict[str, Any]]:
    """The job's events; a last line torn by a kill is left out."""
    path = tmp / "work" / "events" / "k.jsonl"
    out = []
    for line in path.read_bytes().splitlines() if path.exists() else []:
        try:
            out.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            pass
    return out


def _wait_for(predicate, proc: subprocess.Popen[bytes], tmp: Path, timeout: float = 120.0) -> None:  # noqa: ANN001
    """Until `predicate()`; fails with the run's log if the run ends first or it takes more than `timeout`."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, f"the run ended ({proc.returncode}):\n{_log(tmp)[-3000:]}"
        assert time.monotonic() < deadline, f"timed out:\n{_log(tmp)[-3000:]}"
        time.sleep(0.1)


def _stop(proc: subprocess.Popen[bytes], tmp: Path) -> str:
    """SIGTERM the run (its driver only, as a service manager would); it must end with exit 0. Its log."""
    proc.send_signal(signal.SIGTERM)
    rc = _reap(proc)
    log = _log(tmp)
    assert rc == 0, log[-5000:]
    assert "SIGTERM: stopping after the checkpoint in flight commits" in log
    return log


def _assert_exactly_once(tmp: Path, bootstrap: str, topic: str, produced: set[int]) -> None:
    ids = output_ids(tmp / "output", topic)
    assert set(ids.values()) == {1}, f"duplicates: {sorted(i for i, n in ids.items() if n > 1)[:10]}"
    assert set(ids) == produced, f"missing {sorted(produced - set(ids))[:10]}, unexpected {sorted(set(ids) - produced)[:10]}"
    assert _committed(tmp, topic) == end_offsets(bootstrap, topic)
    pending = cli(["inspect-commits", "job.yaml"], tmp)
    assert pending.returncode == 0, pending.stdout + pending.stderr


class Producer:
    """Keeps writing small multi-record batches to every partition from a thread, never sealing them (so the broker's
    end offsets lag inside the last batch, as they do under a live producer); `produced` holds every acknowledged id."""

    def __init__(self, bootstrap: str, topic: str, seed: int) -> None:
        from kafka import KafkaProducer

        self.topic, self.rng = topic, random.Random(seed)
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks="all", client_id="continuous-test-producer")
        self.produced: set[int] = set()
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Producer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> set[int]:
        self._stop.set()
        self._thread.join()
        self.producer.close(timeout=5)
        assert self.error is None, f"the producer failed: {self.error!r}"
        return self.produced

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                batch = {p: events(self.rng.randrange(2, 25)) for p in range(PARTITIONS)}
                sent = [self.producer.send(self.topic, orjson.dumps(e), partition=p) for p, evs in batch.items() for e in evs]
                self.producer.flush(timeout=30)
                for future in sent:
                    future.get(timeout=30)
                self.produced.update(e["id"] for evs in batch.values() for e in evs)
                self._stop.wait(0.1)
        except BaseException as exc:  # noqa: BLE001 - reported by stop()
            self.error = exc


def _seal(bootstrap: str, topic: str) -> set[int]:
    """One single-record batch per partition, so that the end offsets are exact; the sealing records' ids."""
    last = {p: events(1) for p in range(PARTITIONS)}
    produce_events(bootstrap, topic, last)
    return {e["id"] for evs in last.values() for e in evs}


# Crash points a checkpoint with data reaches (N-th time in the process: a later checkpoint than the first).
COMMIT_POINTS = ["commit.store_write_midway:2", "commit.after_store_write:2", "commit.after_step:5",
                 "commit.before_record_removal:3", "commit.after_record_removal:2", "commit.after_step:9"]


def test_continuous_run_killed_again_and_again_while_records_arrive_publishes_each_once(tmp_path: Path, broker, topic: str) -> None:
    create_topic(broker.bootstrap, topic, PARTITIONS)
    _job(tmp_path, broker.bootstrap, topic)
    rng = random.Random(20261123)
    kills = {"at_point": 0, "after_a_checkpoint": 0, "at_random": 0}
    with Producer(broker.bootstrap, topic, seed=5) as producer:
        for i in range(12):
            kind = ("at_point", "after_a_checkpoint", "at_random")[i % 3]
            if kind == "at_point":  # it kills itself inside a commit of a checkpoint with data
                proc = _start(tmp_path, {ENV: COMMIT_POINTS[(i // 3) % len(COMMIT_POINTS)]})
                rc = _reap(proc)
            elif kind == "after_a_checkpoint":  # commits widened, so a kill lands inside one now and then
                proc = _start(tmp_path, {WINDOW_ENV: "0.05"})
                try:
                    before = _committed(tmp_path, topic)
                    _wait_for(lambda before=before: _committed(tmp_path, topic) != before, proc, tmp_path)
                    time.sleep(rng.uniform(0.0, 2.5))
                    proc.send_signal(signal.SIGKILL)
                finally:
                    rc = _reap(proc)
            else:  # anywhere: Spark starting, recovery, planning, tasks, a commit
                proc = _start(tmp_path)
                try:
                    time.sleep(rng.uniform(1.0, 12.0))
                    proc.send_signal(signal.SIGKILL)
                finally:
                    rc = _reap(proc)
            assert rc == SIGKILLED, f"restart {i} ({kind}) ended with {rc}:\n{_log(tmp_path)[-3000:]}"
            kills[kind] += 1
        produced = producer.stop()
    produced |= _seal(broker.bootstrap, topic)
    ends = end_offsets(broker.bootstrap, topic)
    assert sum(ends.values()) == len(produced)

    proc = _start(tmp_path)
    try:
        _wait_for(lambda: _committed(tmp_path, topic) == ends, proc, tmp_path)
    except BaseException:
        _reap(proc, timeout=0)
        raise
    _stop(proc, tmp_path)
    assert kills == {"at_point": 4, "after_a_checkpoint": 4, "at_random": 4}
    _assert_exactly_once(tmp_path, broker.bootstrap, topic, produced)
    # the kills at commit.after_store_write, after_step and before_record_removal left a commit pending, each
    # recovered by the next run
    logs = "".join(p.read_text(errors="replace") for p in tmp_path.glob("run-*.err"))
    assert logs.count("recovered the pending commit of dataset") >= 3
    runs = StateStore(tmp_path / "work", "k").runs()
    assert all(r["mode"] == "continuous" for r in runs) and runs[-1]["status"] == "succeeded"


@pytest.fixture
def own_broker():
    """A broker of this test's own: it is paused."""
    with LocalBroker() as b:
        yield b


def test_checkpoints_fail_and_back_off_while_the_broker_is_paused_and_the_run_goes_on_when_it_is_back(tmp_path: Path, own_broker: LocalBroker) -> None:
    topic, bootstrap = "events", own_broker.bootstrap
    create_topic(bootstrap, topic, PARTITIONS)
    first = {p: events(300) for p in range(PARTITIONS)}
    produce_events(bootstrap, topic, first)
    produced = {e["id"] for evs in first.values() for e in evs}
    _job(tmp_path, bootstrap, topic, max_task_retries=0, continuous={"max_consecutive_failures": 50, "max_backoff": "2s"})
    proc = _start(tmp_path)
    try:
        _wait_for(lambda: _committed(tmp_path, topic) == end_offsets(bootstrap, topic), proc, tmp_path)
        burst = {p: events(2000) for p in range(PARTITIONS)}  # the next checkpoint has work when the broker stops
        produce_events(bootstrap, topic, burst)
        produced |= {e["id"] for evs in burst.values() for e in evs}
        own_broker.pause()
        try:
            _wait_for(lambda: sum(e["name"] == "CheckpointFailed" for e in _events(tmp_path)) >= 4, proc, tmp_path)
        finally:
            own_broker.resume()
        failed = sum(e["name"] == "CheckpointFailed" for e in _events(tmp_path))
        after = {p: events(500) for p in range(PARTITIONS)}
        ends = produce_events(bootstrap, topic, after)
        produced |= {e["id"] for evs in after.values() for e in evs}
        _wait_for(lambda: _committed(tmp_path, topic) == ends, proc, tmp_path)
    except BaseException:
        _reap(proc, timeout=0)
        raise
    log = _stop(proc, tmp_path)
    _assert_exactly_once(tmp_path, bootstrap, topic, produced)

    names = [e["name"] for e in _events(tmp_path)]
    assert names.count("CheckpointFailed") >= failed >= 4
    assert "CheckpointCommitted" in names[names.index("CheckpointFailed"):], "a checkpoint committed after the failures"
    [run] = StateStore(tmp_path / "work", "k").runs()
    statuses = [r["status"] for r in run["checkpoints"]]
    assert statuses.count("failed") == names.count("CheckpointFailed") and statuses[-1] == "succeeded"
    assert all(own_broker.bootstrap in r["error"] for r in run["checkpoints"] if r["status"] == "failed"), run["checkpoints"]
    # a checkpoint in flight when the broker stops may have tasks that wrote before it failed: nothing of it is
    # published (checked above), but its row counts what its tasks wrote; the succeeded checkpoints wrote each record once
    assert sum(r["records_written"] for r in run["checkpoints"] if r["status"] == "succeeded") == len(produced)
    # the waits after failures in a row double from the interval (0.5 s) up to job.continuous.max_backoff (2 s)
    waits = [(int(n), float(s)) for n, s in re.findall(r"failed \((\d+) in a row\); the next in ([\d.]+)s", log)]
    assert waits[:4] == [(1, 1.0), (2, 2.0), (3, 2.0), (4, 2.0)], waits


def test_the_phases_of_a_checkpoint_on_a_warm_session_are_its_own(tmp_path: Path, broker, topic: str) -> None:
    create_topic(broker.bootstrap, topic, PARTITIONS)
    _job(tmp_path, broker.bootstrap, topic, spark={"in_driver_below": 0})  # on Spark, however small the checkpoints
    proc = _start(tmp_path)
    try:
        for _ in range(2):  # two checkpoints with data: Spark starts in the first
            ends = produce_events(broker.bootstrap, topic, {p: events(50) for p in range(PARTITIONS)})
            _wait_for(lambda ends=ends: _committed(tmp_path, topic) == ends, proc, tmp_path)
    except BaseException:
        _reap(proc, timeout=0)
        raise
    _stop(proc, tmp_path)
    [run] = StateStore(tmp_path / "work", "k").runs()
    rows = [r for r in run["checkpoints"] if r["records_written"]]
    # two rounds of records; a checkpoint may catch a round while its partitions are still being produced to
    assert len(rows) >= 2 and rows[0]["phases"]["executor_start"] > 0
    assert all(v >= 0 for r in run["checkpoints"] for v in r["phases"].values()), [r["phases"] for r in run["checkpoints"]]
    assert not any(r["phases"].get("executor_start") for r in run["checkpoints"][1:]), "Spark started once"
    assert run["phases"]["executor_start"] == rows[0]["phases"]["executor_start"]
