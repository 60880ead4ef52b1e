"""The job event log, shaped like Gobblin's tracking events (name, namespace, timestamp, metadata): one JSON line per
event in `<work_dir>/events/<job>.jsonl`, or, in a work directory on an object store (which cannot append), in objects
`<work_dir>/events/<job>/<time>-<nonce>.jsonl` of the events since the last, written at each commit and at the end."""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path
from typing import Any

import orjson

from gobblin_py.errors import StateStoreError
from gobblin_py.fs.conditional import Conflict
from gobblin_py.fs.location import Location
from gobblin_py.fs.records import RecordFiles, record_files

NAMESPACE = "gobblin_py.runtime"
FLUSHED_AFTER = frozenset({"DatasetCommitted", "DatasetNotCommitted", "JobSucceeded", "JobFailed", "JobCancelled",
                           "LockInUse", "LeaseTakenOver", "WatermarkReset"})
"""Events after which an object store's buffered events are written at once (a run's outcomes)."""

log = logging.getLogger(__name__)


class EventLog:
    """Appends events for one job; each line is written whole (one write call, O_APPEND).

    Events report a run, they never stop one: an event that cannot be written (a full or read-only work directory)
    is dropped, and the log says so once, naming the file and the fault, then again when writing works again."""

    FLUSH_EVERY = 500
    """Events buffered at most before an object store's chunk is written."""
    ROTATE_BYTES = 16 * 1024 * 1024
    """A local log past this size at a run's start is rotated (`<job>.jsonl.1`, …); `KEEP_ROTATED` of them are kept."""
    KEEP_ROTATED = 3
    KEEP_CHUNKS = 2000
    """An object store's log keeps its newest chunks, at most this many (one or a few are written per commit)."""

    def __init__(self, work_dir: str | Path, job: str) -> None:
        where = Location(work_dir)
        self.store: RecordFiles | None = None if where.is_local else record_files(where / "events" / job)
        self.path: Path | None = where.path / "events" / f"{job}.jsonl" if where.is_local else None
        self.where = str(self.path) if self.path is not None else str(where / "events" / job)
        self.job = job
        self.run_id = ""
        self.dropped = 0  # events not written since the last one that was
        self._buffer: list[bytes] = []

    def emit(self, name: str, **metadata: Any) -> None:
        event = {"name": name, "namespace": NAMESPACE, "timestamp": int(time.time() * 1000),
                 "metadata": {"job": self.job, "run_id": self.run_id, **metadata}}
        line = orjson.dumps(event, option=orjson.OPT_APPEND_NEWLINE, default=str)
        if self.path is None:
            self._buffer.append(line)
            if name in FLUSHED_AFTER or len(self._buffer) >= self.FLUSH_EVERY:
                self.flush()
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "ab") as f:
                f.write(line)
        except OSError as exc:
            self._dropping(1, exc.strerror or str(exc))
            return
        self._written()

    def flush(self) -> None:
        """Write the buffered events to the object store as one chunk (nothing for a local log, written at once)."""
        if self.store is None or not self._buffer:
            return
        chunk, self._buffer = b"".join(self._buffer), []
        key = f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{time.time_ns() % 10**9:09d}-{uuid.uuid4().hex[:8]}.jsonl"
        try:
            self.store.create(key, chunk)
        except (StateStoreError, Conflict) as exc:
            self._dropping(chunk.count(b"\n"), str(exc))
            return
        self._written()

    def _dropping(self, events: int, why: str) -> None:
        if not self.dropped:
            log.error("event log %s: cannot %s (%s); events are dropped until it can", self.where,
                      "append" if self.store is None else "write", why)
        self.dropped += events

    def _written(self) -> None:
        if self.dropped:
            log.warning("event log %s: written again; %d events were dropped", self.where, self.dropped)
            self.dropped = 0

    def rotate(self) -> None:
        """Bound the log (called at a run's start): a local log past `ROTATE_BYTES` becomes `<job>.jsonl.1`, the older
        ones shifted and the oldest past `KEEP_ROTATED` dropped; an object store's oldest chunks past `KEEP_CHUNKS`
        are deleted. Events report runs, so a failure here is logged and the run goes on."""
        try:
            if self.path is not None:
                if not self.path.exists() or self.path.stat().st_size <= self.ROTATE_BYTES:
                    return
                for n in range(self.KEEP_ROTATED, 0, -1):
                    older = self.path.with_name(f"{self.path.name}.{n}")
                    if older.exists():
                        if n == self.KEEP_ROTATED:
                            older.unlink()
                        else:
                            older.replace(self.path.with_name(f"{self.path.name}.{n + 1}"))
                self.path.replace(self.path.with_name(f"{self.path.name}.1"))
            elif self.store is not None:
                names = sorted(self.store.names(""))
                for name in names[:max(0, len(names) - self.KEEP_CHUNKS)]:
                    self.store.delete(name)
        except (OSError, StateStoreError) as exc:
            log.warning("event log %s: cannot rotate (%s); it grows until it can", self.where, exc)

    def read(self) -> list[dict[str, Any]]:
        """Every event kept (the rotated local files too), oldest first."""
        if self.store is not None:
            chunks = [self.store.get(name) for name in sorted(self.store.names(""))]
            raw = b"".join(c.data for c in chunks if c is not None)
        elif self.path is not None:
            files = [self.path.with_name(f"{self.path.name}.{n}") for n in range(self.KEEP_ROTATED, 0, -1)] + [self.path]
            raw = b"".join(f.read_bytes() for f in files if f.exists())
        else:
            return []
        return [orjson.loads(line) for line in raw.splitlines() if line.strip()]

    # RunObserver
    def job_started(self, job: str, run_id: str) -> None:
        self.run_id = run_id
        self.rotate()
        self.emit("JobStarted")

    def workunits_created(self, workunits: int, tasks: int, datasets: list[str]) -> None:
        self.emit("WorkUnitsCreated", workunits=workunits, tasks=tasks, datasets=datasets)

    def task_finished(self, result: Any) -> None:
        self.emit("TaskFinished", workunit=result.workunit.id, dataset=result.workunit.dataset, status=result.status.value,
                  attempts=result.attempts, records_extracted=result.records_extracted,
                  records_written=result.records_written, error=result.error)

    def dataset_committed(self, summary: Any) -> None:
        self.emit("DatasetCommitted" if summary.status.value.startswith("committed") else "DatasetNotCommitted",
                  dataset=summary.dataset, status=summary.status.value, records_written=summary.records_written,
                  files_published=summary.files_published, watermark=summary.watermark, message=summary.message)

    def job_finished(self, result: Any) -> None:
        name = "JobCancelled" if result.cancelled else "JobSucceeded" if result.succeeded else "JobFailed"
        self.emit(name, duration_s=round(result.duration_s, 3),
                  error=result.error)
        self.flush()
