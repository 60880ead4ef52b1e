"""`gobblin-py schedule` on its one warm Spark session: runs after the first do not start Spark, a run that raises
fails alone, SIGTERM cancels a run in flight that the next run recovers; `--isolated` still runs children."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.jobs import REPO, example_job, run_cli, write_job
from support.kafka_jobs import events, kafka_job, new_topic, output_ids, produce_events

from gobblin_py.state.store import StateStore


class Schedule:
    """`gobblin-py schedule` in a child process; its stderr collected as it goes; SIGTERM and reaped on exit."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "gobblin_py.cli.main", "schedule", *args], cwd=REPO,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.out: list[str] = []
        self.code: int | None = None  # the exit code, once stopped
        self._readers = [threading.Thread(target=self.lines.extend, args=(self.proc.stderr,), daemon=True),
                         threading.Thread(target=self.out.extend, args=(self.proc.stdout,), daemon=True)]
        for r in self._readers:
            r.start()

    @property
    def log(self) -> str:
        return "".join(self.lines)

    def wait_for(self, what: str, check: Callable[[], Any], timeout: float = 240) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            found = check()
            if found:
                return found
            time.sleep(0.2)
        raise AssertionError(f"no {what} (scheduler exit {self.proc.poll()}):\n{self.log}")

    def __enter__(self) -> Schedule:
        return self

    def __exit__(self, *exc: object) -> None:
        self.code = self.stop()

    def stop(self, timeout: float = 180) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"the scheduler did not stop within {timeout} s of SIGTERM:\n{self.log}") from None
        for r in self._readers:
            r.join()
        return code


def _written(run: dict[str, Any]) -> int:
    return sum(t["records_written"] for t in run["tasks"])


def _two_batches(tmp_path: Path, broker: Any, topic: str, schedule: str,
                 between: Callable[[Schedule], None] = lambda sched: None, in_flight_may_fail: bool = False) -> tuple[Schedule, StateStore]:
    """A scheduled Kafka job: waits for a run that reads a first batch, calls `between`, produces a second batch and
    waits for a run that reads it; stops the scheduler (exit 0) and checks that every event is published once."""
    data = new_topic(broker.bootstrap, topic, 4, 40)
    job = kafka_job(tmp_path, broker.bootstrap, [topic])
    job["job"].update(schedule=schedule, retention_runs=1000)
    job.setdefault("spark", {})["in_driver_below"] = 0  # the warm session is what these tests are about
    store = StateStore(tmp_path / "work", "k")
    with Schedule(str(write_job(tmp_path, job))) as sched:
        sched.wait_for("first run with data", lambda: any(_written(r) for r in store.runs()))
        between(sched)
        more = {p: events(20) for p in range(4)}
        produce_events(broker.bootstrap, topic, more)
        total = sum(len(v) for v in [*data.values(), *more.values()])
        sched.wait_for("the second batch committed", lambda: sum(_written(r) for r in store.runs()) >= total)
    assert sched.code == 0, sched.log
    runs = [(r["run_id"], r["status"], r["error"]) for r in store.runs()]
    failed = [r for r in runs if r[1] != "succeeded"]
    # `between` may kill what a run in flight is using (a firing every second): that one run fails, and no other
    assert len(failed) <= (1 if in_flight_may_fail else 0) and runs[-1][1] == "succeeded", runs
    assert all(error for _, _, error in failed), runs  # a failed run's record says why
    ids = output_ids(tmp_path / "output", topic)
    assert set(ids) == {e["id"] for evs in [*data.values(), *more.values()] for e in evs} and set(ids.values()) == {1}
    return sched, store


@pytest.mark.spark
@pytest.mark.kafka
def test_a_second_firing_runs_on_the_warm_session_without_starting_spark(tmp_path: Path, broker: Any, topic: str) -> None:
    sched, store = _two_batches(tmp_path, broker, topic, "*/2 * * * * ?")
    with_tasks = [r for r in store.runs() if r["tasks"]]
    assert len(with_tasks) >= 2, with_tasks
    assert with_tasks[0]["phases"]["executor_start"] > 0  # the first run with tasks started the session
    for later in with_tasks[1:]:
        assert "executor_start" not in later["phases"], later["phases"]  # the others found it warm
    assert sched.log.count("started the shared Spark session") == 1
    assert re.search(r"\[k\] job k run \S+ started", sched.log)  # a run's lines carry its job's name
    assert any(f"SUCCEEDED job k run {with_tasks[1]['run_id']}" in line for line in sched.out)  # each run's summary


