"""A driver frozen inside an Iceberg commit on a PostgreSQL SQL catalog must not hold the next driver's commit for good.

CDC soak seed 1612506852: a driver's commit thread was inside pyiceberg's commit (the table's row of
`iceberg_tables` locked `FOR UPDATE`) when another thread froze the process at a commit point; the driver that took
the job over waited on that row lock until the soak gave up, 300 s later. Our catalog sessions now end on the server
once idle inside a transaction for `IDLE_IN_TRANSACTION_S`, which rolls the frozen one back and frees the row.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from gobblin_py.builtin.publishers.iceberg import catalog as iceberg_catalog


@pytest.fixture(scope="module")
def pg() -> Any:
    from gobblin_py.demo.pg_server import LocalPostgres

    with LocalPostgres() as server:
        yield server


def test_a_session_frozen_holding_the_tables_row_does_not_block_the_next_commit(
        pg: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sqlalchemy import text
    from sqlalchemy.orm import Session

    from gobblin_py.demo.pg_server import PASSWORD, USER

    monkeypatch.setattr(iceberg_catalog, "IDLE_IN_TRANSACTION_S", 2, raising=False)  # before the fix: absent
    db = pg.create_database("frozen_catalog")
    uri = pg.url(db).replace("postgresql://", "postgresql+psycopg://").replace(f"//{USER}@", f"//{USER}:{PASSWORD}@")
    catalog = iceberg_catalog.load_catalog({"name": "frozen", "type": "sql", "uri": uri, "warehouse": f"file://{tmp_path}"})
    catalog.create_namespace("db")
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
    table = catalog.create_table("db.t", schema=data.schema)

    holding, release = threading.Event(), threading.Event()

    def frozen_driver() -> None:  # our own catalog session, idle inside a transaction that locked the table's row
        with Session(catalog.engine) as session:
            session.execute(text("SELECT * FROM iceberg_tables FOR UPDATE"))
            holding.set()
            release.wait(120)
            try:
                session.commit()
            except Exception:  # noqa: BLE001 - the server ended the session: what it should do
                pass

    committed = threading.Event()

    def next_driver() -> None:
        table.append(data)
        committed.set()

    frozen = threading.Thread(target=frozen_driver, daemon=True)
    frozen.start()
    assert holding.wait(30)
    nxt = threading.Thread(target=next_driver, daemon=True)
    nxt.start()
    try:
        assert committed.wait(90), "the next commit waited on the frozen session's row lock"
    finally:
        release.set()
        frozen.join(30)
        nxt.join(30)
    assert catalog.load_table("db.t").scan().to_arrow().column("id").to_pylist() == [1, 2, 3]
