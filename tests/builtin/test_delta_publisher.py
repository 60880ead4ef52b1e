"""The `delta` publisher: a job's Parquet files added to Delta tables, one Delta commit per dataset per run, read back
by readers that did not write them (delta-rs, and DuckDB: its delta extension where it loads, else over the files
the table lists); a column added upstream, a table re-created or restored, an S3 table on moto."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from builtin import test_iceberg_publisher as iceberg_tests
from builtin.test_iceberg_publisher import _new_clicks, _run
from support.jobs import example_job

from gobblin_py.runtime.runner import DatasetStatus
from gobblin_py.state.store import StateStore

reference = iceberg_tests.reference
"""dataset → id counts of the example job written as Avro by the `fs` publisher: what each table must hold."""

deltalake = pytest.importorskip("deltalake")
duckdb = pytest.importorskip("duckdb")

DATASETS = ("clicks", "orders")


# --- helpers the crash test shares ---------------------------------------------------------------------------------

def delta_job(tmp: Path, table_uri: str | None = None, **publisher: Any) -> dict:
    """The example job writing Parquet, published to Delta tables `tmp/lake/<dataset>`."""
    return example_job(tmp, job={"name": "t", "work_dir": str(tmp / "work"), "max_task_retries": 1, "commit_parallelism": 1},
                       writer={"class": "parquet", "partition": {"column": "ts", "granularity": "DAY", "pattern": "yyyy/MM/dd"}},
                       publisher={"class": "delta", "table_uri": table_uri or str(tmp / "lake" / "{dataset}"), **publisher})


def table(tmp: Path, dataset: str, **options: str) -> Any:
    uri = str(tmp / "lake" / dataset) if "://" not in str(tmp) else f"{tmp}/{dataset}"
    return deltalake.DeltaTable(uri, storage_options=options or None)


def delta_ids(t: Any) -> Counter:
    """id → rows holding it, as delta-rs reads the table."""
    return Counter(t.to_pyarrow_table(columns=["id"]).column("id").to_pylist())


def duckdb_ids(t: Any) -> Counter:
    """id → rows holding it, as DuckDB reads the table: its delta extension where it loads into this duckdb, else
    read_parquet over the files the table's log lists (`file_uris`)."""
    con = duckdb.connect(config={"allow_unsigned_extensions": True})
    if _load_delta_extension(con):
        rows = con.execute("SELECT id FROM delta_scan(?)", [t.table_uri]).fetchall()
    else:
        rows = con.execute("SELECT id FROM read_parquet(?, union_by_name = true)", [t.file_uris()]).fetchall()
    return Counter(r[0] for r in rows)


def _load_delta_extension(con: Any) -> bool:
    """The `duckdb-extension-delta` package's extension loaded, when it was built for this duckdb (its wheels pin one
    duckdb version; a mismatch is a load error)."""
    try:
        import duckdb_extension_delta
    except ImportError:
        return False
    found = sorted(Path(duckdb_extension_delta.__path__[0]).rglob("*.duckdb_extension"))
    for ext in found:
        try:
            con.load_extension(str(ext))
            return True
        except duckdb.Error:
            continue
    return False


def commits(t: Any) -> list[dict]:
    """The table's gobblin-py add commits (commitInfo), oldest first."""
    return [h for h in reversed(t.history()) if "gobblin-py.commit-id" in h and "gobblin-py.operation" not in h]


# --- a job into tables -------------------------------------------------------------------------------------------

