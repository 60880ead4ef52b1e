"""postgres_cdc job files, runs and output readers for the tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

PASSWORD_ENV = "GOBBLIN_TEST_PG_PASSWORD"


def cdc_job(tmp: Path, pg: Any, db: str, **source: Any) -> dict[str, Any]:
    """A job capturing publication `pub` through slot `s1` of `db` into Avro under tmp/output."""
    return {
        "job": {"name": "c", "work_dir": str(tmp / "work"), "max_task_retries": 0},
        "source": {"class": "postgres_cdc", "url": pg.url(db), "password_env": PASSWORD_ENV, "slot": "s1",
                   "publication": "pub", **source},
        "writer": {"class": "avro", "codec": "deflate"},
        "publisher": {"final_dir": str(tmp / "output")},
        "spark": {"master": "local[2]"},
    }


def read_changes(output: Path, dataset: str) -> list[dict[str, Any]]:
    """Every change record of `dataset` under `output`, read with the Apache `avro` package, in (_lsn, _seq) order."""
    from avro.datafile import DataFileReader
    from avro.io import DatumReader

    rows: list[dict[str, Any]] = []
    for path in sorted((output / dataset).rglob("*.avro")):
        with DataFileReader(open(path, "rb"), DatumReader()) as reader:
            rows.extend(reader)
    return sorted(rows, key=lambda r: (r["_lsn"], r["_seq"]))


def run(tmp: Path, job: dict[str, Any]) -> Any:
    """The job run in-process (tasks in the driver); its JobResult."""
    from support.jobs import write_job

    from gobblin_py.config import load_job
    from gobblin_py.runtime.executors.in_process import InProcessExecutor
    from gobblin_py.runtime.runner import JobRunner

    return JobRunner(load_job(write_job(tmp, job)), InProcessExecutor()).run()


def slot_position(conn: Any, slot: str = "s1") -> int:
    from gobblin_py.builtin.sources.postgres_cdc.settings import lsn_int

    return lsn_int(conn.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s",
                                (slot,)).fetchone()[0])
