"""`measure_lag` on the files source (tmp files, no Spark: tasks in process) and its guarantees for any source: one
entry per dataset, never an exception, never a secret; the Prometheus gauges carry the same figures."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from support.jobs import example_job, write_job

from gobblin_py.config import load_job
from gobblin_py.operating.lag import DatasetLag, LagCache, PartitionLag, measure_lag
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import JobRunner


def _sizes(data: Path) -> dict[str, tuple[int, int]]:
    """Per dataset (sub-directory): its input files and their bytes, counted by hand."""
    out: dict[str, tuple[int, int]] = {}
    for f in data.rglob("*"):
        if f.is_file() and not any(p.startswith((".", "_")) for p in f.relative_to(data).parts):
            files, size = out.get(f.relative_to(data).parts[0], (0, 0))
            out[f.relative_to(data).parts[0]] = (files + 1, size + f.stat().st_size)
    return out


def test_files_lag_counts_unread_files_and_bytes(tmp_path: Path) -> None:
    job = load_job(write_job(tmp_path, example_job(tmp_path)))
    by_hand = _sizes(tmp_path / "data")
    before = measure_lag(job)
    assert {lag.dataset: (lag.files, lag.bytes) for lag in before} == by_hand
    assert all(lag.error is None and lag.pending for lag in before)

    assert JobRunner(job, InProcessExecutor()).run().succeeded
    after = measure_lag(job)
    assert {lag.dataset: (lag.files, lag.bytes, lag.pending) for lag in after} == {d: (0, 0, False) for d in by_hand}

    new = tmp_path / "data" / "clicks" / "late.jsonl"
    new.write_bytes(b'{"id": 1, "ts": 1767225600000}\n' * 10)
    lags = {lag.dataset: lag for lag in measure_lag(job)}
    assert (lags["clicks"].files, lags["clicks"].bytes) == (1, new.stat().st_size)
    assert lags["orders"].files == 0


def test_a_source_fault_is_an_error_per_dataset_and_never_holds_a_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A plugin's own error quoting its password (here on purpose) reaches the entry with the password cut out."""
    (tmp_path / "leaky.py").write_text(
        "import os\n"
        "from gobblin_py.api import Settings, Source\n"
        "class LeakySettings(Settings):\n"
        "    path: str\n"
        "    password_env: str\n"
        "class LeakySource(Source):\n"
        "    Settings = LeakySettings\n"
        "    def get_workunits(self, state): return []\n"
        "    def get_extractor(self, workunit, context): raise NotImplementedError\n"
        "    def backlog(self, state, timeout_s):\n"
        "        raise OSError('login failed with ' + os.environ[self.settings.password_env])\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("LEAKY_PASSWORD", "s3cr3t-value")
    spec = example_job(tmp_path)
    spec["source"] = {"class": "leaky:LeakySource", "path": str(tmp_path / "data"), "password_env": "LEAKY_PASSWORD"}
    (lag,) = measure_lag(load_job(write_job(tmp_path, spec)))
    assert lag.dataset == "*" and lag.records is None
    assert "login failed with ***" in lag.error and "s3cr3t-value" not in lag.error


def test_a_source_that_hangs_is_given_up_after_the_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gobblin_py.builtin.sources.files.source import FilesSource

    job = load_job(write_job(tmp_path, example_job(tmp_path)))
    assert JobRunner(job, InProcessExecutor()).run().succeeded
    monkeypatch.setattr(FilesSource, "backlog", lambda self, state, timeout_s: time.sleep(30))
    monkeypatch.setattr("gobblin_py.operating.lag.GRACE_S", 0.2)
    started = time.monotonic()
    lags = measure_lag(job, timeout_s=0.5)
    assert time.monotonic() - started < 5
    assert {lag.dataset for lag in lags} == {"clicks", "orders"}  # the committed datasets, each with the reason
    assert all("did not answer within" in (lag.error or "") for lag in lags)


def test_lag_cache_measures_once_per_ttl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    job = load_job(write_job(tmp_path, example_job(tmp_path)))
    calls: list[str] = []
    monkeypatch.setattr("gobblin_py.operating.lag.measure_lag", lambda j, timeout_s: calls.append(j.name) or [DatasetLag("d")])
    now = [100.0]
    cache = LagCache(ttl_s=30, timeout_s=1, clock=lambda: now[0])
    assert cache.get([job]) == {"t": [DatasetLag("d")]}
    now[0] += 29
    cache.get([job])
    assert calls == ["t"]
    now[0] += 1
    cache.get([job])
    assert calls == ["t", "t"]


def test_prometheus_lag_gauges_carry_the_measured_figures() -> None:
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from gobblin_py.cli.prometheus import _Families, lag_metrics

    lags = [DatasetLag("events", records=25, seconds=3.5, unit="records", partitions=(PartitionLag("events-0", 25, 3.5),)),
            DatasetLag("clicks", bytes=0, files=0),  # nothing waits: 0 seconds, not a missing series
            DatasetLag("orders", bytes=120, files=2),  # pending, age unknown: no seconds sample
            DatasetLag("gone", error="topic 'gone' does not exist")]
    registry = CollectorRegistry()
    registry.register(_Families(lag_metrics("j", lags)))
    samples = {(s.name, s.labels["dataset"]): s.value
               for f in text_string_to_metric_families(generate_latest(registry).decode()) for s in f.samples}
    assert all(labels == "j" for labels in {s.labels["job"] for f in text_string_to_metric_families(
        generate_latest(registry).decode()) for s in f.samples})
    assert samples[("gobblin_py_dataset_lag_records", "events")] == 25
    assert samples[("gobblin_py_dataset_lag_seconds", "events")] == 3.5
    assert samples[("gobblin_py_dataset_lag_seconds", "clicks")] == 0
    assert ("gobblin_py_dataset_lag_seconds", "orders") not in samples
    assert samples[("gobblin_py_dataset_lag_bytes", "orders")] == 120
    assert samples[("gobblin_py_dataset_lag_files", "orders")] == 2
    assert samples[("gobblin_py_dataset_lag_unknown", "gone")] == 1
    assert samples[("gobblin_py_dataset_lag_unknown", "events")] == 0
    assert ("gobblin_py_dataset_lag_records", "gone") not in samples  # unknown is never shown as 0


def test_run_metrics_prom_has_the_lag_measured_after_the_run(tmp_path: Path) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from gobblin_py.testing.crash import cli

    write_job(tmp_path, example_job(tmp_path))
    run = cli(["run", "job.yaml", "--in-process", "--metrics-prom", "prom/gobblin.prom"], tmp_path)
    assert run.returncode == 0, run.stderr
    samples = {(s.name, s.labels.get("dataset")): s.value
               for f in text_string_to_metric_families((tmp_path / "prom" / "gobblin.prom").read_text()) for s in f.samples}
    assert samples[("gobblin_py_dataset_lag_files", "clicks")] == 0
    assert samples[("gobblin_py_dataset_lag_bytes", "orders")] == 0
    assert samples[("gobblin_py_dataset_lag_seconds", "clicks")] == 0
    assert samples[("gobblin_py_dataset_lag_unknown", "clicks")] == 0


def test_schedule_metrics_measure_the_lag_at_scrape_time(tmp_path: Path) -> None:
    import datetime as dt

    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from gobblin_py.cli.prometheus import ScheduleMetrics
    from gobblin_py.cron import Cron
    from gobblin_py.scheduling.scheduler import ScheduledJob

    path = write_job(tmp_path, example_job(tmp_path))
    soon = dt.datetime.now() + dt.timedelta(minutes=5)
    jobs = [ScheduledJob(path, "t", tmp_path / "work", Cron.parse("0 * * * * ?"), soon),
            ScheduledJob(tmp_path / "gone.yaml", "gone", tmp_path / "work", Cron.parse("0 * * * * ?"), soon)]
    registry = CollectorRegistry()
    registry.register(ScheduleMetrics(jobs))
    text = generate_latest(registry).decode()
    assert text.count("# TYPE gobblin_py_dataset_lag_files gauge") == 1
    samples = {(s.name, s.labels.get("job"), s.labels.get("dataset")): s.value
               for f in text_string_to_metric_families(text) for s in f.samples}
    by_hand = _sizes(tmp_path / "data")
    for dataset, (files, size) in by_hand.items():  # never run: every file waits
        assert samples[("gobblin_py_dataset_lag_files", "t", dataset)] == files
        assert samples[("gobblin_py_dataset_lag_bytes", "t", dataset)] == size
    assert not any(job == "gone" and "_lag_" in name for name, job, _ in samples)  # a job file that does not load: no lag
