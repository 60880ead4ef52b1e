"""GlobalCommitStep: the step that runs a publisher's GlobalCommitter for one dataset of one run. It holds the
publisher's class and settings and the committables, so the store alone can replay it anywhere."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from gobblin_py.api.commit_step import CommitStep
from gobblin_py.api.committer import Committer, DatasetCommit, GlobalCommitter
from gobblin_py.api.secrets import secret_paths
from gobblin_py.api.types import WatermarkValue
from gobblin_py.api.writer import OutputFile
from gobblin_py.errors import ConfigError
from gobblin_py.plugins import Kind, resolve


@dataclass
class GlobalCommitStep(CommitStep):
    """`verify()` is `is_committed(dataset, commit_id)`; `execute()` commits what `filter_recovered` keeps."""

    type_name: ClassVar[str] = "global_commit"

    publisher: str                      # `module:Class` of the publisher
    settings: dict[str, Any]            # its settings, as JSON
    job: str
    run_id: str
    dataset: str
    commit_id: str
    files: list[dict[str, Any]] = field(default_factory=list)
    watermarks: dict[str, WatermarkValue] = field(default_factory=dict)
    watermark_keys: int | None = None   # absent from records written before it: unknown
    source_state: dict[str, Any] = field(default_factory=dict)  # absent from records written before it: none
    pinned: dict[str, Any] = field(default_factory=dict)  # absent from records written before it: none
    epoch: int | None = None  # the lease's epoch when the record was built; absent from records written before it

    @classmethod
    def of(cls, publisher: Committer, commit: DatasetCommit) -> GlobalCommitStep:
        """The step of `commit`; a ConfigError, nothing written, when the publisher's settings hold a secret (the job
        loader refuses those: this keeps a publisher made another way from writing one into the record)."""
        kind = type(publisher)
        settings = publisher.settings.model_dump(mode="json")
        secrets = [path for path, _ in secret_paths(settings)]
        if secrets:
            raise ConfigError(f"{kind.__qualname__} settings {', '.join(secrets)} hold a secret, which would be written "
                              "into the commit record; give it to the publisher through its environment")
        return cls(publisher=f"{kind.__module__}:{kind.__qualname__}", settings=settings,
                   job=commit.job, run_id=commit.run_id, dataset=commit.dataset, commit_id=commit.commit_id,
                   files=[dataclasses.asdict(f) for f in commit.files], watermarks=dict(commit.watermarks),
                   watermark_keys=commit.watermark_keys, source_state=dict(commit.source_state),
                   pinned=dict(commit.pinned), epoch=commit.epoch)

    def _committer(self) -> GlobalCommitter:
        kind = resolve(Kind.PUBLISHER, self.publisher)
        committer = kind(kind.Settings.model_validate(self.settings))
        assert isinstance(committer, GlobalCommitter), f"{self.publisher} is not a GlobalCommitter"
        return committer

    def _commit(self) -> DatasetCommit:
        return DatasetCommit(job=self.job, run_id=self.run_id, dataset=self.dataset, commit_id=self.commit_id,
                             files=tuple(OutputFile(**f) for f in self.files), watermarks=dict(self.watermarks),
                             watermark_keys=self.watermark_keys, source_state=dict(self.source_state),
                             pinned=dict(self.pinned), epoch=self.epoch)

    def verify(self) -> bool:
        return self._committer().is_committed(self._commit())

    def execute(self) -> None:
        committer = self._committer()
        committer.commit(committer.filter_recovered(self._commit()))

    def describe(self) -> str:
        return f"global commit {self.commit_id} of {len(self.files)} file(s) of dataset {self.dataset} by {self.publisher}"

    def paths(self) -> list[str]:
        """The committables' task output paths; where the commit itself writes is the publisher's `output_roots()`."""
        return [f["path"] for f in self.files]
