"""Typed splits: a source's work units carry a split of its declared type, checked before any task runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.jobs import example_job, write_job

from gobblin_py.api import Split, SplitMismatch, WorkUnit
from gobblin_py.config import load_job
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import JobRunner


class Pages(Split):
    url: str
    pages: list[int]


def _unit(split: dict) -> WorkUnit:
    return WorkUnit(id="wu-1", dataset="site", watermark_key="k", low_watermark=None, expected_high_watermark=1, split=split)


def test_a_split_goes_into_the_work_unit_and_comes_back_typed_and_equal() -> None:
    split = Pages(url="https://example.invalid/a", pages=[1, 2])
    assert Pages.of(_unit(split.packed())) == split
    with pytest.raises(ValueError):  # pydantic: "Instance is frozen"
        split.url = "changed"  # type: ignore[misc]  # frozen: a task cannot change what the plan decided


@pytest.mark.parametrize(("packed", "says"), [
    ({}, "work unit 'wu-1' of dataset 'site': it carries no Pages"),
    ({"type": "Other", "version": 1, "fields": {}}, "its split is a 'Other', not a Pages"),
    ({"type": "Pages", "version": 2, "fields": {"url": "u", "pages": []}}, "version 2; this build reads version 1 only"),
    ({"type": "Pages", "version": 1, "fields": {"url": "u"}}, "field 'pages': Field required"),
    ({"type": "Pages", "version": 1, "fields": {"url": "u", "pages": ["x"]}}, "field 'pages.0'"),
    ({"type": "Pages", "version": 1, "fields": {"url": "u", "pages": [], "extra": 1}}, "field 'extra'"),
])
def test_a_split_that_does_not_fit_names_the_work_unit_and_the_field(packed: dict, says: str) -> None:
    with pytest.raises(SplitMismatch, match=None) as raised:
        Pages.of(_unit(packed))
    assert says in str(raised.value)


PLUGIN = '''
import dataclasses
from gobblin_py.builtin.sources.files.source import FilesSource


class Misnaming(FilesSource):
    """The files source planning its splits with the field `file` misspelt."""

    def get_workunits(self, state):
        return [dataclasses.replace(wu, split={**wu.split, "fields": {("flie" if k == "file" else k): v
                                                                      for k, v in wu.split["fields"].items()}})
                for wu in super().get_workunits(state)]
'''


def test_a_source_planning_a_misnamed_split_field_fails_the_plan_naming_it_and_nothing_runs(tmp_path: Path,
                                                                                          monkeypatch) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "misnaming_source.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(plugins))
    job = example_job(tmp_path)
    job["source"]["class"] = "misnaming_source:Misnaming"
    result = JobRunner(load_job(write_job(tmp_path, job)), InProcessExecutor()).run()
    assert not result.succeeded
    assert "source source (misnaming_source:Misnaming) planned a work unit whose split does not fit FileSplit" in result.error
    assert "field 'file': Field required" in result.error and "field 'flie': Extra inputs are not permitted" in result.error
    assert not (tmp_path / "output").exists()
    assert not [p for p in (tmp_path / "work").rglob("*.avro")]
