"""The `fs` publisher: each task output file goes to `<final_dir>/<rel_path>` — renamed where the filesystem
renames atomically, else copied, verified by checksum, and its source deleted."""

from __future__ import annotations

from pydantic import Field

from gobblin_py.api import CommitStep, DataPublisher, OutputFile, Settings
from gobblin_py.fs.publish_steps import publish_step
from gobblin_py.fs.paths import FsLocation


class FsPublisherSettings(Settings):
    final_dir: FsLocation = Field(description="where datasets are published, <final_dir>/<dataset>/...: a path or a URL (s3://bucket/events)")


class FsPublisher(DataPublisher):
    """Publishes to any filesystem (local, `hdfs://`, `s3://` …); exactly-once with the commit store."""

    Settings = FsPublisherSettings

    def commit_steps(self, dataset: str, files: list[OutputFile]) -> list[CommitStep]:
        final = self.settings.final_dir
        return [publish_step(f.path, final / f.rel_path, f.size, f.checksum) for f in files]
