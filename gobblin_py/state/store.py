"""The JSON state store under `<work_dir>/state/<job>/`: watermarks, dataset states, run history.

Every file is a checksummed record written durably; one file per dataset so that committing
one dataset never rewrites another's state.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from gobblin_py import checked_json
from gobblin_py.api.types import WatermarkValue
from gobblin_py.durable import remove_durably
from gobblin_py.errors import StateStoreError


def dataset_file_name(dataset: str) -> str:
    """A file name for a dataset URN, reversible with `dataset_from_file_name`."""
    return urllib.parse.quote(dataset, safe="") + ".json"


def dataset_from_file_name(name: str) -> str:
    return urllib.parse.unquote(name.removesuffix(".json"))


class WatermarkFile:
    """The committed watermarks of one dataset: `{key: value}`."""

    REMEDY = ("the dataset is not extracted until it is restored from a backup or its watermarks are set with "
              "`gobblin-py state reset JOB.yaml --dataset {dataset}`")

    def __init__(self, state_dir: Path, dataset: str) -> None:
        self.path = state_dir / "watermarks" / dataset_file_name(dataset)
        self.dataset = dataset

    def read(self) -> dict[str, WatermarkValue]:
        if not self.path.exists():
            return {}
        body = checked_json.read(self.path, StateStoreError, "watermark file", self.REMEDY.format(dataset=self.dataset))
        if not isinstance(body.get("watermarks"), dict):
            raise StateStoreError(f"watermark file {self.path} has no watermarks; {self.REMEDY.format(dataset=self.dataset)}")
        return dict(body["watermarks"])

    def write(self, watermarks: dict[str, WatermarkValue]) -> None:
        checked_json.write(self.path, {"dataset": self.dataset, "watermarks": watermarks})


class DatasetStateFile:
    """The state one dataset had after its last committed run, with the identities its Source checks before reading."""

    REMEDY = ("it holds what the source checks before reading (a Kafka topic's id), so the dataset is skipped: restore "
              "the file, or delete it to go on without those checks for one run (its next commit records them afresh)")

    def __init__(self, state_dir: Path, dataset: str) -> None:
        self.path = state_dir / "datasets" / dataset_file_name(dataset)

    def read(self) -> dict[str, Any] | None:
        if not self.path.exists():
            return None
        return checked_json.read(self.path, StateStoreError, "dataset state file", self.REMEDY)

    def write(self, state: dict[str, Any]) -> None:
        checked_json.write(self.path, state)


class CompactionFile:
    """The last compaction of one partition of a dataset (which run, files and records in and out), one file per
    partition so that partitions committed side by side never rewrite each other's, and beside the dataset's
    state so that an ingestion's state never overwrites it."""

    def __init__(self, state_dir: Path, dataset: str, partition: str) -> None:
        self.path = state_dir / "compactions" / dataset_file_name(dataset).removesuffix(".json") / dataset_file_name(partition)
        self.dataset, self.partition = dataset, partition

    def read(self) -> dict[str, Any] | None:
        if not self.path.exists():
            return None
        return checked_json.read(self.path, StateStoreError, "compaction state file", "the next compaction of the partition rewrites it")

    def write(self, entry: dict[str, Any]) -> None:
        checked_json.write(self.path, {**entry, "partition": self.partition})


T = TypeVar("T")


@dataclass
class StateRead(Generic[T]):
    """Per-dataset values of one kind of state file, and the datasets whose file is unreadable (the error names it)."""

    values: dict[str, T] = field(default_factory=dict)
    errors: dict[str, StateStoreError] = field(default_factory=dict)

    def or_raise(self) -> dict[str, T]:
        """The values, or the first dataset's error when any file is unreadable."""
        for error in self.errors.values():
            raise error
        return self.values


