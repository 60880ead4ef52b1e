"""A job's metrics for Prometheus, through the maintained prometheus_client: written to a file by `run
--metrics-prom` (node_exporter's textfile collector) or served over HTTP by `schedule --metrics-port`.
Every metric is defined here once: `run_metrics` for one run, `lag_metrics` for the datasets' lag (also for a web
server's own /metrics), `ScheduleMetrics` adds the scheduler's counts."""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, generate_latest, start_http_server, write_to_textfile
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric, SummaryMetricFamily

from gobblin_py.config.model import JobSpec
from gobblin_py.errors import ConfigError, GobblinError
from gobblin_py.operating.lag import DatasetLag, LagCache
from gobblin_py.runtime.runner import DatasetStatus, JobResult
from gobblin_py.scheduling.scheduler import RunEnded, ScheduledJob
from gobblin_py.state.store import StateStore

log = logging.getLogger(__name__)

_COMMITTED = {s.value for s in (DatasetStatus.COMMITTED, DatasetStatus.PARTIAL, DatasetStatus.NO_NEW_DATA)}
_COMMIT_FAILED = {s.value for s in (DatasetStatus.COMMIT_FAILED, DatasetStatus.BLOCKED)}
_BY_JOB, _BY_DATASET = ["job"], ["job", "dataset"]
LAG_TTL_S, LAG_TIMEOUT_S = 30.0, 5.0
"""`schedule --metrics-port`: a job's lag is measured at a scrape at most once per LAG_TTL_S (a scrape never hammers the
brokers), each measurement within LAG_TIMEOUT_S (under Prometheus' default scrape timeout of 10 s)."""


def _epoch(iso: Any) -> float | None:
    try:
        return dt.datetime.fromisoformat(str(iso)).timestamp()
    except ValueError:
        return None


def run_metrics(run: Mapping[str, Any], state: StateStore, now: float) -> list[Metric]:
    """One run (its `JobResult.to_json()`) as gauges: the job's outcome and duration, per dataset its counts, and
    the last success and commit times from the state store (so a failed run still reports when they were)."""
    job = run["job"]
    out: list[Metric] = []

    def gauge(name: str, doc: str, labels: list[str] = _BY_JOB) -> GaugeMetricFamily:
        out.append(GaugeMetricFamily(f"gobblin_py_{name}", doc, labels=labels))
        return out[-1]  # type: ignore[return-value]

    succeeded = run.get("status") == "succeeded"
    gauge("run_succeeded", "1 when the last run succeeded, else 0").add_metric([job], 1 if succeeded else 0)
    gauge("run_duration_seconds", "duration of the last run").add_metric([job], float(run.get("duration_s") or 0))
    gauge("run_end_timestamp_seconds", "when the last run ended (Unix time)").add_metric([job], now)
    last_success = gauge("last_success_timestamp_seconds", "when a run of the job last succeeded (Unix time)")
    ok_runs = [r for r in state.runs() if r.get("status") == "succeeded"]
    if succeeded:
        last_success.add_metric([job], now)
    elif ok_runs and _epoch(ok_runs[-1]["started"]) is not None:
        last_success.add_metric([job], _epoch(ok_runs[-1]["started"]) + ok_runs[-1].get("duration_s", 0))  # type: ignore[operator]
    counts = {
        "records_extracted": gauge("dataset_records_extracted", "records read by the last run", _BY_DATASET),
        "records_written": gauge("dataset_records_written", "records published by the last run", _BY_DATASET),
        "records_rejected": gauge("dataset_records_rejected", "records sent to the error file by the last run", _BY_DATASET),
        "files_published": gauge("dataset_files_published", "data files published by the last run", _BY_DATASET),
    }
    committed = gauge("dataset_committed", "1 when the dataset committed (or had no new data) in the last run", _BY_DATASET)
    failed = gauge("dataset_commit_failed", "1 when the dataset's commit failed or is blocked by a pending one", _BY_DATASET)
    written_bytes = gauge("dataset_bytes_written", "bytes written by the last run", _BY_DATASET)
    ok_at = gauge("dataset_last_commit_timestamp_seconds", "when the dataset last committed new data (Unix time)", _BY_DATASET)
    per_ds_bytes: dict[str, int] = dict(run.get("bytes_by_dataset", {}))
    if "bytes_by_dataset" not in run:  # a record written before it: every task's detail is in it
        for t in run.get("tasks", []):
            per_ds_bytes[t["dataset"]] = per_ds_bytes.get(t["dataset"], 0) + sum(b["bytes_written"] for b in t["branches"].values())
    for d in run.get("datasets", []):
        ds = d["dataset"]
        for field, g in counts.items():
            g.add_metric([job, ds], d[field])
        committed.add_metric([job, ds], 1 if d["status"] in _COMMITTED else 0)
        failed.add_metric([job, ds], 1 if d["status"] in _COMMIT_FAILED else 0)
        written_bytes.add_metric([job, ds], per_ds_bytes.get(ds, 0))
    for ds, st in sorted(state.read_dataset_states().values.items()):
        at = _epoch(st.get("committed_at"))
        if at is not None:
            ok_at.add_metric([job, ds], at)
    return out


