"""The JSON state store under `<work_dir>/state/<job>/`: watermarks, dataset states, run history.

Every file is a checksummed record written durably (`fs.records`: a local directory or an object store); one file
per dataset so that committing one dataset never rewrites another's state. A commit step writes a dataset's records
at the epoch of the job's lease its driver holds (`writing_at`), and never over a record a later epoch wrote: a driver
that checked its lease, paused, and woke after another took over and committed would otherwise put its older state
back, and no conditional write could stop it (it reads the files as they are once it wakes).
"""

from __future__ import annotations

import contextlib
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from gobblin_py import checked_json
from gobblin_py.api.commit_step import WRITING_EPOCH
from gobblin_py.api.types import WatermarkValue
from gobblin_py.errors import LeaseLostError, StateStoreError
from gobblin_py.fs.conditional import Conflict
from gobblin_py.fs.location import Location
from gobblin_py.fs.records import LocalRecordFiles, numbered_versions, read_record, record_files


def dataset_file_name(dataset: str) -> str:
    """A file name for a dataset URN, reversible with `dataset_from_file_name`."""
    return urllib.parse.quote(dataset, safe="") + ".json"


def dataset_from_file_name(name: str) -> str:
    return urllib.parse.unquote(name.removesuffix(".json"))


EPOCH_KEY = "lease_epoch"
"""The key of a state record that names the lease epoch whose commit step wrote it (absent: written without a lease)."""


@contextlib.contextmanager
def writing_at(epoch: int | None) -> Iterator[None]:
    """State records replaced inside are written at the lease's `epoch` (None: no lease, no check), and refused over
    one a later epoch wrote (`_StateRecord.replace`), as numbered versions in a local directory (`numbered_versions`:
    a writer frozen between its check and its write cannot win later); the commit protocol runs a sequence's steps
    inside."""
    token = WRITING_EPOCH.set(epoch)
    try:
        with numbered_versions() if epoch is not None else contextlib.nullcontext():
            yield
    finally:
        WRITING_EPOCH.reset(token)


def _epoch_in(data: bytes) -> int | None:
    """The lease epoch a record's raw bytes name; None when absent or unreadable (a torn record is simply rewritten)."""
    try:
        value = checked_json.decode(data, "", StateStoreError, "state record").get(EPOCH_KEY)
    except StateStoreError:
        return None
    return value if isinstance(value, int) else None


class _StateRecord:
    """One checksummed record of a dataset's state, at `<state location>/<sub>/<dataset>.json`."""

    def __init__(self, state_dir: str | Path, key: str) -> None:
        self.files = record_files(state_dir)
        self.key = key

    @property
    def path(self) -> Path | str:
        """Where the record is: a local path, or a URL on an object store."""
        where = self.files.locate(self.key)
        return Path(where) if isinstance(self.files, LocalRecordFiles) else where

    def exists(self) -> bool:
        return self.files.get(self.key) is not None

    def remove(self) -> None:
        """Delete the record (nothing when absent)."""
        self.files.delete(self.key)

    def _read(self, what: str, then: str) -> tuple[dict[str, Any], str] | None:
        return read_record(self.files, self.key, StateStoreError, what, then)

    def _write(self, body: dict[str, Any]) -> None:
        self.files.put(self.key, checked_json.encode(body))

    def version(self) -> str | None:
        """The record's version as it stands (None: absent), for `replace`; read even when its body is unsound."""
        found = self.files.get(self.key)
        return None if found is None else found.version

    def replace(self, body: dict[str, Any], version: str | None) -> None:
        """Write the record only if it still holds `version` (None: only if absent); Conflict when another writer
        moved it on meanwhile (on an object store, refused by the store itself). Inside `writing_at(E)` the record
        names epoch E, and one that names a later epoch is not written over (LeaseLostError): its version is the one
        read, so no conditional write would stop this driver."""
        epoch = WRITING_EPOCH.get()
        if epoch is not None:
            found = self.files.get(self.key) if version is not None else None
            later = _epoch_in(found.data) if found is not None and found.version == version else None
            if later is not None and later > epoch:
                raise LeaseLostError(f"{self.path} was written at epoch {later} of the job's lease, after this "
                                     f"driver's epoch {epoch}: this driver lost the lease to another that committed "
                                     "since; it writes nothing, and commits nothing more")
            body = {**body, EPOCH_KEY: epoch}
        data = checked_json.encode(body)
        if version is None:
            self.files.create(self.key, data)
        else:
            self.files.swap(self.key, data, version)


