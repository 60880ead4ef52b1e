"""CONTRIBUTING's "How a new source is written": the page's own code passes the conformance suite and runs as a job."""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from gobblin_py.config import load_job
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import JobRunner
from gobblin_py.testing.conformance import check_source
from gobblin_py.testing.outputs import read_avro_dir

PAGE = Path(__file__).resolve().parents[2] / "CONTRIBUTING.md"


def _page_code() -> str:
    section = PAGE.read_text().split("## How a new source is written", 1)[1].split("\n## ", 1)[0]
    [code] = re.findall(r"```python\n(.*?)```", section, re.S)
    return code


@pytest.fixture
def counter_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "counter_source.py").write_text(_page_code())
    monkeypatch.syspath_prepend(str(plugins))
    sys.modules.pop("counter_source", None)
    import counter_source

    yield counter_source
    sys.modules.pop("counter_source", None)


def test_the_pages_toy_source_is_about_sixty_lines() -> None:
    assert len(_page_code().splitlines()) <= 60


def test_the_pages_toy_source_passes_the_conformance_suite(counter_source, tmp_path: Path) -> None:
    records = check_source(counter_source.CounterSource, {"upto": 25, "per_unit": 10},
                           expected_records=[{"n": n} for n in range(25)], tmp_dir=tmp_path / "conformance")
    assert sorted(r["n"] for r in records) == list(range(25))


def test_the_pages_toy_source_runs_as_a_job_and_each_count_is_published_once(counter_source, tmp_path: Path) -> None:
    def run(upto: int) -> None:
        job = {"job": {"name": "counter", "work_dir": str(tmp_path / "work")},
               "source": {"class": "counter_source:CounterSource", "upto": upto, "per_unit": 10},
               "writer": {"class": "avro"}, "publisher": {"final_dir": str(tmp_path / "output")}}
        path = tmp_path / "job.yaml"
        path.write_text(yaml.safe_dump(job))
        result = JobRunner(load_job(path), InProcessExecutor()).run()
        assert result.succeeded, result.error

    run(25)
    assert Counter(r["n"] for r in read_avro_dir(tmp_path / "output")) == Counter(range(25))
    run(40)  # the next run reads on from the committed watermark
    assert Counter(r["n"] for r in read_avro_dir(tmp_path / "output")) == Counter(range(40))
