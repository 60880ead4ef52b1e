"""A command's start: a run that finds nothing new, `status` and `history` import none of the heavy libraries a run
that stays in the driver without data never uses (Spark, Arrow, the table formats, numpy, croniter, SMTP), so what
they cost is their own work, not a second of imports (issue 47: a no-data run over 50,000 committed files ≤ 1 s)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.jobs import example_job, write_job

from gobblin_py.testing.crash import cli

HEAVY = ("pyspark", "py4j", "pyarrow", "pyiceberg", "deltalake", "numpy", "pandas", "polars", "duckdb", "croniter",
         "sqlalchemy", "confluent_kafka", "connectorx", "fsspec", "smtplib", "ssl")
IMPORTED = """
import runpy, sys
sys.argv = ["gobblin-py", *sys.argv[1:]]
try:
    runpy.run_module("gobblin_py.cli.main", run_name="__main__")
except SystemExit as exc:
    code = exc.code
print("IMPORTED", sorted(m for m in HEAVY if m in sys.modules), "EXIT", code)
"""


def _imported(args: list[str], cwd: Path) -> str:
    done = subprocess.run([sys.executable, "-c", f"HEAVY = {HEAVY!r}\n{IMPORTED}", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)
    return next(line for line in done.stdout.splitlines() if line.startswith("IMPORTED"))


@pytest.mark.parametrize("args", [["run", "job.yaml"], ["status", "job.yaml", "--json"], ["history", "list", "job.yaml"],
                                  ["state", "show", "job.yaml"]])
def test_a_command_without_data_imports_no_heavy_library(tmp_path: Path, args: list[str]) -> None:
    write_job(tmp_path, example_job(tmp_path, writer={"class": "parquet"}))
    first = cli(["run", "job.yaml"], tmp_path)
    assert first.returncode == 0, first.stderr
    assert _imported(args, tmp_path) == "IMPORTED [] EXIT 0"
