"""The job event log: one JSON line per event under `<work_dir>/events/<job>.jsonl`, shaped like
Gobblin's tracking events (name, namespace, timestamp, metadata)."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import orjson

NAMESPACE = "gobblin_py.runtime"

log = logging.getLogger(__name__)


class EventLog:
    """Appends events for one job; each line is written whole (one write call, O_APPEND).

    Events report a run, they never stop one: an event that cannot be written (a full or read-only work directory)
    is dropped, and the log says so once, naming the file and the fault, then again when writing works again."""

    def __init__(self, work_dir: Path, job: str) -> None:
        self.path = work_dir / "events" / f"{job}.jsonl"
        self.job = job
        self.run_id = ""
        self.dropped = 0  # events not written since the last one that was

    def emit(self, name: str, **metadata: Any) -> None:
        event = {"name": name, "namespace": NAMESPACE, "timestamp": int(time.time() * 1000),
                 "metadata": {"job": self.job, "run_id": self.run_id, **metadata}}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "ab") as f:
                f.write(orjson.dumps(event, option=orjson.OPT_APPEND_NEWLINE, default=str))
        except OSError as exc:
            if not self.dropped:
                log.error("event log %s: cannot append (%s); events are dropped until it can", self.path,
                          exc.strerror or exc)
            self.dropped += 1
            return
        if self.dropped:
            log.warning("event log %s: written again; %d events were dropped", self.path, self.dropped)
            self.dropped = 0

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [orjson.loads(line) for line in self.path.read_bytes().splitlines() if line.strip()]

    # RunObserver
    def job_started(self, job: str, run_id: str) -> None:
        self.run_id = run_id
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
