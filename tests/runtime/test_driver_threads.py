"""A run kept in the driver runs its tasks on threads, as many at once as the local master has cores; work a Source
reads natively (outside Python's lock) weighs less against `spark.in_driver_below`, since the threads do it as fast
as a local Spark would, and so does a plan's largest task, which Spark runs no faster than a thread (a plan of one
task stays in the driver); Ctrl-C stops the threads' tasks."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from support.jobs import example_job, write_job

from gobblin_py.config import load_job
from gobblin_py.runtime import interrupt
from gobblin_py.runtime.executors.base import held_bytes, local_cores, plan_held_bytes
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.executors.spark import SparkExecutor
from gobblin_py.runtime.runner import JobRunner
from gobblin_py.runtime.task.results import TasksCancelled
from gobblin_py.runtime.task.spec import TaskSpec

GiB = 1024**3

_PLUGIN = '''
import threading
import pyarrow as pa
from gobblin_py.api import BatchExtractor, RawBatch, Source, WorkUnit
from gobblin_py.runtime import interrupt

TOGETHER = threading.Barrier(2, timeout=20)  # each task waits here for the other: only threads at once get past
SHARE = {share}
MODE = "{mode}"
COUNT = {count}
SCHEMA = {{"type": "record", "name": "r", "fields": [{{"name": "id", "type": "long"}}]}}


class Extractor(BatchExtractor):
    makes_arrow = True

    def __init__(self, workunit):
        self.workunit = workunit

    def get_schema(self):
        return SCHEMA

    def read_batches(self):
        base = int(self.workunit.id[1:]) * 1000
        if MODE == "together":
            TOGETHER.wait()
        yield RawBatch("ids", list(range(base, base + 500)))
        if MODE == "interrupt":
            interrupt.request()  # Ctrl-C while the task still has batches to read
        yield RawBatch("ids", list(range(base + 500, base + 1000)))

    def records_of(self, batch):
        for i in batch.values:
            yield {{"id": i}}

    def to_arrow(self, batch):
        return pa.record_batch([pa.array(batch.values, pa.int64())], names=["id"])

    def actual_high_watermark(self):
        return 1


class BigNativeSource(Source):
    """COUNT work units the Source sizes at 1 GiB each, read natively (SHARE of their work outside Python's lock)."""

    def get_workunits(self, state):
        return [WorkUnit(id=f"w{{i}}", dataset="things", watermark_key=str(i), low_watermark=0, expected_high_watermark=1)
                for i in range(COUNT)]

    def get_extractor(self, workunit, context):
        return Extractor(workunit)

    def estimated_bytes(self, workunit, state):
        return float(1024 ** 3)

    def native_share(self, workunit, converted):
        return 0.0 if converted else SHARE
'''


def _job(tmp: Path, monkeypatch: pytest.MonkeyPatch, share: float, mode: str = "together", count: int = 2) -> object:
    (tmp / "big_native.py").write_text(_PLUGIN.format(share=share, mode=mode, count=count))
    monkeypatch.syspath_prepend(str(tmp))
    monkeypatch.delitem(__import__("sys").modules, "big_native", raising=False)
    job = example_job(tmp, source={"class": "big_native:BigNativeSource"}, converters=None, quality=None,
                      writer={"class": "parquet"}, job={"name": "native", "work_dir": str(tmp / "work"), "max_task_retries": 0})
    return load_job(write_job(tmp, job))


def test_the_weight_of_an_estimate_follows_the_time_its_work_takes_in_threads_and_on_spark() -> None:
    assert [local_cores(m, 8) for m in ("local[*]", "local[3]", "local", "local[2, 4]", "spark://h:7077")] == [8, 3, 1, 2, 1]
    assert held_bytes(100.0, 0.0, 2) == 100.0  # all of it holds the lock: the limit weighs it whole, as before
    assert held_bytes(100.0, 0.5, 2) == 0.0  # two threads, half of it native: as fast as Spark's two slots
    assert held_bytes(100.0, 0.7, 16) == pytest.approx(100.0 * (1 - 0.7 - 1 / 16) * 16 / 15)
    assert held_bytes(100.0, 0.95, 1) == 100.0  # one slot: no threads to spread it over
    assert held_bytes(None, 0.9, 2) is None  # an unknown size is never small


def test_a_large_plan_read_natively_runs_in_the_driver_two_tasks_at_once_and_commits_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    spec = _job(tmp_path, monkeypatch, 0.9)
    executor = SparkExecutor(spec)  # type: ignore[arg-type]
    with caplog.at_level(logging.INFO, logger="gobblin_py"):
        result = JobRunner(spec, executor).run()  # type: ignore[arg-type]
    executor.stop(exiting=True)
    assert result.succeeded, result.error  # each task waited for the other at a barrier: they ran at once
    assert executor._thread is None and executor._session is None  # Spark was never asked to start
    said = [r.getMessage() for r in caplog.records if "in the driver" in r.getMessage()]
    assert said and "2 at a time" in said[0] and "about 2.0 GiB, read natively or in tasks too few for Spark's slots, so that about 0 B count" in said[0], said
    ids = sorted(pq.read_table(tmp_path / "output" / "things").column("id").to_pylist())
    assert ids == list(range(0, 1000)) + list(range(1000, 2000))


def test_the_same_plan_read_in_python_goes_to_spark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _job(tmp_path, monkeypatch, 0.0)
    specs = [TaskSpec(job=spec, run_id="r", unit=u, estimated_bytes=GiB, native_share=0.0) for u in ("a", "b")]  # type: ignore[arg-type]
    executor = SparkExecutor(spec)  # type: ignore[arg-type]
    weighed = [held_bytes(t.estimated_bytes, t.native_share, local_cores(str(executor.master), 2)) for t in specs]
    assert weighed == [GiB, GiB]
    assert plan_held_bytes([GiB, GiB], [0.0, 0.0], 2) == 2 * GiB  # 2 GiB against 16 MiB: Spark (not started here)


def test_spark_gains_nothing_on_a_plans_largest_task_so_a_plan_of_one_task_weighs_nothing() -> None:
    """Spark on 2 slots takes F + max(W/2, largest), the driver's threads max(W, largest) for work that holds the lock."""
    assert plan_held_bytes([GiB], [0.0], 2) == 0.0  # one task: one thread is as fast as one of Spark's slots
    assert plan_held_bytes([GiB], [0.0], 16) == 0.0
    assert plan_held_bytes([GiB, GiB], [0.0, 0.0], 2) == 2 * GiB  # two even tasks: Spark's two slots halve it
    assert plan_held_bytes([GiB, 0.5 * GiB], [0.0, 0.0], 2) == pytest.approx(GiB)  # 1.5 GiB; Spark's 1 GiB at best
    assert plan_held_bytes([GiB, GiB], [0.9, 0.9], 2) == 0.0  # read natively, as before
    assert plan_held_bytes([GiB], [0.0], 1) == GiB  # one slot (a cluster): weighed whole, as before
    assert plan_held_bytes([GiB, None], [0.0, 0.0], 2) is None  # a task without an estimate: never small


def test_a_plan_of_one_large_task_read_in_python_runs_in_the_driver_and_never_starts_spark(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A continuous stream of one table (mysql_cdc, postgres_cdc) plans one task a checkpoint: once its estimate
    crossed the limit, Spark started mid-stream and that checkpoint waited ~3 s for it (issue 45's p99)."""
    spec = _job(tmp_path, monkeypatch, 0.0, mode="alone", count=1)
    executor = SparkExecutor(spec)  # type: ignore[arg-type]
    with caplog.at_level(logging.INFO, logger="gobblin_py"):
        result = JobRunner(spec, executor).run()  # type: ignore[arg-type]
    executor.stop(exiting=True)
    assert result.succeeded, result.error
    assert executor._thread is None and executor._session is None  # 1 GiB, all of it in Python: Spark never started
    said = [r.getMessage() for r in caplog.records if "in the driver" in r.getMessage()]
    assert said and "running 1 task(s) in the driver" in said[0] and "about 1.0 GiB" in said[0], said
    assert sorted(pq.read_table(tmp_path / "output" / "things").column("id").to_pylist()) == list(range(0, 1000))


def test_ctrl_c_stops_the_tasks_running_on_driver_threads_and_publishes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _job(tmp_path, monkeypatch, 0.9, mode="interrupt")
    try:
        with pytest.raises(TasksCancelled) as cancelled:
            JobRunner(spec, InProcessExecutor(threads=2)).run()  # type: ignore[arg-type]
    finally:
        interrupt._seen.clear()
    assert cancelled.value.results and all(r.status.value == "cancelled" for r in cancelled.value.results)
    assert not (tmp_path / "output" / "things").exists() or not any((tmp_path / "output" / "things").rglob("*.parquet"))
    assert not [t.name for t in threading.enumerate() if t.name.startswith("gobblin-task")]  # every task thread ended


def test_the_sources_say_what_of_their_work_is_native_only_where_it_is() -> None:
    """ADBC/ConnectorX reads, Arrow-parsed JSON lines and CSV and librdkafka-fetched JSON count as native on the
    columnar path; a row reader, kafka-python or a task without the batch converter do not."""
    from gobblin_py.api import WorkUnit
    from gobblin_py.builtin.sources.files.source import FilesSource
    from gobblin_py.builtin.sources.files.split import FileSplit
    from gobblin_py.builtin.sources.kafka.source import KafkaSource
    from gobblin_py.builtin.sources.kafka.split import KafkaSplit

    def wu(file: str | None = None) -> WorkUnit:
        split = FileSplit(file=file, end=1).packed() if file else {}
        return WorkUnit(id="w", dataset="d", watermark_key="k", low_watermark=0, expected_high_watermark=1, split=split)

    files = FilesSource(FilesSource.Settings.model_validate({"path": "/tmp"}))
    assert files.native_share(wu(file="/tmp/d/a.jsonl"), converted=True) > 0.5
    assert files.native_share(wu(file="/tmp/d/a.jsonl.gz"), converted=True) > 0.5
    assert files.native_share(wu(file="/tmp/d/a.csv"), converted=True) > 0.5
    assert files.native_share(wu(file="/tmp/d/a.csv"), converted=False) == 0.0
    assert files.native_share(wu(file="/tmp/d/a.jsonl"), converted=False) == 0.0
    for client, native in (("confluent", True), ("kafka-python", False)):
        kafka = KafkaSource(KafkaSource.Settings.model_validate({"bootstrap_servers": "127.0.0.1:9", "topics": ["t"],
                                                                 "client": client}))
        unit = dataclasses.replace(wu(), split=KafkaSplit(topic="t", partition=0, client=client).packed())
        assert (kafka.native_share(unit, converted=True) > 0.5) is native
        assert kafka.native_share(unit, converted=False) == 0.0


def test_the_sources_warm_up_runs_on_its_own_thread_and_its_failure_fails_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner starts `Source.warm_up` (the tasks' imports) on a thread of its own while it plans; best effort: a
    warm-up that raises leaves the run to succeed."""
    spec = _job(tmp_path, monkeypatch, 0.9, mode="plain")
    seen: list[str] = []

    def warm_up(self: object) -> None:
        seen.append(threading.current_thread().name)
        raise ImportError("no module named 'a_driver'")

    monkeypatch.setattr(spec.source.cls(), "warm_up", warm_up)  # type: ignore[attr-defined]
    result = JobRunner(spec, InProcessExecutor()).run()  # type: ignore[arg-type]
    assert result.succeeded, result.error
    assert seen == ["warm-up"]
    ids = sorted(pq.read_table(tmp_path / "output" / "things").column("id").to_pylist())
    assert ids == list(range(0, 2000))


def test_a_run_ends_only_after_the_sources_warm_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run shorter than its warm-up waits for it: an import still running on another thread when the interpreter
    exits aborts the process (`PyGILState_Release` while finalizing: a no-data CLI run exited -6)."""
    spec = _job(tmp_path, monkeypatch, 0.9, mode="plain", count=0)
    done = threading.Event()

    def warm_up(self: object) -> None:
        time.sleep(1.0)
        done.set()

    monkeypatch.setattr(spec.source.cls(), "warm_up", warm_up)  # type: ignore[attr-defined]
    result = JobRunner(spec, InProcessExecutor()).run()  # type: ignore[arg-type]
    assert result.succeeded, result.error
    assert done.is_set()
    assert not any(t.name == "warm-up" for t in threading.enumerate())
