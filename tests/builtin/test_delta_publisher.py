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

from gobblin_py.config import load_job
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import DatasetStatus, JobRunner
from gobblin_py.state.store import StateStore
from gobblin_py.testing.outputs import read_avro_dir

from support.jobs import example_job, write_job

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


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, Counter]:
    """dataset → id counts of the example job written as Avro by the `fs` publisher: what each table must hold."""
    tmp = tmp_path_factory.mktemp("avro")
    assert JobRunner(load_job(write_job(tmp, example_job(tmp))), InProcessExecutor()).run().succeeded
    out: dict[str, Counter] = {}
    for rec in read_avro_dir(tmp / "output"):
        out.setdefault(rec["_file"].split("/")[0], Counter())[rec["id"]] += 1
    return out


def _run(tmp: Path, job: dict) -> Any:
    return JobRunner(load_job(write_job(tmp, job)), InProcessExecutor()).run()


def _new_clicks(tmp: Path, first_id: int, n: int, extra: dict | None = None) -> None:
    day = 1767657600000  # 2026-01-06T00:00Z
    lines = [json.dumps({"id": first_id + i, "ts": day + 1000 * i, "user": "u1", "kind": "click", "amount": None,
                         "country": "US", **(extra or {})}) for i in range(n)]
    (tmp / "data" / "clicks" / f"clicks-new-{first_id}.jsonl").write_text("\n".join(lines) + "\n")


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
        assert t.version() == 0 and t.transaction_version(f"gobblin-py/t/{d}") == 1
        assert t.metadata().partition_columns == ["ts_day"]
        days = set(t.to_pyarrow_table(columns=["ts_day"]).column("ts_day").to_pylist())
        assert days and all(len(x) == 10 and x.startswith("2026-01-") for x in days)
        assert all(u.startswith(f"{tmp_path}/lake/{d}/data/{d}/2026/01/") for u in t.file_uris())
    assert list((tmp_path / "lake" / "_errors").rglob("*.jsonl")) and not list((tmp_path / "lake" / "clicks").rglob("*.jsonl"))

    again = _run(tmp_path, delta_job(tmp_path))
    assert again.succeeded and {d.status for d in again.datasets} == {DatasetStatus.NO_NEW_DATA}
    assert [table(tmp_path, d).version() for d in DATASETS] == [0, 0], "no new data, no commit"

    _new_clicks(tmp_path, 900_001, 7)
    third = _run(tmp_path, delta_job(tmp_path))
    assert third.succeeded, third.error
    t = table(tmp_path, "clicks")
    assert delta_ids(t) == reference["clicks"] + Counter(range(900_001, 900_008)) == duckdb_ids(t)
    assert t.version() == 1 and t.transaction_version("gobblin-py/t/clicks") == 2 and len(commits(t)) == 2