def test_each_dataset_of_a_run_is_one_delta_commit_holding_every_record_once(tmp_path: Path, reference: dict) -> None:
    first = _run(tmp_path, delta_job(tmp_path))
    assert first.succeeded, first.error
    marks = StateStore(tmp_path / "work", "t").watermarks()
    for d in DATASETS:
        t = table(tmp_path, d)
        assert delta_ids(t) == reference[d] and set(delta_ids(t).values()) == {1}, d
        assert duckdb_ids(t) == reference[d], d
        [c] = commits(t)
        assert c["gobblin-py.commit-id"] == f"t/{first.run_id}/{d}" and c["gobblin-py.dataset"] == d
        assert json.loads(c["gobblin-py.watermarks"]) == marks[d] != {}
        assert t.version() == 1 and t.transaction_version(f"gobblin-py/t/{d}") == 1, "created empty, then one add"
        assert t.metadata().partition_columns == ["ts_day"]
        days = set(t.to_pyarrow_table(columns=["ts_day"]).column("ts_day").to_pylist())
        assert days and all(len(x) == 10 and x.startswith("2026-01-") for x in days)
        assert all(u.startswith(f"{tmp_path}/lake/{d}/data/{d}/2026/01/") for u in t.file_uris())
    assert list((tmp_path / "lake" / "_errors").rglob("*.jsonl")) and not list((tmp_path / "lake" / "clicks").rglob("*.jsonl"))

    again = _run(tmp_path, delta_job(tmp_path))
    assert again.succeeded and {d.status for d in again.datasets} == {DatasetStatus.NO_NEW_DATA}
    assert [table(tmp_path, d).version() for d in DATASETS] == [1, 1], "no new data, no commit"

    _new_clicks(tmp_path, 900_001, 7)
    third = _run(tmp_path, delta_job(tmp_path))
    assert third.succeeded, third.error
    t = table(tmp_path, "clicks")
    assert delta_ids(t) == reference["clicks"] + Counter(range(900_001, 900_008)) == duckdb_ids(t)
    assert t.version() == 2 and t.transaction_version("gobblin-py/t/clicks") == 2 and len(commits(t)) == 2


# --- schema ------------------------------------------------------------------------------------------------------

def test_a_column_added_upstream_lands_as_a_new_nullable_column(tmp_path: Path, reference: dict) -> None:
    from builtin.test_iceberg_publisher import _schema_with, _with_schema

    assert _run(tmp_path, delta_job(tmp_path)).succeeded
    _new_clicks(tmp_path, 900_001, 5, {"device": "phone"})
    evolved = _schema_with(tmp_path, {"device": {"name": "device", "type": ["null", "string"], "default": None}})
    second = _run(tmp_path, _with_schema(delta_job(tmp_path), evolved))
    assert second.succeeded, second.error
    t = table(tmp_path, "clicks")
    [device] = [f for f in t.schema().fields if f.name == "device"]
    assert device.nullable
    rows = t.to_pyarrow_table(columns=["id", "device"]).to_pylist()
    assert Counter(r["device"] for r in rows) == Counter({None: sum(reference["clicks"].values()), "phone": 5})
    assert len(commits(t)) == 2 and t.version() == 3, "one metadata commit adds the column, one adds the files"
    assert t.transaction_version("gobblin-py/t/clicks") == 2


def test_a_column_of_another_type_fails_the_dataset_naming_it_and_adds_nothing(tmp_path: Path) -> None:
    from builtin.test_iceberg_publisher import _schema_with, _with_schema

    assert _run(tmp_path, delta_job(tmp_path)).succeeded
    _new_clicks(tmp_path, 900_001, 5)
    retyped = _schema_with(tmp_path, {"amount": {"name": "amount", "type": ["null", "float"], "default": None}})
    second = _run(tmp_path, _with_schema(delta_job(tmp_path), retyped))
    clicks = {d.dataset: d for d in second.datasets}["clicks"]
    assert clicks.status is DatasetStatus.COMMIT_FAILED and "'amount' is double in the table and float" in clicks.message
    assert table(tmp_path, "clicks").version() == 1


# --- what it assumes, checked --------------------------------------------------------------------------------------

def test_a_table_deleted_and_created_again_fails_closed_naming_both_ids(tmp_path: Path) -> None:
    assert _run(tmp_path, delta_job(tmp_path)).succeeded
    old = table(tmp_path, "clicks")
    old_id, data = old.metadata().id, old.to_pyarrow_table()
    shutil.rmtree(tmp_path / "lake" / "clicks")
    deltalake.write_deltalake(str(tmp_path / "lake" / "clicks"), data.slice(0, 1), partition_by=["ts_day"])
    new_id = table(tmp_path, "clicks").metadata().id
    _new_clicks(tmp_path, 900_001, 5)
    second = _run(tmp_path, delta_job(tmp_path))
    clicks = {d.dataset: d for d in second.datasets}["clicks"]
    assert clicks.status is DatasetStatus.COMMIT_FAILED, clicks.message
    assert old_id in clicks.message and new_id in clicks.message and "created again" in clicks.message
    assert table(tmp_path, "clicks").version() == 0 and "clicks" in StateStore(tmp_path / "work", "t").watermarks()
    assert {d.dataset: d for d in second.datasets}["orders"].status is not DatasetStatus.COMMIT_FAILED


