"""The `fs` publisher: each task output file is renamed into `<final_dir>/<rel_path>`."""

from __future__ import annotations

from gobblin_py.api import CommitStep, DataPublisher, OutputFile, Settings
from gobblin_py.commit.steps import FsRenameCommitStep
from gobblin_py.config.paths import AbsPath


class FsPublisherSettings(Settings):
    final_dir: AbsPath


class FsPublisher(DataPublisher):
    """Publishes by atomic rename on the same filesystem; exactly-once with the commit store."""

    Settings = FsPublisherSettings

    def commit_steps(self, dataset: str, files: list[OutputFile]) -> list[CommitStep]:
        final = self.settings.final_dir
        return [FsRenameCommitStep(src=f.path, dst=str(final / f.rel_path), size=f.size, checksum=f.checksum) for f in files]