class WatermarkFile(_StateRecord):
    """The committed watermarks of one dataset: `{key: value}`."""

    REMEDY = ("the dataset is not extracted until it is restored from a backup or its watermarks are set with "
              "`gobblin-py state reset JOB.yaml --dataset {dataset}`")

    def __init__(self, state_dir: str | Path, dataset: str) -> None:
        super().__init__(state_dir, "watermarks/" + dataset_file_name(dataset))
        self.dataset = dataset

    def read(self) -> dict[str, WatermarkValue]:
        return self.read_versioned()[0]

    def read_versioned(self) -> tuple[dict[str, WatermarkValue], str | None]:
        """The watermarks and the version they were read at (None: no file yet), in one read, for `replace`."""
        found = self._read("watermark file", self.REMEDY.format(dataset=self.dataset))
        if found is None:
            return {}, None
        body, version = found
        if not isinstance(body.get("watermarks"), dict):
            raise StateStoreError(f"watermark file {self.path} has no watermarks; {self.REMEDY.format(dataset=self.dataset)}")
        return dict(body["watermarks"]), version

    def write(self, watermarks: dict[str, WatermarkValue]) -> None:
        self._write(self.body(watermarks))

    def body(self, watermarks: dict[str, WatermarkValue]) -> dict[str, Any]:
        return {"dataset": self.dataset, "watermarks": watermarks}


class DatasetStateFile(_StateRecord):
    """The state one dataset had after its last committed run, with the identities its Source checks before reading."""

    REMEDY = ("it holds what the source checks before reading (a Kafka topic's id), so the dataset is skipped: restore "
              "the file, or delete it to go on without those checks for one run (its next commit records them afresh)")

    def __init__(self, state_dir: str | Path, dataset: str) -> None:
        super().__init__(state_dir, "datasets/" + dataset_file_name(dataset))

    def read(self) -> dict[str, Any] | None:
        found = self._read("dataset state file", self.REMEDY)
        return None if found is None else found[0]

    def write(self, state: dict[str, Any]) -> None:
        self._write(self.body(state))

    def body(self, state: dict[str, Any]) -> dict[str, Any]:
        """The record that holds `state`."""
        return state


class CompactionFile(_StateRecord):
    """The last compaction of one partition of a dataset (which run, files and records in and out), one file per
    partition so that partitions committed side by side never rewrite each other's, and beside the dataset's
    state so that an ingestion's state never overwrites it."""

    def __init__(self, state_dir: str | Path, dataset: str, partition: str) -> None:
        super().__init__(state_dir, "compactions/" + dataset_file_name(dataset).removesuffix(".json") + "/"
                         + dataset_file_name(partition))
        self.dataset, self.partition = dataset, partition

    def read(self) -> dict[str, Any] | None:
        found = self._read("compaction state file", "the next compaction of the partition rewrites it")
        return None if found is None else found[0]

    def write(self, entry: dict[str, Any]) -> None:
        self._write(self.body(entry))

    def body(self, entry: dict[str, Any]) -> dict[str, Any]:
        return {**entry, "partition": self.partition}


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
    """One job's state, at `<work_dir>/state/<job>/` (a local directory or an object store's prefix): read at the
    start of a run, and its run history written at the end."""

    def __init__(self, work_dir: str | Path, job: str) -> None:
        self.dir = Location(work_dir) / "state" / job
        self.files = record_files(self.dir)

    def _datasets(self, sub: str) -> list[str]:
        return [dataset_from_file_name(n) for n in self.files.names(sub) if n.endswith(".json")]

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

    def _run_keys(self) -> list[str]:
        return ["runs/" + n for n in self.files.names("runs") if n.endswith(".json")]

    def _read_run(self, key: str) -> dict[str, Any] | None:
        found = read_record(self.files, key, StateStoreError, "run state file", "history cannot show it")
        return None if found is None else found[0]

    def write_run(self, run: dict[str, Any], retention: int) -> str:
        """Persist one run's job and task states; keep only the last `retention` runs. Where it was written."""
        key = f"runs/{run['run_id']}.json"
        self.files.put(key, checked_json.encode(run))
        for old in self._run_keys()[:-retention]:
            self.files.delete(old)
        return self.files.locate(key)

    def end_unfinished_run(self, found_by: str) -> str | None:
        """The newest run record, when it still says `running` (a continuous run whose process died: SIGKILL, a lost
        machine), rewritten as `killed`; its id, or None. Call it only holding the job lock: no run of the job is
        live then, and every earlier record was already checked by the run after it."""
        keys = self._run_keys()
        if not keys:
            return None
        try:
            found = read_record(self.files, keys[-1], StateStoreError, "run state file")
        except StateStoreError:
            return None  # `history` names the unreadable record
        if found is None or found[0].get("status") != "running":
            return None
        run, version = found
        run["status"] = "killed"
        run["error"] = f"the run's process ended without finishing it (killed, or its machine lost); found by run {found_by}"
        try:
            self.files.swap(keys[-1], checked_json.encode(run), version)
        except Conflict:
            return None  # its run wrote it meanwhile: it was not dead (another host's, before its lease expired)
        return str(run.get("run_id"))

    def last_run(self) -> dict[str, Any] | None:
        """The newest kept run record of a run that ended (run ids sort by start time; a record saying `running` is
        a run under way, this one's own included, or killed); None before the first."""
        for key in reversed(self._run_keys()):
            run = self._read_run(key)
            if run is not None and run.get("status") != "running":
                return run
        return None

    def runs(self) -> list[dict[str, Any]]:
        """Every kept run, oldest first (run ids sort by start time)."""
        return [run for key in self._run_keys() if (run := self._read_run(key)) is not None]
