"""A custom publisher declares where it writes (`output_roots`); its steps are confined there and nowhere else."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.jobs import example_job, write_job

from gobblin_py.config import load_job
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import JobRunner
from gobblin_py.testing.outputs import read_avro_dir

PLUGIN = '''
from gobblin_py.api import DataPublisher, Settings
from gobblin_py.commit.steps import publish_step
from gobblin_py.fs.paths import FsLocation


class TargetSettings(Settings):
    target: FsLocation


class TargetPublisher(DataPublisher):
    """Publishes under `target` (not `final_dir`)."""

    Settings = TargetSettings

    def commit_steps(self, dataset, files):
        return [publish_step(f.path, self.settings.target / f.rel_path, f.size, f.checksum) for f in files]


class DeclaringPublisher(TargetPublisher):
    def output_roots(self):
        return [self.settings.target]
'''


@pytest.mark.parametrize(("cls", "declared"), [("DeclaringPublisher", True), ("TargetPublisher", False)])
def test_a_publisher_writes_only_under_the_roots_it_declares(tmp_path: Path, monkeypatch, cls: str, declared: bool) -> None:
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / f"targets_{cls}.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path / "plugins"))
    job = example_job(tmp_path, publisher={"class": f"targets_{cls}:{cls}", "target": str(tmp_path / "lake")})
    result = JobRunner(load_job(write_job(tmp_path, job)), InProcessExecutor()).run()
    if declared:
        assert result.succeeded, result.error
        assert len([r for r in read_avro_dir(tmp_path / "lake")]) == 2998
    else:  # not declared: refused as tampered before anything is published
        assert not result.succeeded and "outside the job's directories" in result.error
        assert not (tmp_path / "lake").exists()
