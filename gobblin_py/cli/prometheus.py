"""A run's metrics in Prometheus' text exposition format (for node_exporter's textfile collector), through the
maintained prometheus_client: one gauge per fact, labelled by job and dataset."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, write_to_textfile

from gobblin_py.runtime.runner import DatasetStatus, JobResult
from gobblin_py.state.store import StateStore

_COMMITTED = {DatasetStatus.COMMITTED, DatasetStatus.PARTIAL, DatasetStatus.NO_NEW_DATA}


def _epoch(iso: Any) -> float | None:
    try:
        return dt.datetime.fromisoformat(str(iso)).timestamp()
    except ValueError:
        return None


def registry_for(result: JobResult, state: StateStore, now: float | None = None) -> CollectorRegistry:
    """The run as gauges: the job's outcome and duration, per dataset its counts, and the last success times
    from the state store (so a failed run still reports when each dataset last committed)."""
    now = time.time() if now is None else now
    reg = CollectorRegistry()

    def gauge(name: str, doc: str, labels: tuple[str, ...] = ("job",)) -> Gauge:
        return Gauge(f"gobblin_py_{name}", doc, labels, registry=reg)

    job = result.job
    gauge("run_succeeded", "1 when the last run succeeded, else 0").labels(job).set(1 if result.succeeded else 0)
    gauge("run_duration_seconds", "duration of the last run").labels(job).set(result.duration_s)
    gauge("run_end_timestamp_seconds", "when the last run ended (Unix time)").labels(job).set(now)
    succeeded = [r for r in state.runs() if r.get("status") == "succeeded"]
    last_ok = now if result.succeeded else (_epoch(succeeded[-1]["started"]) + succeeded[-1].get("duration_s", 0) if succeeded else None)
    if last_ok is not None:
        gauge("last_success_timestamp_seconds", "when a run of the job last succeeded (Unix time)").labels(job).set(last_ok)
    committed_at = {d: _epoch(st.get("committed_at")) for d, st in state.read_dataset_states().values.items()}
    by_ds = ("job", "dataset")
    gauges = {
        "records_extracted": gauge("dataset_records_extracted", "records read by the last run", by_ds),
        "records_written": gauge("dataset_records_written", "records published by the last run", by_ds),
        "records_rejected": gauge("dataset_records_rejected", "records sent to the error file by the last run", by_ds),
        "files_published": gauge("dataset_files_published", "data files published by the last run", by_ds),
    }
    committed = gauge("dataset_committed", "1 when the dataset committed (or had no new data) in the last run", by_ds)
    failed = gauge("dataset_commit_failed", "1 when the dataset's commit failed or is blocked by a pending one", by_ds)
    ok_at = gauge("dataset_last_commit_timestamp_seconds", "when the dataset last committed new data (Unix time)", by_ds)
    written_bytes = gauge("dataset_bytes_written", "bytes written by the last run", by_ds)
    per_ds_bytes: dict[str, int] = {}
    for t in result.tasks:
        per_ds_bytes[t.workunit.dataset] = per_ds_bytes.get(t.workunit.dataset, 0) + sum(b.bytes_written for b in t.branches.values())
    for d in result.datasets:
        for field, g in gauges.items():
            g.labels(job, d.dataset).set(getattr(d, field))
        good = d.status in _COMMITTED
        committed.labels(job, d.dataset).set(1 if good else 0)
        failed.labels(job, d.dataset).set(1 if d.status in (DatasetStatus.COMMIT_FAILED, DatasetStatus.BLOCKED) else 0)
        written_bytes.labels(job, d.dataset).set(per_ds_bytes.get(d.dataset, 0))
        if committed_at.get(d.dataset) is not None:
            ok_at.labels(job, d.dataset).set(committed_at[d.dataset])
    return reg


def write_prometheus(result: JobResult, path: Path, state: StateStore) -> None:
    """Write the file atomically (prometheus_client writes a temporary file and renames it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_to_textfile(str(path), registry_for(result, state))
