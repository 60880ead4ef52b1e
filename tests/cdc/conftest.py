"""A real PostgreSQL 16 with logical decoding (wal_level=logical) on a free 127.0.0.1 port for the session, a fresh
database per test, and postgres_cdc job files."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cdc.cdc_jobs import PASSWORD_ENV

LOGICAL = {"wal_level": "logical", "max_replication_slots": 20, "max_wal_senders": 20}


@pytest.fixture(scope="session")
def pg() -> Iterator[Any]:
    """The server (initdb + start ≈ 3 s), stopped and deleted after the session."""
    pytest.importorskip("pgserver", reason="needs pgserver (pip install -e '.[test]')")
    pytest.importorskip("psycopg", reason="needs psycopg (pip install -e '.[test]')")
    from gobblin_py.demo.pg_server import PASSWORD, LocalPostgres

    os.environ[PASSWORD_ENV] = PASSWORD  # the CLI children inherit it
    with LocalPostgres(LOGICAL) as server:
        yield server


@pytest.fixture
def db(pg: Any) -> Iterator[str]:
    """A fresh database (tests never share tables); its slots are dropped afterwards (a slot keeps its database)."""
    name = pg.create_database(f"t_{uuid.uuid4().hex[:12]}")
    yield name
    with pg.connect(name) as conn:
        for (slot,) in conn.execute("SELECT slot_name FROM pg_replication_slots WHERE database = %s", (name,)).fetchall():
            conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here needs the PostgreSQL server: `-m "not postgres"` leaves them out."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.postgres)
