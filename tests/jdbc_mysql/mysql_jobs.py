"""MySQL/MariaDB job files for the tests: the PostgreSQL tests' job, with this server's password variable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jdbc.jdbc_jobs import jdbc_job

PASSWORD_ENV = "GOBBLIN_TEST_MYSQL_PASSWORD"


def mysql_job(tmp: Path, maria: Any, db: str, tables: list[dict[str, Any]], **source: Any) -> dict[str, Any]:
    """A job extracting `tables` of `db` (on `maria`, a mariadb:// url) into Avro under tmp/output."""
    return jdbc_job(tmp, maria, db, tables, **{"password_env": PASSWORD_ENV, **source})
