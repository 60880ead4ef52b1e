"""A partitioned Iceberg table in upsert mode (`writer.partition` by day, written through pyiceberg, whose partition
transforms need `pyiceberg-core`, in the `tables` extra): changes that move a key from one day to another, deletes,
and re-inserts keep the table equal to its source by key, read back by pyiceberg and by DuckDB over the files the
snapshot lists; each data file holds one day, as the partition spec says."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from builtin.test_iceberg_upsert import catalog, upsert_job, write_changes
from support.jobs import run_cli, write_job

from gobblin_py.builtin.publishers.iceberg.upsert import partitioned_writes

pytest.importorskip("pyiceberg")
duckdb = pytest.importorskip("duckdb")

DAY_MS = 86_400_000
START = 1_767_225_600_000  # 2026-01-01T00:00:00Z
SCHEMA = {"type": "record", "name": "Customer", "fields": [
    {"name": "id", "type": "long"},
    {"name": "name", "type": ["null", "string"], "default": None},
    {"name": "op", "type": "string"},
    {"name": "updated_at", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}


def _row(i: int, day: int, op: str = "c", name: str | None = None) -> dict[str, Any]:
    return {"id": i, "name": name if name is not None else f"n{i}-d{day}", "op": op, "updated_at": START + day * DAY_MS + i}


def _job(tmp: Path) -> dict:
    job = upsert_job(tmp)
    (tmp / "customer.avsc").write_text(json.dumps(SCHEMA))
    job["writer"]["partition"] = {"column": "updated_at", "granularity": "DAY", "pattern": "yyyy/MM/dd"}
    return job


def _read_back(table: Any) -> dict[int, tuple]:
    rows = table.scan().to_arrow().to_pylist()
    ours = {r["id"]: (r["name"], r["op"]) for r in rows}
    assert len(ours) == len(rows), "a key twice (pyiceberg)"
    tasks = list(table.scan().plan_files())
    assert all(not t.delete_files for t in tasks), "copy-on-write: no delete files"
    paths = [t.file.file_path.removeprefix("file://") for t in tasks]
    theirs = duckdb.connect().execute(
        "SELECT id, name, op, CAST(updated_at AS DATE) AS day FROM read_parquet(?)", [paths]).fetchall() if paths else []
    assert {r[0]: (r[1], r[2]) for r in theirs} == ours and len(theirs) == len(rows), "DuckDB reads other rows"
    for t in tasks:  # every file holds one day, the one its partition value says
        days = {r[0] for r in duckdb.connect().execute("SELECT DISTINCT CAST(updated_at AS DATE) FROM read_parquet(?)",
                                                        [t.file.file_path.removeprefix("file://")]).fetchall()}
        assert len(days) == 1, f"{t.file.file_path} holds {sorted(map(str, days))}"
    return ours


def test_a_partitioned_upsert_table_stays_equal_to_its_source_as_keys_move_between_days(tmp_path: Path) -> None:
    if not partitioned_writes():
        pytest.fail("pyiceberg-core is missing: `pip install -e '.[tables]'` installs it")
    write_job(tmp_path, _job(tmp_path))
    source: dict[int, tuple] = {}

    def apply(name: str, rows: list[dict[str, Any]]) -> None:
        write_changes(tmp_path, name, rows)
        done = run_cli("run", "job.yaml", "--in-process", cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        for r in sorted(rows, key=lambda r: r["updated_at"]):
            if r["op"] == "d":
                source.pop(r["id"], None)
            else:
                source[r["id"]] = (r["name"], r["op"])

    apply("a.jsonl", [_row(i, i % 3) for i in range(1, 31)])
    table = catalog(tmp_path).load_table("db.customers")
    assert not table.spec().is_unpartitioned(), table.spec()
    assert _read_back(table) == source
    moved = [_row(i, 5, "u", f"moved{i}") for i in range(1, 31, 4)]          # to a day of its own
    deleted = [_row(i, 6, "d") for i in (2, 3, 9)]
    back = [_row(3, 7, "c", "back3")]                                          # deleted, then inserted again later
    apply("b.jsonl", moved + deleted + back + [_row(i, 1) for i in range(31, 36)])
    table = catalog(tmp_path).load_table("db.customers")
    assert _read_back(table) == source
    assert source[3] == ("back3", "c") and 2 not in source and source[5] == ("moved5", "u")
    apply("c.jsonl", [_row(i, 0, "u", f"again{i}") for i in range(1, 36, 2)])  # back to the first day
    assert _read_back(catalog(tmp_path).load_table("db.customers")) == source
