"""The jdbc source keyed by its primary key into an Iceberg table in upsert mode: an updated row replaces its earlier
version instead of being appended, so after each run the table holds each row of the source once, as it is now
(rows deleted upstream excepted: a watermark column cannot see a delete; postgres_cdc can)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from jdbc.jdbc_jobs import jdbc_job
from support.jobs import write_job

from gobblin_py.config import load_job
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import JobRunner

pytest.importorskip("pyiceberg")
duckdb = pytest.importorskip("duckdb")

ORDERS = {"table": "public.orders", "watermark_column": "updated_at", "primary_key": "id"}


def _job(tmp: Path, pg: Any, db: str) -> dict[str, Any]:
    job = jdbc_job(tmp, pg, db, [ORDERS], partitions=3)
    job["writer"] = {"class": "parquet"}
    job["publisher"] = {"class": "iceberg", "table": "db.orders", "warehouse": str(tmp / "warehouse"),
                        "mode": "upsert", "key": ["id"], "order_by": ["updated_at"]}
    return job


def _table_rows(tmp: Path) -> list[tuple]:
    """The table as pyiceberg reads it, and as DuckDB reads the Parquet files its manifests list: (id, note) by id."""
    from pyiceberg.catalog import load_catalog

    catalog = load_catalog("gobblin_py", type="sql", uri=f"sqlite:///{tmp / 'work' / 'iceberg' / 'catalog.db'}")
    table = catalog.load_table("db.orders")
    arrow = table.scan(selected_fields=("id", "note")).to_arrow().sort_by("id")
    rows = list(zip(arrow["id"].to_pylist(), arrow["note"].to_pylist()))
    files = [task.file.file_path.removeprefix("file://") for task in table.scan().plan_files()]
    seen = duckdb.sql(f"SELECT id, note FROM read_parquet({files!r}) ORDER BY id").fetchall()
    assert seen == rows, "DuckDB reads other rows than pyiceberg from the table's live files"
    return rows


def _source_rows(pg: Any, db: str) -> list[tuple]:
    with pg.connect(db) as conn:
        return [tuple(r) for r in conn.execute("SELECT id, note FROM orders ORDER BY id").fetchall()]


def test_updated_rows_replace_their_earlier_version_and_the_table_equals_the_source(tmp_path: Path, pg, db) -> None:
    with pg.connect(db) as conn:
        conn.execute("CREATE TABLE orders (id bigint PRIMARY KEY, amount numeric(12,2) NOT NULL, note text, "
                     "updated_at timestamptz)")
        conn.execute("INSERT INTO orders SELECT i, i * 1.5, 'v1', now() - interval '1 day' + i * interval '1 second' "
                     "FROM generate_series(1, 600) i")
    job = _job(tmp_path, pg, db)

    def run() -> None:
        result = JobRunner(load_job(write_job(tmp_path, job)), InProcessExecutor()).run()
        assert result.succeeded, result.error

    run()
    assert _table_rows(tmp_path) == _source_rows(pg, db)
    with pg.connect(db) as conn:  # updates (one row twice) and inserts between runs
        conn.execute("UPDATE orders SET note = 'v2', updated_at = now() WHERE id % 7 = 0")
        conn.execute("UPDATE orders SET note = 'v3', updated_at = now() WHERE id = 14")
        conn.execute("INSERT INTO orders SELECT i, i, 'new', now() FROM generate_series(601, 650) i")
    run()
    rows = _table_rows(tmp_path)
    assert rows == _source_rows(pg, db)
    assert len({r[0] for r in rows}) == len(rows) == 650, "a key holds two rows: an update was appended"
    assert dict(rows)[14] == "v3" and dict(rows)[21] == "v2"
    run()  # nothing new: the table stays as it is
    assert _table_rows(tmp_path) == _source_rows(pg, db)
