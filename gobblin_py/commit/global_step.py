"""GlobalCommitStep: the step that runs a publisher's GlobalCommitter for one dataset of one run. It holds the
publisher's class and settings and the committables, so the store alone can replay it anywhere."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from gobblin_py.api.commit_step import CommitStep
from gobblin_py.api.committer import Committer, GlobalCommitter
from gobblin_py.api.writer import OutputFile
from gobblin_py.plugins import Kind, resolve


@dataclass
class GlobalCommitStep(CommitStep):
    """`verify()` is `is_committed(dataset, commit_id)`; `execute()` commits what `filter_recovered` keeps."""

    type_name: ClassVar[str] = "global_commit"

    publisher: str                      # `module:Class` of the publisher
    settings: dict[str, Any]            # its settings, as JSON
    dataset: str
    commit_id: str
    files: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def of(cls, publisher: Committer, dataset: str, commit_id: str, files: list[OutputFile]) -> GlobalCommitStep:
        kind = type(publisher)
        return cls(publisher=f"{kind.__module__}:{kind.__qualname__}", settings=publisher.settings.model_dump(mode="json"),
                   dataset=dataset, commit_id=commit_id, files=[dataclasses.asdict(f) for f in files])

    def _committer(self) -> GlobalCommitter:
        kind = resolve(Kind.PUBLISHER, self.publisher)
        committer = kind(kind.Settings.model_validate(self.settings))
        assert isinstance(committer, GlobalCommitter), f"{self.publisher} is not a GlobalCommitter"
        return committer

    def _files(self) -> list[OutputFile]:
        return [OutputFile(**f) for f in self.files]

    def verify(self) -> bool:
        return self._committer().is_committed(self.dataset, self.commit_id)

    def execute(self) -> None:
        committer = self._committer()
        committer.commit(self.dataset, self.commit_id, committer.filter_recovered(self.dataset, self.commit_id, self._files()))

    def describe(self) -> str:
        return f"global commit {self.commit_id} of {len(self.files)} file(s) of dataset {self.dataset} by {self.publisher}"

    def paths(self) -> list[str]:
        """The committables' task output paths; where the commit itself writes is the publisher's `output_roots()`."""
        return [f["path"] for f in self.files]
