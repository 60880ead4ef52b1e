"""A small plan runs in the driver and never starts Spark (`spark.in_driver_below`); the Sources' size estimates."""

from __future__ import annotations

import gzip
import logging
from pathlib import Path

import pytest
from support.jobs import example_job, write_job

from gobblin_py.api import MultiWorkUnit, SourceState, WorkUnit
from gobblin_py.builtin.sources.files.source import FilesSource
from gobblin_py.builtin.sources.files.split import FileSplit
from gobblin_py.builtin.sources.jdbc.source import JdbcSource, catalog_row_bytes
from gobblin_py.builtin.sources.jdbc.split import JdbcSplit
from gobblin_py.builtin.sources.kafka.source import KafkaSource
from gobblin_py.config import load_job
from gobblin_py.errors import ConfigError
from gobblin_py.runtime.executors.base import small_plan_bytes
from gobblin_py.runtime.executors.spark import SparkExecutor
from gobblin_py.runtime.planning import Plan
from gobblin_py.runtime.runner import JobRunner
from gobblin_py.runtime.task.spec import TaskSpec
from gobblin_py.testing.outputs import read_avro_dir


def _wu(wu_id: str, low: int = 0, high: int = 100, split: dict | None = None) -> WorkUnit:
    return WorkUnit(id=wu_id, dataset="ds", watermark_key="0", low_watermark=low, expected_high_watermark=high, split=split or {})


def _plan(sizes: dict[str, float | None], units: list[WorkUnit | MultiWorkUnit]) -> Plan:
    return Plan(units=units, previous={}, key_stats={}, estimated_bytes=sizes)


def _tasks(spec_job: object, plan: Plan) -> list[float | None]:
    """The estimates of the plan's tasks, as the runner hands them to the executor."""
    specs = [TaskSpec(job=spec_job, run_id="r", unit=u, estimated_bytes=plan.estimate(u)) for u in plan.units]  # type: ignore[arg-type]
    return [t.estimated_bytes for t in specs]


def test_a_plan_is_small_only_when_every_task_has_an_estimate_and_their_sum_is_under_the_limit(tmp_path: Path) -> None:
    spec = load_job(write_job(tmp_path, example_job(tmp_path)))
    a, b, c = _wu("a"), _wu("b"), _wu("c")
    multi = MultiWorkUnit("m", (b, c))
    known = _plan({"a": 100.0, "b": 200.0, "c": 300.0}, [a, multi])
    assert known.estimate(multi) == 500.0
    assert small_plan_bytes(_tasks(spec, known), 601) == 600.0
    assert small_plan_bytes(_tasks(spec, known), 600) is None  # under, not at
    assert small_plan_bytes(_tasks(spec, known), None) is None  # spark.in_driver_below: off
    unknown = _plan({"a": 100.0, "b": 200.0, "c": None}, [a, multi])
    assert unknown.estimate(multi) is None
    assert small_plan_bytes(_tasks(spec, unknown), 10**12) is None  # one task the Source cannot size: Spark
    assert small_plan_bytes([], 10**12) is None


def test_a_small_run_commits_every_record_in_the_driver_without_starting_spark(tmp_path: Path, caplog) -> None:
    spec = load_job(write_job(tmp_path, example_job(tmp_path)))
    executor = SparkExecutor(spec)
    with caplog.at_level(logging.INFO, logger="gobblin_py"):
        result = JobRunner(spec, executor).run()
    assert result.succeeded, result.error
    assert executor._thread is None and executor._session is None  # Spark was never asked to start
    assert "executor_start" not in result.phases
    assert any("in the driver, not on Spark" in r.getMessage() for r in caplog.records)
    ids = [r["id"] for r in read_avro_dir(tmp_path / "output" / "clicks")]
    assert len(ids) == len(set(ids)) == 2000
    executor.stop(exiting=True)


def test_a_small_compaction_merges_in_the_driver_without_starting_spark(tmp_path: Path, caplog) -> None:
    """Before, `compact` always started Spark: 39 s for ~290 KB."""
    from gobblin_py.compaction.compactor import Compactor
    from gobblin_py.compaction.plan import compaction_options

    spec = load_job(write_job(tmp_path, example_job(tmp_path)))
    day = tmp_path / "data" / "clicks" / "clicks-2026-01-01.jsonl"
    assert JobRunner(spec, SparkExecutor(spec)).run().succeeded
    day.with_name("late-2026-01-01.jsonl").write_text(day.read_text().replace('"id": ', '"id": 9000'))  # a 2nd file there
    assert JobRunner(spec, SparkExecutor(spec)).run().succeeded
    executor = SparkExecutor(spec)
    with caplog.at_level(logging.INFO, logger="gobblin_py"):
        report = Compactor(JobRunner(spec, executor)).run(compaction_options(spec, min_files=2))
    assert report.succeeded and [p.status for p in report.partitions] == ["compacted"]
    assert executor._thread is None and executor._session is None  # Spark was never asked to start
    assert any("compacting 1 partition(s) in the driver, not on Spark" in r.getMessage() for r in caplog.records)
    ids = [r["id"] for r in read_avro_dir(tmp_path / "output" / "clicks")]
    assert len(ids) == len(set(ids)) == 2400
    executor.stop(exiting=True)