def test_a_table_deleted_fails_closed_saying_so_and_creates_no_table_in_its_place(tmp_path: Path) -> None:
    """A table the dataset committed to, deleted since: the dataset fails naming its id as gone; nothing is created at
    `table_uri` (an empty table made there would look like a re-created one to the next run, and to readers)."""
    assert _run(tmp_path, delta_job(tmp_path)).succeeded
    old_id = table(tmp_path, "clicks").metadata().id
    shutil.rmtree(tmp_path / "lake" / "clicks")
    _new_clicks(tmp_path, 900_001, 5)
    for _ in range(2):  # the second run finds the same: nothing the first did changed the world
        clicks = {d.dataset: d for d in _run(tmp_path, delta_job(tmp_path)).datasets}["clicks"]
        assert clicks.status is DatasetStatus.COMMIT_FAILED, clicks.message
        assert f"(Delta table id {old_id}, which this job's last commit went to) is gone" in clicks.message
        assert not (tmp_path / "lake" / "clicks").exists()


def test_a_table_restored_to_an_older_version_fails_closed_until_the_state_is_reset(tmp_path: Path, reference: dict) -> None:
    from gobblin_py.testing.crash import cli

    assert _run(tmp_path, delta_job(tmp_path)).succeeded
    _new_clicks(tmp_path, 900_001, 5)
    assert _run(tmp_path, delta_job(tmp_path)).succeeded
    t = table(tmp_path, "clicks")
    assert t.version() == 2
    t.restore(1)  # delta-rs keeps the txn version (2): only the history says the second commit's rows are gone
    assert table(tmp_path, "clicks").transaction_version("gobblin-py/t/clicks") == 2
    _new_clicks(tmp_path, 900_101, 3)
    third = _run(tmp_path, delta_job(tmp_path))
    clicks = {d.dataset: d for d in third.datasets}["clicks"]
    assert clicks.status is DatasetStatus.COMMIT_FAILED and "restored to version 1" in clicks.message, clicks.message
    assert delta_ids(table(tmp_path, "clicks")) == reference["clicks"], "nothing added over the restored table"
    # `state reset` forgets the pinned table: here the operator accepts the restored table as it is (the watermarks kept;
    # a source that can re-read a range would be set back to what the table holds, which the commits carry)
    marks = StateStore(tmp_path / "work", "t").watermarks()["clicks"]
    to = [f"{k}={v}" for k, v in marks.items()]
    reset = cli(["state", "reset", "job.yaml", "--dataset", "clicks", "--yes", *[a for kv in to for a in ("--to", kv)]], tmp_path)
    assert reset.returncode == 0, reset.stdout + reset.stderr
    fourth = _run(tmp_path, delta_job(tmp_path))
    assert fourth.succeeded, fourth.error
    t = table(tmp_path, "clicks")
    assert delta_ids(t) == reference["clicks"] + Counter(range(900_101, 900_104))
    assert t.transaction_version("gobblin-py/t/clicks") == 3


def test_a_lost_work_directory_is_refused_naming_the_tables_watermarks(tmp_path: Path) -> None:
    assert _run(tmp_path, delta_job(tmp_path)).succeeded
    shutil.rmtree(tmp_path / "work")
    second = _run(tmp_path, delta_job(tmp_path))
    assert not second.succeeded
    assert "transaction version 1" in str(second.error) and "state reset" in str(second.error)
    assert [table(tmp_path, d).version() for d in DATASETS] == [1, 1]


# --- S3 --------------------------------------------------------------------------------------------------------

@pytest.mark.s3
def test_an_s3_table_gets_the_files_uploaded_verified_then_added(tmp_path: Path, s3, reference: dict) -> None:
    bucket = s3.new_bucket()
    options = {"AWS_ENDPOINT_URL": s3.endpoint, "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1"}
    job = delta_job(tmp_path, table_uri=f"s3://{bucket}/lake/{{dataset}}", storage_options=options)
    job["job"]["filesystems"] = s3.options
    first = _run(tmp_path, job)
    assert first.succeeded, first.error
    for d in DATASETS:
        t = deltalake.DeltaTable(f"s3://{bucket}/lake/{d}", storage_options=options)
        assert delta_ids(t) == reference[d] and t.transaction_version(f"gobblin-py/t/{d}") == 1 and t.version() == 1
    assert any(k.endswith(".errors.jsonl") for k in s3.keys(f"{bucket}/lake/_errors"))
