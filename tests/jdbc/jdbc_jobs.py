"""JDBC job files and output readers for the tests and the benchmark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