def lag_metrics(job: str, lags: Iterable[DatasetLag]) -> list[Metric]:
    """Each dataset's lag (`operating.lag.measure_lag`) as gauges: records (in the dataset's `unit`), seconds (the
    age of the oldest record not committed; 0 when nothing waits), bytes and files where the source knows them, and
    `lag_unknown` 1 where it could not be measured (its figures are then left out, never shown as 0)."""
    records = GaugeMetricFamily("gobblin_py_dataset_lag_records", "records (rows, changes) not yet committed", labels=_BY_DATASET)
    seconds = GaugeMetricFamily("gobblin_py_dataset_lag_seconds", "age of the oldest record not yet committed "
                                "(0: nothing waits)", labels=_BY_DATASET)
    size = GaugeMetricFamily("gobblin_py_dataset_lag_bytes", "bytes not yet committed (files: unread bytes; "
                             "postgres_cdc: WAL bytes)", labels=_BY_DATASET)
    files = GaugeMetricFamily("gobblin_py_dataset_lag_files", "files not yet read", labels=_BY_DATASET)
    unknown = GaugeMetricFamily("gobblin_py_dataset_lag_unknown", "1 when the dataset's lag could not be measured "
                                "(source unreachable, topic re-created...)", labels=_BY_DATASET)
    for lag in lags:
        labels = [job, lag.dataset]
        unknown.add_metric(labels, 1 if lag.error else 0)
        for family, value in ((records, lag.records), (size, lag.bytes), (files, lag.files)):
            if value is not None:
                family.add_metric(labels, value)
        if lag.seconds is not None:
            seconds.add_metric(labels, lag.seconds)
        elif lag.pending is False:
            seconds.add_metric(labels, 0.0)
    return [records, seconds, size, files, unknown]


