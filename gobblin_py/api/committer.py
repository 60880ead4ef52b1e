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


class Committer(Plugin, abc.ABC):
    """Publishes task output per dataset (a job file's `publisher:`, Gobblin's DataPublisher), as steps that the
    commit layer logs and replays: each step's `verify()` says whether it is done, so a replay never repeats one."""

    guarantee: typing.ClassVar[Delivery] = Delivery.EXACTLY_ONCE
    step_types: typing.ClassVar[tuple[type[CommitStep], ...]] = ()
    """Commit step classes this publisher creates beyond the built-ins, so the store can load them."""

    @abc.abstractmethod
    def commit_steps(self, dataset: str, files: list[OutputFile]) -> list[CommitStep]:
        """The steps that publish `files` of `dataset` (this publisher's branch only); each must be idempotent."""

    def output_roots(self) -> list[str]:
        """Hook: the directories (paths or URLs) this publisher's steps write under; a commit record naming a
        path elsewhere is refused as tampered. Default: the `final_dir` setting, where the publisher has one."""
        final = getattr(self.settings, "final_dir", None)
        return [str(final)] if final is not None else []


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

    def filter_recovered(self, commit: DatasetCommit) -> DatasetCommit:
        """Hook, Flink's `filterRecoveredCommittables`: on a replay after a crash, the commit with only the files a
        partly done commit still lacks (it must still mark `commit_id` done). Default: all of them, for an atomic commit."""
        return commit
