"""CommitStepStore: the write-ahead log of commit sequences, one record per (job, dataset).

Records live in `<work_dir>/commits/<job>/<dataset>.json` (a local directory or an object store), written durably with a format
version and checksum. Step types load only from the registered classes, never by a name
found in the file, and every path a step names must lie under the job's own directories
(the store's `Confinement`), checked when a record is written and when it is loaded.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from gobblin_py import checked_json
from gobblin_py.api.commit_step import CommitStep
from gobblin_py.commit.confinement import Confinement
from gobblin_py.commit.global_step import GlobalCommitStep
from gobblin_py.commit.sequence import CommitSequence, Fault
from gobblin_py.commit.steps import BUILTIN_STEPS
from gobblin_py.crashpoints import crash_point
from gobblin_py.errors import CorruptCommitRecordError, LeaseLostError
from gobblin_py.fs.location import Location
from gobblin_py.fs.records import read_record, record_files
from gobblin_py.state.lease import Fence
from gobblin_py.state.store import dataset_file_name, dataset_from_file_name


class StepRegistry:
    """The step classes a store may instantiate: the built-ins plus those the job's plugins declare."""

    def __init__(self, extra: Iterable[type[CommitStep]] = ()) -> None:
        self._types: dict[str, type[CommitStep]] = {}
        for cls in (*BUILTIN_STEPS, GlobalCommitStep, *extra):
            self._types[cls.type_name] = cls

    def types(self) -> list[type[CommitStep]]:
        return list(self._types.values())

    def name_of(self, step: CommitStep) -> str:
        name = type(step).type_name
        if self._types.get(name) is not type(step):
            raise CorruptCommitRecordError(f"step class {type(step).__qualname__} is not registered; declare it in the publisher's step_types")
        return name

    def load(self, name: str, args: dict, where: str | Path) -> CommitStep:
        cls = self._types.get(name)
        if cls is None:
            raise CorruptCommitRecordError(
                f"commit record {where} names step type {name!r}, which is not registered "
                f"(known: {', '.join(sorted(self._types))}); it was not applied"
            )
        try:
            return cls.from_dict(args)
        except TypeError as exc:
            raise CorruptCommitRecordError(f"commit record {where}: bad arguments for step {name!r}: {exc}; it was not applied") from None