def test_a_plan_over_the_limit_or_with_the_setting_off_goes_to_spark(tmp_path: Path) -> None:
    spec = load_job(write_job(tmp_path, example_job(tmp_path, spark__in_driver_below="1KiB")))
    plan = _plan({"a": 4096.0}, [_wu("a")])
    assert spec.spark.in_driver_limit == 1024
    assert small_plan_bytes(_tasks(spec, plan), spec.spark.in_driver_limit) is None
    for off in (0, "off", False):
        assert load_job(write_job(tmp_path, example_job(tmp_path, spark__in_driver_below=off))).spark.in_driver_limit is None


def test_unset_it_is_16MiB_on_a_local_master_and_off_on_a_cluster_unless_given(tmp_path: Path) -> None:
    path = write_job(tmp_path, example_job(tmp_path))
    assert load_job(path).spark.in_driver_limit == 16 * 1024 * 1024
    assert load_job(path, master="spark://127.0.0.1:7077").spark.in_driver_limit is None
    given = write_job(tmp_path, example_job(tmp_path, spark__in_driver_below="4MB"), "given.yaml")
    assert load_job(given, master="spark://127.0.0.1:7077").spark.in_driver_limit == 4_000_000


def test_a_bad_size_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="in_driver_below"):
        load_job(write_job(tmp_path, example_job(tmp_path, spark__in_driver_below="lots")))


def test_files_estimate_the_range_to_read_and_five_times_a_compressed_file(tmp_path: Path) -> None:
    data = tmp_path / "in" / "ds"
    data.mkdir(parents=True)
    (data / "a.jsonl").write_bytes(b'{"id": 1}\n' * 100)
    (data / "b.jsonl.gz").write_bytes(gzip.compress(b'{"id": 2}\n' * 1000))
    source = FilesSource(FilesSource.Settings(path=str(tmp_path / "in"), pack_bytes=0))  # a unit a file
    state = SourceState({})
    sizes = {Path(FileSplit.of(wu).file).name: source.estimated_bytes(wu, state) for wu in source.get_workunits(state)}
    assert sizes == {"a.jsonl": 1000.0, "b.jsonl.gz": 5.0 * (data / "b.jsonl.gz").stat().st_size}
    (packed,) = FilesSource(FilesSource.Settings(path=str(tmp_path / "in"))).get_workunits(state)  # both in one unit
    assert source.estimated_bytes(packed, state) == sum(sizes.values())
    appended = _wu("x", low=600, high=1000, split=FileSplit(file=str(data / "a.jsonl"), start=600, end=1000).packed())
    assert source.estimated_bytes(appended, state) == 400.0  # only the appended bytes


def test_kafka_estimates_records_times_the_partitions_last_bytes_per_record() -> None:
    source = KafkaSource.__new__(KafkaSource)  # estimates need no broker
    wu = WorkUnit(id="w", dataset="topic", watermark_key="3", low_watermark=1000, expected_high_watermark=1500)
    assert source.estimated_bytes(wu, SourceState({})) == 500 * 1024.0  # nothing known yet: 1 KiB a record
    seen = SourceState({"topic": {"3": 1000}}, {"topic": {"3": {"records": 1000, "bytes": 50_000, "seconds": 1.0}}})
    assert source.estimated_bytes(wu, seen) == 500 * 50.0


def test_jdbc_estimates_planned_rows_times_the_tables_last_bytes_per_row() -> None:
    source = JdbcSource.__new__(JdbcSource)
    def wu_of(**fields: object) -> WorkUnit:
        split = JdbcSplit(table="public.t", schema_name="public", table_name="t", columns=["id"], native=False,
                          kind="integer", lo=None, hi=1, avro_schema={}, estimated_rows=2000, **fields)
        return WorkUnit(id="w", dataset="public.t", watermark_key="high", low_watermark=None, expected_high_watermark=1,
                        split=split.packed())

    wu = wu_of()
    assert source.estimated_bytes(wu, SourceState({})) == 2000 * 1024.0
    stats = {"public.t": {"high": {"records": 900, "bytes": 90_000, "seconds": 1.0},
                          "low": {"records": 100, "bytes": 10_000, "seconds": 1.0}}}
    assert source.estimated_bytes(wu, SourceState({}, stats)) == 2000 * 100.0
    wu = wu_of(catalog_row_bytes=130.0)  # a first load: the table's size in the catalog
    assert source.estimated_bytes(wu, SourceState({})) == 2000 * 130.0
    assert source.estimated_bytes(wu, SourceState({}, stats)) == 2000 * 100.0  # what was written wins


def test_jdbc_bytes_per_row_from_the_catalog_fall_back_to_the_planned_rows_before_any_analyze() -> None:
    assert catalog_row_bytes((1_300_000.0, 10_000.0), 9_000) == 130.0
    assert catalog_row_bytes((1_300_000.0, -1.0), 10_000) == 130.0  # reltuples -1: never vacuumed or analyzed
    assert catalog_row_bytes(None, 10_000) is None and catalog_row_bytes((0.0, 0.0), 10) is None
