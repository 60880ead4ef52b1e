"""DataPublisher: the committer that turns a dataset's committables into CommitSteps."""

from __future__ import annotations

import abc
import typing

from gobblin_py.api.commit_step import CommitStep
from gobblin_py.api.plugin import Plugin
from gobblin_py.api.writer import Delivery, OutputFile


class DataPublisher(Plugin, abc.ABC):
    """Publishes task output per dataset, as steps that the commit layer logs and replays."""

    guarantee: typing.ClassVar[Delivery] = Delivery.EXACTLY_ONCE
    step_types: typing.ClassVar[tuple[type[CommitStep], ...]] = ()
    """Commit step classes this publisher creates beyond the built-ins, so the store can load them."""

    @abc.abstractmethod
    def commit_steps(self, dataset: str, files: list[OutputFile]) -> list[CommitStep]:
        """The steps that publish `files` of `dataset`; each must be idempotent."""

    def output_roots(self) -> list[str]:
        """Hook: the directories (paths or URLs) this publisher's steps write under; a commit record naming a
        path elsewhere is refused as tampered. Default: the `final_dir` setting, where the publisher has one."""
        final = getattr(self.settings, "final_dir", None)
        return [str(final)] if final is not None else []