class CommitStepStore:
    """On-disk commit sequences of the jobs under one work directory.

    `confinement`: where steps may read and write (`confinement.job_confinement(job)` for a job); by default
    the work directory alone. `fence`: the lease a run holds, checked before a record is written and before each
    step executes (None: no lease, as in tests of the protocol alone).
    """

    def __init__(self, work_dir: str | Path, registry: StepRegistry | None = None, confinement: Confinement | None = None,
                 fence: Fence | None = None) -> None:
        self.work_dir = work_dir
        self.fence = fence
        self.files = record_files(Location(work_dir) / "commits")
        self.registry = registry or StepRegistry()
        self.confinement = confinement if confinement is not None else Confinement.of([str(work_dir)])

    @staticmethod
    def _key(job: str, dataset: str) -> str:
        return f"{job}/{dataset_file_name(dataset)}"

    def where(self, job: str, dataset: str) -> str:
        """Where the dataset's record is: a path, or a URL on an object store (for messages)."""
        return self.files.locate(self._key(job, dataset))

    def path(self, job: str, dataset: str) -> Path:
        """The record's local path (a local work directory only: tests and tools that read the file itself)."""
        return Path(self.where(job, dataset))

    def put(self, seq: CommitSequence, new: bool = False) -> None:
        """Write (or rewrite) the sequence's record durably; CorruptCommitRecordError, nothing written, when a
        step names a path outside the job's directories (a plugin's bad output path, a dataset named `../x`);
        LeaseLostError, nothing written, when the run lost the job's lease (the record is its new holder's). A `new`
        record is checked against the lease again once written: a driver frozen while writing it, whose lease was
        taken over meanwhile, removes it again (the new holder's recovery may already have run, and would find it
        only at its next run, after committing the same range itself)."""
        self.confinement.check(seq.steps, f"commit sequence of dataset {seq.dataset!r}")
        if self.fence is not None:
            self.fence.check()
        key = self._key(seq.job, seq.dataset)
        self.files.put(key, self._encode(seq), midway=lambda: crash_point("commit.store_write_midway"))
        if new and self.fence is not None:
            try:
                self.fence.check()
            except LeaseLostError:
                self.files.delete(key)
                raise

    def put_many(self, seqs: list[CommitSequence]) -> dict[str, str]:
        """Write new records of several datasets in one durable batch (local: one round of fsyncs for all, see
        `durable.atomic_write_many`; each record is its own file, so recovery replays each dataset on its own as ever).
        The datasets refused (a step naming a path outside the job's directories), with why: nothing written for
        them. LeaseLostError, nothing left written, when the run lost the job's lease (checked before and after, as
        `put(new=True)` does)."""
        refused: dict[str, str] = {}
        items: list[tuple[str, bytes]] = []
        for seq in seqs:
            try:
                self.confinement.check(seq.steps, f"commit sequence of dataset {seq.dataset!r}")
                items.append((self._key(seq.job, seq.dataset), self._encode(seq)))
            except CorruptCommitRecordError as exc:
                refused[seq.dataset] = str(exc)
        if not items:
            return refused
        if self.fence is not None:
            self.fence.check()
        self.files.put_many(items, midway=lambda: crash_point("commit.store_write_midway"),
                            between=lambda: crash_point("commit.store_batch_midway"))
        if self.fence is not None:
            try:
                self.fence.check()
            except LeaseLostError:
                self.files.delete_many([key for key, _ in items])
                raise
        return refused

    def _encode(self, seq: CommitSequence) -> bytes:
        """The record's bytes: the sequence, the lease's epoch, each step by its registered type name."""
        body = {
            "job": seq.job, "dataset": seq.dataset, "run_id": seq.run_id, "created": seq.created,
            "attempts": seq.attempts, "last_error": seq.last_error, "failed_step": seq.failed_step,
            "last_attempt": seq.last_attempt, "fault": seq.fault.value if seq.fault is not None else None,
            "meta": seq.meta, "epoch": self.fence.epoch if self.fence is not None else None,
            "steps": [{"type": self.registry.name_of(s), "args": s.to_dict()} for s in seq.steps],
        }
        return checked_json.encode(body)

    def get(self, job: str, dataset: str) -> CommitSequence:
        path = self.where(job, dataset)
        found = read_record(self.files, self._key(job, dataset), CorruptCommitRecordError, "commit record")
        if found is None:
            raise CorruptCommitRecordError(f"commit record {path}: cannot read: it is gone (removed meanwhile?); "
                                           "it was not applied")
        body = found[0]
        try:
            steps = [self.registry.load(s["type"], s["args"], path) for s in body["steps"]]
            self.confinement.check(steps, f"commit record {path}")
            fault = body.get("fault")
            return CommitSequence(
                job=body["job"], dataset=body["dataset"], run_id=body["run_id"], steps=steps,
                created=body["created"], attempts=body["attempts"], last_error=body.get("last_error"),
                failed_step=body.get("failed_step"), last_attempt=body.get("last_attempt"),
                fault=Fault(fault) if fault is not None else None, meta=body.get("meta") or {},
            )
        except (KeyError, TypeError) as exc:
            raise CorruptCommitRecordError(f"commit record {path} lacks {exc}; it was not applied") from None
        except ValueError as exc:  # an unknown fault kind
            raise CorruptCommitRecordError(f"commit record {path}: {exc}; it was not applied") from None

    def exists(self, job: str, dataset: str) -> bool:
        return self.files.get(self._key(job, dataset)) is not None

    def remove(self, job: str, dataset: str) -> bool:
        """Delete the dataset's record; False when it was already gone."""
        key = self._key(job, dataset)
        if self.files.get(key) is None:
            return False
        self.files.delete(key)
        return True

    def remove_many(self, job: str, datasets: list[str]) -> None:
        """Delete the records of several datasets of `job` in one durable batch (their directory fsynced once)."""
        self.files.delete_many([self._key(job, d) for d in datasets])

    def datasets(self, job: str) -> list[str]:
        """Datasets of `job` with a pending record (readable or not)."""
        return sorted(dataset_from_file_name(n) for n in self.files.names(job) if n.endswith(".json"))

    def jobs(self) -> list[str]:
        return self.files.folders("")