CRASH_SOURCE = textwrap.dedent('''
    import sys
    from gobblin_py.api import Source

    class CrashSource(Source):
        """Plans by exiting, as a script would: a bug that no `except Exception` catches."""

        def get_workunits(self, state):
            sys.exit("a plugin that exits in planning")

        def get_extractor(self, workunit, context):
            raise AssertionError("never planned")
''')


@pytest.mark.spark
def test_a_run_that_raises_fails_alone_and_the_other_job_keeps_firing(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "crash_source.py").write_text(CRASH_SOURCE)
    crash = write_job(jobs, {"job": {"name": "crash", "work_dir": str(tmp_path / "work"), "schedule": "* * * * * ?"},
                             "source": {"class": "crash_source:CrashSource"}, "writer": {"class": "jsonl"},
                             "publisher": {"final_dir": str(tmp_path / "crash-out")}, "spark": {"master": "local[2]"}}, "crash.yaml")
    write_job(jobs, example_job(tmp_path, job={"name": "good", "work_dir": str(tmp_path / "work"), "schedule": "* * * * * ?",
                                               "retention_runs": 1000}), "good.yaml")
    good, crashed = StateStore(tmp_path / "work", "good"), StateStore(tmp_path / "work", "crash")
    with Schedule(str(jobs)) as sched:
        sched.wait_for("a crash and a good run", lambda: "crash run 1 failed with an internal error SystemExit: a plugin that exits in planning"
                       in sched.log and good.runs())
        crash.write_text("source: [a job file broken between two firings\n")
        broken_at = len(sched.lines)
        sched.wait_for("a firing of the broken file", lambda: any(re.search(r"crash run \d+: .*crash\.yaml", line)
                                                                 for line in sched.lines[broken_at:]))
        seen = len(good.runs())
        sched.wait_for("a good run after that", lambda: len(good.runs()) > seen)
    assert sched.code == 0, sched.log
    assert all(r["status"] == "succeeded" for r in good.runs())
    assert [_written(r) for r in good.runs()][0] > 0
    assert crashed.runs() and all(r["status"] == "failed" for r in crashed.runs())
    assert re.search(r"crash run \d+ finished with exit code 4", sched.log)  # a bug: as `gobblin-py run` exits
    assert re.search(r"crash run \d+ finished with exit code 2", sched.log)  # a bad job file


SLOW_CONVERTER = textwrap.dedent('''
    import time
    from pathlib import Path
    from gobblin_py.api import Converter, Settings

    class Slow(Converter):
        """Passes records on, each after `delay_s`; touches `marker` when the first arrives."""

        class Settings(Settings):
            delay_s: float
            marker: str

        def convert_schema(self, schema):
            return schema

        def convert_record(self, record):
            Path(self.settings.marker).touch()
            time.sleep(self.settings.delay_s)
            return (record,)
''')


@pytest.mark.spark
@pytest.mark.kafka
def test_sigterm_cancels_a_run_in_flight_and_the_next_run_commits_everything_once(tmp_path: Path, broker: Any, topic: str) -> None:
    data = new_topic(broker.bootstrap, topic, 4, 100)
    (tmp_path / "slow_converter.py").write_text(SLOW_CONVERTER)
    marker = tmp_path / "converting"
    job = kafka_job(tmp_path, broker.bootstrap, [topic])
    job["job"]["schedule"] = "* * * * * ?"
    job.setdefault("spark", {})["in_driver_below"] = 0  # a Spark job in flight, cancelled by its group
    job["converters"].insert(0, {"class": "slow_converter:Slow", "delay_s": 0.1, "marker": str(marker)})
    path = write_job(tmp_path, job)
    with Schedule(str(path), "--grace", "1") as sched:
        sched.wait_for("a task converting records", marker.exists)
    assert sched.code == 0, sched.log
    assert "k did not finish in time: cancelled" in sched.log
    runs = StateStore(tmp_path / "work", "k").runs()
    assert [r["status"] for r in runs] == ["cancelled"], runs

    job["converters"][0]["delay_s"] = 0
    write_job(tmp_path, job)
    again = run_cli("run", str(path))
    assert again.returncode == 0, again.stderr
    ids = output_ids(tmp_path / "output", topic)
    assert set(ids) == {e["id"] for evs in data.values() for e in evs} and set(ids.values()) == {1}


