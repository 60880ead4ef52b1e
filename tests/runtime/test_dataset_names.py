"""A Source plugin cannot publish outside final_dir by naming a dataset (or a work unit) like a path."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.jobs import example_job, write_job

from gobblin_py.config import load_job
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import JobRunner

PLUGIN = '''
from gobblin_py.builtin.sources.files.source import FilesSource
from gobblin_py.api import WorkUnit


class Renaming(FilesSource):
    """The files source with every dataset (or work unit id) renamed to NAME."""

    NAME = {name!r}
    FIELD = {field!r}

    def get_workunits(self, state):
        out = []
        for wu in super().get_workunits(state):
            values = {{"id": wu.id, "dataset": wu.dataset, "watermark_key": wu.watermark_key, "low_watermark": wu.low_watermark,
                      "expected_high_watermark": wu.expected_high_watermark, "props": wu.props, "split": wu.split}}
            values[self.FIELD] = self.NAME
            out.append(WorkUnit(**values))
        return out
'''


@pytest.mark.parametrize(("field", "name"), [("dataset", "../../escaped"), ("dataset", ".."), ("dataset", "a/b"),
                                             ("id", "../../escaped")])
def test_a_dataset_or_workunit_named_like_a_path_is_refused_and_nothing_is_written(tmp_path: Path, monkeypatch,
                                                                                   field: str, name: str) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    module = f"renaming_{field}_{abs(hash(name))}"
    (plugins / f"{module}.py").write_text(PLUGIN.format(name=name, field=field))
    monkeypatch.syspath_prepend(str(plugins))
    job = example_job(tmp_path)
    job["source"]["class"] = f"{module}:Renaming"
    result = JobRunner(load_job(write_job(tmp_path, job)), InProcessExecutor()).run()
    assert not result.succeeded
    assert f"source source ({module}:Renaming) planned work unit" in result.error and "one path component" in result.error
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "output").exists()
    assert not [p for p in (tmp_path / "work").rglob("*") if p.is_file() and p.suffix == ".avro"]
