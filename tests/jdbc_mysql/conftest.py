"""A real MariaDB on a free 127.0.0.1 port for the session (skipped, saying what to install, where there is none),
a fresh database per test, and MySQL job files."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from jdbc_mysql.mariadb_server import INSTALL_HINT, PASSWORD, binaries
from jdbc_mysql.mysql_jobs import PASSWORD_ENV


@pytest.fixture(scope="session")
def maria() -> Iterator[Any]:
    """The server (install-db + start ≈ 4 s), stopped and its directory deleted after the session."""
    if binaries() is None:
        pytest.skip(f"needs a MariaDB server binary (mariadbd or mysqld) and mariadb-install-db: {INSTALL_HINT}")
    pytest.importorskip("pymysql", reason="needs PyMySQL (pip install -e '.[test]')")
    from jdbc_mysql.mariadb_server import LocalMariaDB

    os.environ[PASSWORD_ENV] = PASSWORD  # the CLI children inherit it
    with LocalMariaDB() as server:
        yield server


@pytest.fixture
def mdb(maria: Any) -> str:
    """A fresh database: tests never share tables."""
    return maria.create_database(f"t_{uuid.uuid4().hex[:12]}")
