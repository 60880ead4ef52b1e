"""The parquet writer and the iceberg publisher come with the `tables` extra: without it, a job naming them is
refused at validation saying what to install (README's first command installs only what the example needs)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gobblin_py.config import load_job
from gobblin_py.errors import ConfigError

from support.jobs import example_job, write_job


@pytest.mark.parametrize(("blocked", "settings", "said"), [
    (("pyarrow", "pyarrow.parquet"), {"writer": {"class": "parquet"}},
     "writer: the parquet writer needs pyarrow: pip install 'gobblin-py[tables]'"),
    (("pyiceberg", "pyiceberg.catalog", "pyiceberg.catalog.sql"),
     {"writer": {"class": "parquet"}, "publisher": {"class": "iceberg", "table": "db.{dataset}"}},
     "publisher: the iceberg publisher needs pyiceberg: pip install 'gobblin-py[tables]'"),
])
def test_a_job_needing_the_tables_extra_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             blocked: tuple[str, ...], settings: dict, said: str) -> None:
    for name in blocked:
        monkeypatch.setitem(sys.modules, name, None)  # as if not installed: importing it raises ImportError
    job = example_job(tmp_path, **settings)
    with pytest.raises(ConfigError) as refused:
        load_job(write_job(tmp_path, job))
    assert said in str(refused.value)
