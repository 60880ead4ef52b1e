"""mysql_cdc job files, runs and output readers for the tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

PASSWORD_ENV = "GOBBLIN_TEST_MYSQL_PASSWORD"


def cdc_job(tmp: Path, maria: Any, db: str, tables: list[str], **source: Any) -> dict[str, Any]:
    """A job capturing `tables` (names in `db`) into Avro change files under tmp/output."""
    return {
        "job": {"name": "c", "work_dir": str(tmp / "work"), "max_task_retries": 0},
        "source": {"class": "mysql_cdc", "url": maria.url(db, "mysql"), "password_env": PASSWORD_ENV,
                   "tables": [f"{db}.{t}" for t in tables], **source},
        "writer": {"class": "avro", "codec": "deflate"},
        "publisher": {"final_dir": str(tmp / "output")},
        "spark": {"master": "local[2]"},
    }


def upsert_job(tmp: Path, maria: Any, db: str, table: str, key: list[str], **source: Any) -> dict[str, Any]:
    """The same job into an Iceberg table kept equal to `table` by key (Parquet files, pyiceberg's SQL catalog)."""
    job = cdc_job(tmp, maria, db, [table], **source)
    job["writer"] = {"class": "parquet"}
    job["publisher"] = {"class": "iceberg", "table": f"db.{table}", "warehouse": str(tmp / "warehouse"),
                        "mode": "upsert", "key": key, "order_by": ["_pos", "_seq"],
                        "delete_when": {"column": "_op", "equals": ["delete"]},
                        "truncate_when": {"column": "_op", "equals": ["truncate"]}}
    return job


def read_changes(output: Path, dataset: str) -> list[dict[str, Any]]:
    """Every change record of `dataset` under `output`, read with the Apache `avro` package, in (_pos, _seq) order."""
    from avro.datafile import DataFileReader
    from avro.io import DatumReader

    rows: list[dict[str, Any]] = []
    for path in sorted((output / dataset).rglob("*.avro")):
        with DataFileReader(open(path, "rb"), DatumReader()) as reader:
            rows.extend(reader)
    return sorted(rows, key=lambda r: (r["_pos"], r["_seq"]))


def replay(rows: list[dict[str, Any]], key: str, value: str) -> dict[Any, Any]:
    """The table an upsert of the change records in (_pos, _seq) order gives: key → value."""
    table: dict[Any, Any] = {}
    for r in rows:
        if r["_op"] == "truncate":
            table.clear()
        elif r["_op"] == "delete":
            table.pop(r[key], None)
        else:
            table[r[key]] = r[value]
    return table


def run(tmp: Path, job: dict[str, Any]) -> Any:
    """The job run in-process (tasks in the driver); its JobResult."""
    from support.jobs import write_job

    from gobblin_py.config import load_job
    from gobblin_py.runtime.executors.in_process import InProcessExecutor
    from gobblin_py.runtime.runner import JobRunner

    return JobRunner(load_job(write_job(tmp, job)), InProcessExecutor()).run()
