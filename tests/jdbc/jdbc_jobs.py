"""JDBC job files, runs and output readers for the tests and the benchmark."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gobblin_py.runtime.job_result import JobResult

PASSWORD_ENV = "GOBBLIN_TEST_PG_PASSWORD"


def jdbc_job(tmp: Path, pg: Any, db: str, tables: list[dict[str, Any]], **source: Any) -> dict[str, Any]:
    """A job extracting `tables` of `db` into Avro under tmp/output, one task per sub-range, in-process friendly."""
    return {
        "job": {"name": "j", "work_dir": str(tmp / "work"), "max_task_retries": 0},
        "source": {"class": "jdbc", "url": pg.url(db), "password_env": PASSWORD_ENV, "tables": tables, **source},
        "writer": {"class": "avro", "codec": "deflate"},
        "publisher": {"final_dir": str(tmp / "output")},
        "spark": {"master": "local[2]"},
    }


def read_output(output: Path, dataset: str) -> list[dict[str, Any]]:
    """Every record of the dataset's published Avro files, read with fastavro."""
    import fastavro

    out: list[dict[str, Any]] = []
    for path in sorted((output / dataset).rglob("*.avro")):
        with open(path, "rb") as f:
            out.extend(fastavro.reader(f))
    return out


def read_with_apache_avro(output: Path) -> tuple[list[dict[str, Any]], Any]:
    """Every record under `output` and the last file's schema, read with the Apache `avro` package (not fastavro)."""
    from avro.datafile import DataFileReader
    from avro.io import DatumReader

    rows: list[dict[str, Any]] = []
    schema = None
    for path in sorted(output.rglob("*.avro")):
        with DataFileReader(open(path, "rb"), DatumReader()) as reader:
            schema = reader.schema
            rows.extend(reader)
    return rows, schema


def run_both_paths(tmp: Path, make_job: Callable[[Path], dict[str, Any]], dataset: str,
                   reader: str = "rows", suffix: str = ".avro") -> tuple[dict[bool, JobResult], dict[bool, dict[str, bytes]]]:
    """Run in-process the job `make_job(folder)` gives, with `job.columnar` on (reading with `source.reader`) and off,
    each in a folder of its own under `tmp`: per setting, the succeeded JobResult and the dataset's published files
    (path → bytes)."""
    from support.jobs import write_job

    from gobblin_py.config import load_job
    from gobblin_py.runtime.executors.in_process import InProcessExecutor
    from gobblin_py.runtime.runner import JobRunner

    results: dict[bool, JobResult] = {}
    outputs: dict[bool, dict[str, bytes]] = {}
    for columnar in (True, False):
        folder = tmp / ("columnar" if columnar else "rows")
        folder.mkdir()
        job = make_job(folder)
        job["job"]["columnar"] = columnar
        job["source"]["reader"] = reader if columnar else "rows"
        results[columnar] = JobRunner(load_job(write_job(folder, job)), InProcessExecutor()).run()
        assert results[columnar].succeeded, results[columnar].error
        out = folder / "output" / dataset
        outputs[columnar] = {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob(f"*{suffix}"))}
    return results, outputs


def run_job(tmp: Path, job: dict[str, Any], secret: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """`gobblin-py run job.yaml --in-process` in a child process: its exit code and output, which never hold a
    traceback or `secret` (the database password)."""
    from support.jobs import run_cli, write_job

    write_job(tmp, job)
    done = run_cli("run", "job.yaml", "--in-process", cwd=tmp, env=env)
    text = done.stdout + done.stderr
    assert "Traceback" not in text and secret not in text
    return done.returncode, text