def test_isolated_runs_each_firing_as_a_child_process(tmp_path: Path) -> None:
    path = write_job(tmp_path, example_job(tmp_path, job={"name": "t", "work_dir": str(tmp_path / "work"), "schedule": "* * * * * ?"}))
    store = StateStore(tmp_path / "work", "t")
    with Schedule(str(path), "--isolated", "--in-process") as sched:
        sched.wait_for("a run", store.runs)
    assert sched.code == 0, sched.log
    pids = {int(p) for p in re.findall(r"started t run \d+ \(pid (\d+)\)", sched.log)}
    assert pids and sched.proc.pid not in pids
    assert "job t run" not in sched.log  # the child ran --quiet: its INFO lines are not the scheduler's


def test_a_job_whose_spark_section_differs_from_the_sessions_runs_as_a_child(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from gobblin_py.scheduling.scheduler import Scheduler

    for name, spark in (("a", {"master": "local[2]"}), ("b", {"master": "local[2]"}),
                        ("c", {"master": "local[2]", "conf": {"spark.sql.shuffle.partitions": 3}}), ("d", {"master": "local[1]"})):
        write_job(tmp_path, example_job(tmp_path, job={"name": name, "work_dir": str(tmp_path / "work"), "schedule": "0 0 * * * ?"},
                                        spark=spark), f"{name}.yaml")
    with caplog.at_level("INFO", logger="gobblin_py.scheduling.scheduler"):
        scheduler = Scheduler([tmp_path])
    assert {j.name: j.as_child for j in scheduler.jobs} == {"a": False, "b": False, "c": True, "d": True}
    assert ("c: its spark: section differs from the shared session's (that of " f"{tmp_path / 'a.yaml'}) in "
            "spark.sql.shuffle.partitions=3 (the session's: 4): its runs are `gobblin-py run` children") in caplog.text
    assert "d: its spark: section differs from the shared session's (that of " f"{tmp_path / 'a.yaml'}) in master local[1] (the session's: local[2]):" in caplog.text
    caplog.clear()
    with caplog.at_level("INFO", logger="gobblin_py.scheduling.scheduler"):
        Scheduler([tmp_path], isolated=True)  # every run is a child anyway: nothing to warn of
    assert "differs" not in caplog.text


def _descendants(pid: int) -> list[int]:
    """Every process under `pid` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _spark_jvms(pid: int) -> list[int]:
    found = []
    for child in _descendants(pid):
        try:
            if b"org.apache.spark.deploy.SparkSubmit" in Path(f"/proc/{child}/cmdline").read_bytes():
                found.append(child)
        except OSError:
            continue
    return found


@pytest.mark.spark
@pytest.mark.kafka
def test_a_session_whose_jvm_died_is_started_afresh_for_the_next_run(tmp_path: Path, broker: Any, topic: str) -> None:
    killed: list[int] = []

    def kill_the_jvm(sched: Schedule) -> None:
        killed.extend(_spark_jvms(sched.proc.pid))
        assert killed, sched.log
        for jvm in killed:
            os.kill(jvm, signal.SIGKILL)

    sched, _ = _two_batches(tmp_path, broker, topic, "* * * * * ?", kill_the_jvm, in_flight_may_fail=True)
    assert "the shared Spark session is gone (its JVM stopped): starting a fresh one for k" in sched.log
    assert sched.log.count("started the shared Spark session") == 2
