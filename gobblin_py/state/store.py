"""The JSON state store under `<work_dir>/state/<job>/`: watermarks, dataset states, run history.

Every file is a checksummed record written durably; one file per dataset so that committing
one dataset never rewrites another's state.
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Any

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

    def __init__(self, state_dir: Path, dataset: str) -> None:
        self.path = state_dir / "watermarks" / dataset_file_name(dataset)
        self.dataset = dataset

    def read(self) -> dict[str, WatermarkValue]:
        if not self.path.exists():
            return {}
        return dict(checked_json.read(self.path, StateStoreError, "watermark file")["watermarks"])

    def write(self, watermarks: dict[str, WatermarkValue]) -> None:
        checked_json.write(self.path, {"dataset": self.dataset, "watermarks": watermarks})


class DatasetStateFile:
    """The state one dataset had after its last committed run."""

    def __init__(self, state_dir: Path, dataset: str) -> None:
        self.path = state_dir / "datasets" / dataset_file_name(dataset)

    def read(self) -> dict[str, Any] | None:
        if not self.path.exists():
            return None
        return checked_json.read(self.path, StateStoreError, "dataset state file")

    def write(self, state: dict[str, Any]) -> None:
        checked_json.write(self.path, state)


class StateStore:
    """One job's state: read at the start of a run, and its run history written at the end."""

    def __init__(self, work_dir: Path, job: str) -> None:
        self.dir = work_dir / "state" / job

    def watermarks(self) -> dict[str, dict[str, WatermarkValue]]:
        """Every dataset's committed watermarks."""
        out: dict[str, dict[str, WatermarkValue]] = {}
        wm_dir = self.dir / "watermarks"
        if wm_dir.is_dir():
            for path in sorted(wm_dir.glob("*.json")):
                dataset = dataset_from_file_name(path.name)
                out[dataset] = WatermarkFile(self.dir, dataset).read()
        return out

    def dataset_state(self, dataset: str) -> dict[str, Any] | None:
        return DatasetStateFile(self.dir, dataset).read()

    def dataset_states(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        ds_dir = self.dir / "datasets"
        if ds_dir.is_dir():
            for path in sorted(ds_dir.glob("*.json")):
                dataset = dataset_from_file_name(path.name)
                state = DatasetStateFile(self.dir, dataset).read()
                if state is not None:
                    out[dataset] = state
        return out

    def write_run(self, run: dict[str, Any], retention: int) -> Path:
        """Persist one run's job and task states; keep only the last `retention` runs."""
        path = self.dir / "runs" / f"{run['run_id']}.json"
        checked_json.write(path, run)
        runs = sorted((self.dir / "runs").glob("*.json"))
        for old in runs[:-retention]:
            remove_durably(old)
        return path

    def runs(self) -> list[dict[str, Any]]:
        """Every kept run, oldest first (run ids sort by start time)."""
        run_dir = self.dir / "runs"
        if not run_dir.is_dir():
            return []
        return [checked_json.read(p, StateStoreError, "run state file") for p in sorted(run_dir.glob("*.json"))]
