"""A real PostgreSQL 16 on a free 127.0.0.1 port for the session, a fresh database per test, and JDBC job files."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jdbc.jdbc_jobs import PASSWORD_ENV


@pytest.fixture(scope="session")
def pg() -> Iterator[Any]:
    """The server (initdb + start ≈ 3 s), stopped and deleted after the session."""
    pytest.importorskip("pgserver", reason="needs pgserver (pip install -e '.[test]')")
    pytest.importorskip("psycopg", reason="needs psycopg (pip install -e '.[test]')")
    from gobblin_py.demo.pg_server import PASSWORD, LocalPostgres

    os.environ[PASSWORD_ENV] = PASSWORD  # the CLI children inherit it
    with LocalPostgres() as server:
        yield server


@pytest.fixture
def db(pg: Any) -> str:
    """A fresh database: tests never share tables."""
    return pg.create_database(f"t_{uuid.uuid4().hex[:12]}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here needs the PostgreSQL server: `-m "not postgres"` leaves them out."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.postgres)
