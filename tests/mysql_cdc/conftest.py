"""A real MariaDB writing a row-based binlog (log_bin, binlog_format ROW, binlog_row_image and binlog_row_metadata
FULL) on a free 127.0.0.1 port for the session (skipped, saying what to install, where there is none), and a fresh
database per test."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from jdbc_mysql.mariadb_server import INSTALL_HINT, PASSWORD, binaries
from mysql_cdc.mysql_cdc_jobs import PASSWORD_ENV


@pytest.fixture(scope="session")
def binlog_maria() -> Iterator[Any]:
    """The server, stopped and its directory deleted after the session."""
    if binaries() is None:
        pytest.skip(f"needs a MariaDB server binary (mariadbd or mysqld) and mariadb-install-db: {INSTALL_HINT}")
    pytest.importorskip("pymysql", reason="needs PyMySQL (pip install -e '.[test]')")
    pytest.importorskip("pymysqlreplication", reason="needs mysql-replication (pip install -e '.[test]')")
    from jdbc_mysql.mariadb_server import LocalMariaDB

    os.environ[PASSWORD_ENV] = PASSWORD  # the CLI children inherit it
    with LocalMariaDB(binlog=True) as server:
        yield server


@pytest.fixture
def mdb(binlog_maria: Any) -> str:
    """A fresh database: tests never share tables."""
    return binlog_maria.create_database(f"c_{uuid.uuid4().hex[:12]}")