class _Families:
    """A collector of families computed beforehand (prometheus_client asks a collector for them)."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)


def registry_for(result: JobResult, state: StateStore, now: float | None = None,
                 lags: list[DatasetLag] | None = None) -> CollectorRegistry:
    """The run's metrics (and its datasets' lag, measured after it) in a registry of their own."""
    reg = CollectorRegistry()
    families = run_metrics(result.to_json(), state, time.time() if now is None else now)
    reg.register(_Families(families + (lag_metrics(result.job, lags) if lags is not None else [])))
    return reg


def write_prometheus(result: JobResult, path: Path, state: StateStore, lags: list[DatasetLag] | None = None) -> None:
    """Write the file atomically (prometheus_client writes a temporary file and renames it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_to_textfile(str(path), registry_for(result, state, lags=lags))


def _merged(families: Iterable[Metric]) -> list[Metric]:
    """Families of one name (one per job) as one family: an exposition names each family once."""
    by_name: dict[str, Metric] = {}
    for f in families:
        if f.name in by_name:
            by_name[f.name].samples.extend(f.samples)
        else:
            by_name[f.name] = Metric(f.name, f.documentation, f.type, f.unit)
            by_name[f.name].samples = list(f.samples)
    return list(by_name.values())


class ScheduleMetrics:
    """What `schedule --metrics-port` serves: each job's last run (`run_metrics`, updated as each run ends) and, per
    job, its runs by outcome, their durations, skipped firings and the next fire time."""

    def __init__(self, jobs: list[ScheduledJob], lag: LagCache | None = None) -> None:
        self.jobs = jobs
        self.lag = lag if lag is not None else LagCache(ttl_s=LAG_TTL_S, timeout_s=LAG_TIMEOUT_S)
        self._specs: dict[Path, tuple[float, JobSpec]] = {}
        self._lock = threading.Lock()
        self._last: dict[str, list[Metric]] = {}
        self._outcomes: dict[tuple[str, str], int] = {}
        self._durations: dict[str, tuple[int, float]] = {}
        self._exit_codes: dict[str, int] = {}

    def run_ended(self, ended: RunEnded) -> None:
        """Scheduler listener: take the run's metrics (a run that wrote no result counts as `crashed`)."""
        j, now = ended.job, time.time()
        run = ended.result or {"job": j.name, "status": "crashed", "duration_s": ended.wall_s}
        families = run_metrics(run, StateStore(j.work_dir, j.name), now)
        with self._lock:
            self._last[j.name] = families
            key = (j.name, str(run["status"]))
            self._outcomes[key] = self._outcomes.get(key, 0) + 1
            count, total = self._durations.get(j.name, (0, 0.0))
            self._durations[j.name] = (count + 1, total + float(run.get("duration_s") or ended.wall_s))
            self._exit_codes[j.name] = ended.exit_code

    def collect(self) -> Iterator[Metric]:
        runs = CounterMetricFamily("gobblin_py_scheduled_runs", "scheduled runs that ended, by outcome "
                                   "(succeeded, failed, cancelled; crashed: the run wrote no result)", labels=["job", "status"])
        durations = SummaryMetricFamily("gobblin_py_scheduled_run_duration_seconds", "durations of the scheduled runs", labels=_BY_JOB)
        exit_code = GaugeMetricFamily("gobblin_py_scheduled_run_exit_code", "exit code of the last scheduled run", labels=_BY_JOB)
        skipped = CounterMetricFamily("gobblin_py_scheduled_runs_skipped", "firings skipped: the last run was still going", labels=_BY_JOB)
        next_fire = GaugeMetricFamily("gobblin_py_next_run_timestamp_seconds", "when the job fires next (Unix time)", labels=_BY_JOB)
        with self._lock:
            for (job, status), n in sorted(self._outcomes.items()):
                runs.add_metric([job, status], n)
            for job, (count, total) in sorted(self._durations.items()):
                durations.add_metric([job], count, total)
            for job, code in sorted(self._exit_codes.items()):
                exit_code.add_metric([job], code)
            last = _merged(f for families in self._last.values() for f in families)
        for j in self.jobs:
            skipped.add_metric([j.name], j.skipped)
            if j.next_fire != dt.datetime.max:  # max: the schedule has no later time
                next_fire.add_metric([j.name], j.next_fire.timestamp())
        yield from (runs, durations, exit_code, skipped, next_fire, *last)
        measured = self.lag.get(self._lag_jobs())
        yield from _merged(f for name, lags in sorted(measured.items()) for f in lag_metrics(name, lags))

    def _lag_jobs(self) -> list[JobSpec]:
        """The scheduled jobs whose lag is measured (a compaction's entry is its job's), each loaded again only when its
        file changed; a job file that does not load now is left out (its next run names the problem)."""
        from gobblin_py.config import load_job

        out = []
        for j in self.jobs:
            if j.command != "run":
                continue
            try:
                mtime = j.path.stat().st_mtime
                held = self._specs.get(j.path)
                if held is None or held[0] != mtime:
                    self._specs[j.path] = held = (mtime, load_job(j.path))
            except (OSError, GobblinError) as exc:
                log.debug("lag of %s not measured: %s", j.name, exc)
                continue
            out.append(held[1])
        return out

    def serve(self, host: str, port: int) -> tuple[str, WSGIServer]:
        """Serve /metrics on host:port (0: a free port) in a daemon thread; the URL and the server (`shutdown()`)."""
        registry = CollectorRegistry()
        registry.register(self)
        try:
            server, _thread = start_http_server(port, host, registry)
        except OSError as exc:
            raise ConfigError(f"--metrics-port {port}: cannot listen on {host}:{port} ({exc.strerror or exc}); "
                              "choose another port") from None
        return f"http://{host}:{server.server_port}/metrics", server


def last_runs_text(last: list[tuple[Mapping[str, Any], StateStore]],
                   lags: Mapping[str, Iterable[DatasetLag]] | None = None) -> bytes:
    """Prometheus text of each job's last run (its record and its state store) and each job's lag (by job name): what
    `serve` answers at /metrics."""
    families = [f for run, state in last for f in run_metrics(run, state, (_epoch(run.get("started")) or time.time())
                                                              + float(run.get("duration_s") or 0))]
    families += [f for job, lag in (lags or {}).items() for f in lag_metrics(job, lag)]
    registry = CollectorRegistry()
    registry.register(_Families(_merged(families)))
    return generate_latest(registry)
