"""The sink contract's commit side (Flink FLIP-143's shape): a `Committer` turns each committable a writer handed
over into idempotent CommitSteps; an optional `GlobalCommitter` then makes all of a dataset's committables of
one run visible as one commit (a table snapshot, a catalog registration, a manifest), before the watermarks move."""

from __future__ import annotations

import abc
import typing
from dataclasses import dataclass, field

from gobblin_py.api.commit_step import CommitStep
from gobblin_py.api.plugin import Plugin
from gobblin_py.api.types import WatermarkValue
from gobblin_py.api.writer import Delivery, OutputFile


@dataclass(frozen=True)
class PublishContext:
    """What a publisher learns of its job when the job file is loaded (for `Committer.complete_settings`)."""

    job: str
    work_dir: str
    spark_master: str
    commit_on_executors_from: int | None
    writer: type
    """The branch's DataWriter class."""
    writer_name: str
    """Its `class:` as the job file gives it (an alias or a dotted path)."""
    writer_settings: typing.Any
    publisher_key: str
    """Where the publisher is in the job file (`publisher`, `fork.branches[1].publisher`), for problems' keys."""
    writer_key: str
    work_store: str | None = None
    """`job.work_store`: the job's records on an object store, shared by drivers on many hosts (None: work_dir)."""


@dataclass(frozen=True)
class Claimant:
    """The work directory a run publishes from (`Committer.claim`): its id, made once and kept in the directory, and
    where it is, for messages."""

    work_dir_id: str
    work_dir: str
    host: str


class Committer(Plugin, abc.ABC):
    """Publishes task output per dataset (a job file's `publisher:`, Gobblin's DataPublisher), as steps that the
    commit layer logs and replays: each step's `verify()` says whether it is done, so a replay never repeats one."""

    guarantee: typing.ClassVar[Delivery] = Delivery.EXACTLY_ONCE
    step_types: typing.ClassVar[tuple[type[CommitStep], ...]] = ()
    """Commit step classes this publisher creates beyond the built-ins, so the store can load them."""
    knows_outputs_by_name: typing.ClassVar[bool] = False
    """True where a range read again (after `state reset`) is recognised by its output files' names, which the same
    work units give again (a table that skips the files it already references): the loader then keeps a source from
    packing inputs into outputs named otherwise (`Source.fit_to_publishers`)."""

    @abc.abstractmethod
    def commit_steps(self, dataset: str, files: list[OutputFile]) -> list[CommitStep]:
        """The steps that publish `files` of `dataset` (this publisher's branch only); each must be idempotent."""

    def output_roots(self) -> list[str]:
        """Hook: the directories (paths or URLs) this publisher's steps write under; a commit record naming a
        path elsewhere is refused as tampered. Default: the `final_dir` setting, where the publisher has one."""
        final = getattr(self.settings, "final_dir", None)
        return [str(final)] if final is not None else []

    def claim(self, job: str, claimant: Claimant, make: bool) -> None:
        """Hook: refuse (a GobblinError naming both) a target another work directory publishes this job to. Each work
        directory keeps its own positions, so a second one (another host's) would publish every record again. Called
        before a run reads anything (`make` False: only check), and before it commits (`make` True: record the claim
        if there is none). Default: nothing (a table publisher checks each commit against its own log)."""

    def unapplied_changes(self, markers: typing.Mapping[str, tuple[str, str]]) -> list[tuple[str, str]]:
        """Hook: for a source whose records are changes (`Source.change_markers`: kind → (column, value)), the
        (setting, message) of each kind this publisher would apply as an ordinary row, a row of nulls left where the
        source deleted one; the loader refuses the job. Default: none (appending changes keeps a change log)."""
        return []

    @classmethod
    def complete_settings(cls, settings: typing.Any, context: PublishContext) -> tuple[typing.Any, list[tuple[str, str]]]:
        """Hook, when the job file is loaded: the settings with what the job already says filled in (so a user
        says nothing twice), and the problems found as (job file key, message). Default: as given, none."""
        return settings, []


DataPublisher = Committer
"""Gobblin's name for it."""


@dataclass(frozen=True)
class DatasetCommit:
    """What a GlobalCommitter commits: all committables of one dataset in one run, and the watermarks the run
    commits for it right after (a table sink records them in its snapshot)."""

    job: str
    run_id: str
    dataset: str
    commit_id: str
    """Unique per job, run and dataset, and the same on every replay: what `is_committed` looks for."""
    files: tuple[OutputFile, ...] = ()
    watermarks: dict[str, WatermarkValue] = field(default_factory=dict)
    """This run's watermark keys of the dataset (its other keys keep their committed values)."""
    watermark_keys: int | None = None
    """How many keys the dataset's committed watermarks hold once `watermarks` are merged in (None: unknown), so
    a target recording it can tell whether the watermarks its commits carry add up to the whole (`resume_watermarks`)."""
    source_state: dict[str, typing.Any] = field(default_factory=dict)
    """What this run's work units keep in the dataset's state (`state.<name>` props): the source's schema in effect (a
    registry subject's version and schema id, a table's columns), a topic's identity; a table sink records it beside
    the watermarks, so the table says what its rows were read with."""
    pinned: dict[str, typing.Any] = field(default_factory=dict)
    """What `GlobalCommitter.pin` read of the target for this commit (a table's id, the version it commits as): in the
    commit record, so the same on every replay."""
    epoch: int | None = None
    """The fencing epoch of the job's lease the run held when it built the commit (None: no lease): a table sink
    records it with the commit id, so the table says which driver's turn committed it."""