class StateStore:
    """One job's state: read at the start of a run, and its run history written at the end."""

    def __init__(self, work_dir: Path, job: str) -> None:
        self.dir = work_dir / "state" / job

    def _datasets(self, sub: str) -> list[str]:
        folder = self.dir / sub
        return [dataset_from_file_name(p.name) for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []

    def dataset_names(self) -> list[str]:
        """Datasets with a watermark or dataset-state file, readable or not."""
        return sorted({*self._datasets("watermarks"), *self._datasets("datasets")})

    def read_watermarks(self) -> StateRead[dict[str, WatermarkValue]]:
        """Every dataset's committed watermarks; an unreadable file blocks only its dataset (in `errors`)."""
        read: StateRead[dict[str, WatermarkValue]] = StateRead()
        for dataset in self._datasets("watermarks"):
            try:
                read.values[dataset] = WatermarkFile(self.dir, dataset).read()
            except StateStoreError as exc:
                read.errors[dataset] = exc
        return read

    def read_dataset_states(self) -> StateRead[dict[str, Any]]:
        """Every dataset's last committed state; an unreadable file is reported for its dataset (in `errors`)."""
        read: StateRead[dict[str, Any]] = StateRead()
        for dataset in self._datasets("datasets"):
            try:
                state = DatasetStateFile(self.dir, dataset).read()
            except StateStoreError as exc:
                read.errors[dataset] = exc
                continue
            if state is not None:
                read.values[dataset] = state
        return read

    def watermarks(self) -> dict[str, dict[str, WatermarkValue]]:
        """Every dataset's committed watermarks; StateStoreError when one file is unreadable (see `read_watermarks`)."""
        return self.read_watermarks().or_raise()

    def dataset_state(self, dataset: str) -> dict[str, Any] | None:
        return DatasetStateFile(self.dir, dataset).read()

    def dataset_states(self) -> dict[str, dict[str, Any]]:
        """Every dataset's last state; StateStoreError when one file is unreadable (see `read_dataset_states`)."""
        return self.read_dataset_states().or_raise()

    def write_run(self, run: dict[str, Any], retention: int) -> Path:
        """Persist one run's job and task states; keep only the last `retention` runs."""
        path = self.dir / "runs" / f"{run['run_id']}.json"
        checked_json.write(path, run)
        runs = sorted((self.dir / "runs").glob("*.json"))
        for old in runs[:-retention]:
            remove_durably(old)
        return path

    def end_unfinished_run(self, found_by: str) -> str | None:
        """The newest run record, when it still says `running` (a continuous run whose process died: SIGKILL, a lost
        machine), rewritten as `killed`; its id, or None. Call it only holding the job lock: no run of the job is
        live then, and every earlier record was already checked by the run after it."""
        runs = sorted((self.dir / "runs").glob("*.json")) if (self.dir / "runs").is_dir() else []
        if not runs:
            return None
        try:
            run = checked_json.read(runs[-1], StateStoreError, "run state file")
        except StateStoreError:
            return None  # `history` names the unreadable record
        if run.get("status") != "running":
            return None
        run["status"] = "killed"
        run["error"] = f"the run's process ended without finishing it (killed, or its machine lost); found by run {found_by}"
        checked_json.write(runs[-1], run)
        return str(run.get("run_id"))

    def last_run(self) -> dict[str, Any] | None:
        """The newest kept run record of a run that ended (run ids sort by start time; a record saying `running` is
        a run under way, this one's own included, or killed); None before the first."""
        run_dir = self.dir / "runs"
        for path in sorted(run_dir.glob("*.json"), reverse=True) if run_dir.is_dir() else []:
            run = checked_json.read(path, StateStoreError, "run state file")
            if run.get("status") != "running":
                return run
        return None

    def runs(self) -> list[dict[str, Any]]:
        """Every kept run, oldest first (run ids sort by start time)."""
        run_dir = self.dir / "runs"
        if not run_dir.is_dir():
            return []
        return [checked_json.read(p, StateStoreError, "run state file") for p in sorted(run_dir.glob("*.json"))]
