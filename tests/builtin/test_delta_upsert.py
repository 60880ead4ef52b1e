"""The `delta` publisher in upsert mode (`mode: upsert, key: [id]`) with a files source whose records are changes
(`op`, `updated_at`, the changes of tests/builtin/test_iceberg_upsert.py): one MERGE per commit, the table read back
by delta-rs and by DuckDB (over the files its log lists) equal by key to the state the changes describe; and what
validation refuses, naming the setting."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from builtin.test_iceberg_upsert import FIRST, SCHEMA, SECOND, _by_key, _run, expected, write_changes
from support.jobs import run_cli, write_job

from gobblin_py.builtin.publishers.delta.settings import DeltaPublisherSettings
from gobblin_py.config import load_job
from gobblin_py.errors import ConfigError

deltalake = pytest.importorskip("deltalake")
duckdb = pytest.importorskip("duckdb")

COLUMNS = ("id", "name", "city", "op", "updated_at")


def delta_upsert_job(tmp: Path, writer: dict | None = None, **publisher: Any) -> dict:
    """A files-source job of JSON-lines changes under `tmp/data/customers`, into the Delta table `tmp/lake/customers`."""
    (tmp / "data" / "customers").mkdir(parents=True, exist_ok=True)
    (tmp / "customer.avsc").write_text(json.dumps(SCHEMA))
    settings = {"class": "delta", "table_uri": str(tmp / "lake" / "{dataset}"), "mode": "upsert", "key": ["id"],
                "order_by": ["updated_at"], "delete_when": {"column": "op", "equals": ["d"]}, **publisher}
    return {"job": {"name": "u", "work_dir": str(tmp / "work"), "max_task_retries": 1, "commit_parallelism": 1},
            "source": {"class": "files", "path": str(tmp / "data")},
            "converters": [{"class": "json_to_avro", "schema": str(tmp / "customer.avsc")}],
            "writer": writer or {"class": "parquet"},
            "publisher": {k: v for k, v in settings.items() if v is not None}}


def read_back(tmp: Path) -> dict[int, dict]:
    """The table's rows by key as delta-rs reads them, equal to what DuckDB reads of the files its log lists (a
    connection of its own: the crash tests read two tables side by side)."""
    t = deltalake.DeltaTable(str(tmp / "lake" / "customers"))
    ours = _by_key(t.to_pyarrow_table(columns=list(COLUMNS)).to_pylist(), "delta-rs")
    files = t.file_uris()
    theirs = _by_key([dict(zip(COLUMNS, r)) for r in duckdb.connect().execute(
        f"SELECT {', '.join(COLUMNS)} FROM read_parquet(?, union_by_name = true)", [files]).fetchall()] if files else [],
        "duckdb")
    assert theirs == ours
    return ours


def test_updates_replace_rows_and_deletes_remove_them_one_merge_per_commit(tmp_path: Path) -> None:
    write_changes(tmp_path, "c-001.jsonl", FIRST)
    first = _run(tmp_path, delta_upsert_job(tmp_path))
    assert first.succeeded, first.error
    assert read_back(tmp_path) == expected(FIRST)
    write_changes(tmp_path, "c-002.jsonl", SECOND)
    second = _run(tmp_path, delta_upsert_job(tmp_path))
    assert second.succeeded, second.error
    assert read_back(tmp_path) == expected(FIRST, SECOND)
    history = deltalake.DeltaTable(str(tmp_path / "lake" / "customers")).history()
    applied = [h for h in history if "gobblin-py.upsert" in h]
    assert [h["operation"] for h in applied] == ["MERGE", "MERGE"]
    assert json.loads(applied[0]["gobblin-py.upsert"])["deleted"] == 3
    again = _run(tmp_path, delta_upsert_job(tmp_path))  # nothing new: no commit, the same rows
    assert again.succeeded and read_back(tmp_path) == expected(FIRST, SECOND)


def test_a_tie_of_two_changes_of_one_key_fails_the_commit_naming_it_and_moves_nothing(tmp_path: Path) -> None:
    write_changes(tmp_path, "c-001.jsonl", [{"id": 1, "name": "a", "city": None, "op": "c", "updated_at": 1},
                                            {"id": 1, "name": "b", "city": None, "op": "u", "updated_at": 1}])
    done = _run(tmp_path, delta_upsert_job(tmp_path))
    assert not done.succeeded
    assert "key id=1 changes twice with the same updated_at" in done.datasets[0].message
    assert not (tmp_path / "lake" / "customers" / "_delta_log").exists() or \
        not deltalake.DeltaTable(str(tmp_path / "lake" / "customers")).file_uris()


@pytest.mark.parametrize(("settings", "message"), [
    ({"mode": "upsert"}, "mode: upsert needs key"),
    ({"mode": "upsert", "key": ["id", "id"]}, "key names a column twice"),
    ({"mode": "upsert", "key": ["id"], "order_by": ["id"]}, "is in both key and order_by"),
    ({"mode": "upsert", "key": ["id"], "delete_when": {"column": "id", "equals": ["d"]}}, "delete_when.column 'id' is a key column"),
    ({"mode": "upsert", "key": ["id"], "truncate_when": {"column": "op", "equals": ["t"]}}, "truncate_when needs order_by"),
    ({"key": ["id"]}, "key only apply to mode: upsert"),
])
def test_settings_that_cannot_work_are_refused_naming_the_key(tmp_path: Path, settings: dict, message: str) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=message):
        DeltaPublisherSettings(table_uri=str(tmp_path / "t"), **settings)


def test_a_partitioned_upsert_table_is_refused_at_validation(tmp_path: Path) -> None:
    job = delta_upsert_job(tmp_path, writer={"class": "parquet", "partition": {"column": "updated_at", "granularity": "DAY"}})
    with pytest.raises(ConfigError, match=r"publisher.mode.*unpartitioned Delta table.*drop writer.partition"):
        load_job(write_job(tmp_path, job))


def test_compact_leaves_an_upsert_table_alone_saying_why_and_exits_0(tmp_path: Path) -> None:
    """Found by the upsert world's Delta soak (seed 3830719005): `compact` on a Delta upsert table exited 1 naming a
    file without the parquet writer's footer (delta-rs's merge writes the table's files). Now it is left alone, the
    reason named, as an Iceberg upsert table is, and the command succeeds."""
    write_changes(tmp_path, "a.jsonl", FIRST)
    assert _run(tmp_path, delta_upsert_job(tmp_path)).succeeded
    new = [{"id": i, "name": f"new{i}", "city": None, "op": "c", "updated_at": 9} for i in range(100, 105)]
    write_changes(tmp_path, "b.jsonl", new)  # inserts only: the merge adds a file beside the first
    assert _run(tmp_path, delta_upsert_job(tmp_path)).succeeded
    assert len(deltalake.DeltaTable(str(tmp_path / "lake" / "customers")).file_uris()) >= 2
    done = run_cli("compact", "job.yaml", "--in-process", "--min-files", "2", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "kept by key (publisher.mode: upsert)" in done.stdout, done.stdout
    assert read_back(tmp_path) == expected(FIRST, new)


def test_a_commit_that_changes_no_row_still_records_its_transaction(tmp_path: Path) -> None:
    """Deletes of keys the table lacks: delta-rs's merge changes nothing and commits nothing, so the app transaction
    the dataset's state pinned was never written and every later commit was refused ("lower than 2 which this job
    committed": the upsert_delta soak, seed 109392023). Now the transaction is committed alone, and later changes go on."""
    write_changes(tmp_path, "c-001.jsonl", FIRST)
    assert _run(tmp_path, delta_upsert_job(tmp_path)).succeeded
    write_changes(tmp_path, "c-002.jsonl", [{"id": 999, "name": None, "city": None, "op": "d", "updated_at": 9}])
    nothing = _run(tmp_path, delta_upsert_job(tmp_path))
    assert nothing.succeeded, nothing.error
    assert deltalake.DeltaTable(str(tmp_path / "lake" / "customers")).transaction_version("gobblin-py/u/customers") == 2
    later = [{"id": 1, "name": "later", "city": "c9", "op": "u", "updated_at": 10}]
    write_changes(tmp_path, "c-003.jsonl", later)
    done = _run(tmp_path, delta_upsert_job(tmp_path))
    assert done.succeeded, done.error
    assert read_back(tmp_path) == expected(FIRST, later)