@dataclass(frozen=True)
class TargetWatermarks:
    """What a target records of a job's last commit of one dataset: its watermarks, and where they were read."""

    watermarks: dict[str, WatermarkValue]
    found_in: str
    """For the run's log: `table db.clicks, snapshot 123 of run … (commit …) committed at …`."""


class GlobalCommitter(abc.ABC):
    """Mixed into a Committer: after its per-file steps, every committable of one dataset in one run becomes one
    commit tagged with `commit.commit_id`, in one commit step that runs before the watermark step. The framework
    stores the class and its settings in the commit record, so recovery (on the driver or an executor) rebuilds
    it and replays: `is_committed` is the step's `verify()`, and `commit` gets only what `filter_recovered`
    keeps. Both must work from the DatasetCommit and the settings alone."""

    @abc.abstractmethod
    def commit(self, commit: DatasetCommit) -> None:
        """Make `commit.files` visible as one commit that `is_committed(commit)` finds afterwards."""

    @abc.abstractmethod
    def is_committed(self, commit: DatasetCommit) -> bool:
        """True when the commit tagged `commit.commit_id` is visible (a crash may have come after it)."""

    def check(self, commit: DatasetCommit) -> None:
        """Hook, before anything of the dataset is published (the files still in task output): raise `CommitError`
        when the commit cannot succeed, e.g. a schema the table cannot take; the dataset fails and nothing moves."""

    def pin(self, commit: DatasetCommit, last: dict[str, typing.Any]) -> dict[str, typing.Any]:
        """Hook, after `check`: what this commit relies on of the target (a table's id, the transaction version it
        commits as), as JSON values. It goes into the commit record (`commit.pinned` on every replay) and, with the
        dataset's state, is `last` at the dataset's next commit, so a target that changed in between (re-created,
        restored to an older version) is found and refused here, naming what changed. Default: nothing."""
        return {}

    def committed_watermarks(self, job: str, datasets: list[str]) -> dict[str, typing.Any]:
        """Hook for `gobblin-py state show`: dataset → what the target itself records of `job`'s last commit of it
        (a table: its newest snapshot's watermarks); datasets it records nothing for are left out."""
        return {}

    def resume_watermarks(self, job: str, datasets: list[str]) -> dict[str, TargetWatermarks]:
        """Hook, before planning, for `datasets` the state store holds nothing of (a new, lost or moved work
        directory): dataset → the watermarks the target recorded with `job`'s last commit of it, which the run
        then resumes from instead of extracting everything again (as the Iceberg Kafka Connect sink recovers its
        offsets from the table). Raise `CommitError` naming the target when it holds the job's data but cannot say
        its watermarks safely. Default: none (the datasets start over)."""
        return {}

    def filter_recovered(self, commit: DatasetCommit) -> DatasetCommit:
        """Hook, Flink's `filterRecoveredCommittables`: on a replay after a crash, the commit with only the files a
        partly done commit still lacks (it must still mark `commit_id` done). Default: all of them, for an atomic commit."""
        return commit


@dataclass(frozen=True)
class TableFile:
    """One file a table's current state lists, as `gobblin-py compact` plans with it (no file is opened)."""

    path: str
    """Its URI, as the table lists it."""
    size: int
    records: int
    partition: str
    """The partition as the table writes it in paths (`ts_day=2026-01-01`; "" for an unpartitioned table)."""
    added_ms: int
    """When the commit that added it was made."""
    data: bool
    """A data file (not a delete file another engine wrote)."""
    current_spec: bool
    """Written under the table's current partitioning."""
    compacted: bool
    """Added by a gobblin-py compaction's commit."""


@dataclass(frozen=True, kw_only=True)
class TableReplace:
    """One table partition's compaction to commit: the files it merged out, the published merged files in."""

    job: str
    run_id: str
    table: str
    commit_id: str
    """Unique per job, run and partition, the same on every replay: what the step's `verify()` looks for."""
    replaced: tuple[str, ...]
    """The merged data files, as the table lists them."""
    added: tuple[str, ...]
    """Where the merged files are published (paths or URLs)."""
    keeps_data: bool
    """The merged files hold exactly the replaced files' records; False after a dedup."""
    record: str
    """The name of the commit record (`<table>/<partition>`), for the message that says to abandon it."""
    counts: dict[str, typing.Any] = field(default_factory=dict)
    """The compaction's counts (partition, files and records in and out), recorded with the commit."""


class TableCompaction(abc.ABC):
    """Mixed into a Committer that publishes to tables: what `gobblin-py compact` needs of it to merge a table
    partition's files (which table a dataset goes to, its live files, where merged files go, the replace commit)."""

    @abc.abstractmethod
    def table_name(self, dataset: str) -> str:
        """Hook: the table `dataset` is published to (several datasets may share one)."""

    @abc.abstractmethod
    def table_files(self, table: str) -> list[TableFile] | None:
        """Hook: every data and delete file `table`'s current state lists; None when the table does not exist (yet)."""

    def changed_since_written(self, table: str) -> str | None:
        """Hook: why `table` cannot take files merged as the job writes them now (another writer renamed or dropped
        one of the job's columns since), naming what changed; None when it can. Its partitions are then left alone."""
        return None

    @abc.abstractmethod
    def compacted_dir(self, dataset: str, partition: str) -> str:
        """Hook: where a compaction publishes the merged files of `dataset`'s table partition `partition` (a path or
        URL under this publisher's output roots)."""

    @abc.abstractmethod
    def replace_step(self, replace: TableReplace) -> CommitStep:
        """Hook: the one idempotent step (a step type in `step_types`) that makes `replace.added` the partition's files
        instead of `replace.replaced` in one commit tagged `replace.commit_id`, so readers see one set or the other."""
