"""MySQL/MariaDB job files for the tests (the output reader is the PostgreSQL tests')."""

from __future__ import annotations

from pathlib import Path
from typing import Any

PASSWORD_ENV = "GOBBLIN_TEST_MYSQL_PASSWORD"


def mysql_job(tmp: Path, maria: Any, db: str, tables: list[dict[str, Any]], **source: Any) -> dict[str, Any]:
    """A job extracting `tables` of `db` into Avro under tmp/output, one task per sub-range, in-process friendly."""
    return {
        "job": {"name": "j", "work_dir": str(tmp / "work"), "max_task_retries": 0},
        "source": {"class": "jdbc", "url": maria.url(db), "password_env": PASSWORD_ENV, "tables": tables, **source},
        "writer": {"class": "avro", "codec": "deflate"},
        "publisher": {"final_dir": str(tmp / "output")},
        "spark": {"master": "local[2]"},
    }
