"""A job's lag: per dataset, what its source holds that the job has not committed yet (Kafka: end offsets − committed
offsets, and the age of the first record not committed; jdbc: `max(watermark column)` − the committed watermark and
the rows above it; files: the files and bytes not read; postgres_cdc: WAL bytes after the committed LSN).

Measured by the Source's `backlog` hook against the committed state, read only: no lock, nothing written, nothing
read into the job. A fault (a broker down, a topic re-created, a query timed out) becomes the dataset's `error`, never
an exception, and the call returns within about `timeout_s` whatever the source does."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from gobblin_py.api.lag import DatasetLag, PartitionLag, unmeasured
from gobblin_py.config.model import JobSpec
from gobblin_py.errors import describe
from gobblin_py.runtime.planning import committed_state
from gobblin_py.state.store import StateStore

__all__ = ["DatasetLag", "LagCache", "PartitionLag", "measure_lag"]

log = logging.getLogger(__name__)

GRACE_S = 2.0
"""How long past `timeout_s` a source's measurement may take before it is given up (its clients time out themselves)."""


SAY_WAITING_AFTER_S = 0.5
"""A measurement still under way after this long is announced (`on_wait`): the wait that follows is the source's."""


def waited_on(job: JobSpec) -> str:
    """The source a lag measurement waits on, as a person knows it: its alias and where it reads (brokers, host, path)."""
    settings = job.source.settings
    where = next((getattr(settings, k) for k in ("bootstrap_servers", "host", "path") if getattr(settings, k, None)), None)
    where = ",".join(where) if isinstance(where, list) else where
    return f"{job.source.name or job.source.path}" + (f" ({where})" if where else "")


def measure_lag(job: JobSpec, timeout_s: float = 10.0, *, grace_s: float = GRACE_S,
                on_wait: Callable[[str], None] | None = None) -> list[DatasetLag]:
    """One entry per dataset (the source's datasets, and every one the state store has committed); never raises for a
    source's fault. A job whose source cannot be reached before its first commit gets one entry named `*`. The wait
    is capped at `timeout_s + grace_s`; `on_wait` is told which source it waits on, when it takes a while."""
    try:
        committed = committed_state(job, StateStore(job.job.records_root, job.name))
    except Exception as exc:  # noqa: BLE001 - an unreadable state store is reported, not raised
        return [unmeasured("*", _scrub(f"cannot read the state store in {job.job.records_root}: {describe(exc)}", job))]
    known = sorted(set(committed.watermarks) | set(committed.unreadable))
    found: list[list[DatasetLag] | None] = []
    failed: list[BaseException] = []

    def measure() -> None:
        try:
            found.append(job.source.create().backlog(committed.source_state, timeout_s))
        except BaseException as exc:  # noqa: BLE001 - reported per dataset below
            failed.append(exc)

    worker = threading.Thread(target=measure, name=f"lag-{job.name}", daemon=True)
    worker.start()
    cap = timeout_s + grace_s
    worker.join(min(cap, SAY_WAITING_AFTER_S) if on_wait is not None else cap)
    if worker.is_alive() and on_wait is not None:
        on_wait(f"job {job.name}: waiting on source {waited_on(job)}, at most {cap:.0f} s…")
        worker.join(max(0.0, cap - SAY_WAITING_AFTER_S))
    if worker.is_alive():
        return _each(known, f"not measured: source {waited_on(job)} did not answer within {cap:.0f} s")
    if failed:
        return _each(known, _scrub(f"source {waited_on(job)}: {describe(failed[0])}", job))
    lags = found[0] if found else None
    if lags is None:
        return _each(known, f"source {waited_on(job)} cannot measure its lag")
    measured = {lag.dataset for lag in lags}
    out = [_scrubbed(lag, job) for lag in lags]
    for dataset, exc in committed.unreadable.items():  # the source saw no committed position: its figure is not one
        out = [lag for lag in out if lag.dataset != dataset]
        out.append(unmeasured(dataset, _scrub(f"the committed state cannot be read: {exc}", job)))
    out += [unmeasured(d, "no longer among the source's datasets (its state is kept)") for d in known
            if d not in measured and d not in committed.unreadable]
    return sorted(out, key=lambda lag: lag.dataset)


def _each(datasets: Iterable[str], error: str) -> list[DatasetLag]:
    return [unmeasured(d, error) for d in datasets] or [unmeasured("*", error)]


def _secrets(job: JobSpec) -> list[str]:
    """The values of the environment variables the source's settings name (`password_env`, …): never in a message."""
    names: list[str] = []

    def walk(value: Any, key: str = "") -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, str(k))
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif isinstance(value, str) and key.endswith("_env"):
            names.append(value)

    settings = job.source.settings
    walk(settings.model_dump(mode="json") if hasattr(settings, "model_dump") else {})
    return [v for v in (os.environ.get(n) for n in names) if v]


def _scrub(text: str, job: JobSpec) -> str:
    for secret in _secrets(job):
        text = text.replace(secret, "***")
    return text


def _scrubbed(lag: DatasetLag, job: JobSpec) -> DatasetLag:
    if lag.error is None:
        return lag
    return DatasetLag(lag.dataset, lag.records, lag.seconds, lag.bytes, lag.files, lag.unit, lag.partitions,
                      _scrub(lag.error, job))


class LagCache:
    """Lag measured at most once per `ttl_s` per job, for whatever asks often (a Prometheus scrape, a web page): a
    scrape never hammers the brokers. Jobs are measured in parallel, each within `timeout_s`."""

    def __init__(self, ttl_s: float = 30.0, timeout_s: float = 5.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s, self.timeout_s, self.clock = ttl_s, timeout_s, clock
        self._lock = threading.Lock()
        self._held: dict[str, tuple[float, list[DatasetLag]]] = {}

    def get(self, jobs: list[JobSpec]) -> dict[str, list[DatasetLag]]:
        """Each job's lag (by job name), measured now where the last measurement is older than `ttl_s`."""
        now = self.clock()
        with self._lock:
            stale = [j for j in jobs if j.name not in self._held or now - self._held[j.name][0] >= self.ttl_s]
        if stale:
            results: dict[str, list[DatasetLag]] = {}
            threads = [threading.Thread(target=lambda j=j: results.__setitem__(j.name, measure_lag(j, self.timeout_s)),
                                        daemon=True) for j in stale]
            for t in threads:
                t.start()
            for t in threads:
                t.join(self.timeout_s + 2 * GRACE_S)
            with self._lock:
                for name, lags in results.items():
                    self._held[name] = (now, lags)
        with self._lock:
            return {j.name: list(self._held[j.name][1]) for j in jobs if j.name in self._held}
