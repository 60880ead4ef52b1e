"""A small job publishing two Iceberg tables (clicks and orders, ten records on each of three days), and what a user
checks after `maintain`: each record once at the current snapshot (pyiceberg, DuckDB over the same files, DuckDB's
`iceberg_scan` where its extension is installed), every file a snapshot references still there, the commit log empty."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from builtin.test_iceberg_publisher import catalog, iceberg_job, table_ids
from support.jobs import write_job

from gobblin_py.commit.store import CommitStepStore

DAY_MS = 86_400_000
JAN1 = 1_767_225_600_000  # 2026-01-01T00:00Z
DATASETS = ("clicks", "orders")
FIRST_ID = {"clicks": 0, "orders": 10_000}
RUN = ["run", "job.yaml", "--in-process", "-q"]


def add_records(tmp: Path, dataset: str, name: str, ids: range, days: range = range(3)) -> None:
    """One input file of `ids`, spread over the January days `days` (0: the 1st)."""
    folder = tmp / "data" / dataset
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{name}.jsonl", "w") as out:
        for n, i in enumerate(ids):
            out.write(json.dumps({"id": i, "ts": JAN1 + days[n % len(days)] * DAY_MS + n, "user": "u1", "kind": "click",
                                  "amount": None, "country": "US"}) + "\n")


def small_lake(tmp: Path, publisher: dict[str, Any] | None = None, **job_extra: Any) -> Path:
    """`tmp` with the job file (`publisher` merged into its publisher's settings, `job_extra` into its job section)
    and its first run committed (in this process: a tenth of a child's time): each table one snapshot of 30 records
    in 3 day files."""
    from gobblin_py.config import load_job
    from gobblin_py.runtime.executors.in_process import InProcessExecutor
    from gobblin_py.runtime.runner import JobRunner

    tmp.mkdir(parents=True, exist_ok=True)
    for d in DATASETS:
        add_records(tmp, d, "first", range(FIRST_ID[d], FIRST_ID[d] + 30))
    job = iceberg_job(tmp, **job_extra)
    job["publisher"].update(publisher or {})
    result = JobRunner(load_job(write_job(tmp, job)), InProcessExecutor()).run()
    assert result.succeeded, result.error
    return tmp


def small_lakes(root: Path, points: list[str]) -> list[Path]:
    """One `small_lake` for each crash point, under `root`, built one after the other before the kills start."""
    return [small_lake(root / str(n)) for n in range(len(points))]


def ok(done: Any, where: str = "") -> None:
    assert done.returncode == 0, f"{where}{done.stdout}{done.stderr}"


def table(tmp: Path, dataset: str) -> Any:
    return catalog(tmp).load_table(f"db.{dataset}")


def read_ids(t: Any) -> Counter:
    """id → rows holding it at the table's current snapshot, as pyiceberg reads it; checked equal to what DuckDB reads
    of the same data files, and to DuckDB's `iceberg_scan` where the extension is installed (it is downloaded on first
    use: not in an offline test)."""
    import duckdb

    ours = Counter(t.scan().to_arrow().column("id").to_pylist())
    assert table_ids(t) == ours, "DuckDB over the snapshot's files reads what pyiceberg reads"
    con = duckdb.connect()
    try:
        con.execute("LOAD iceberg")
    except duckdb.Error:
        return ours
    scanned = Counter(r[0] for r in con.execute(f"SELECT id FROM iceberg_scan('{t.metadata_location}')").fetchall())
    assert scanned == ours, "DuckDB's iceberg_scan reads what pyiceberg reads"
    return ours


def _local(uri: str) -> Path:
    return Path(uri.removeprefix("file://"))


def referenced(t: Any, snapshots: list[Any] | None = None) -> set[Path]:
    """Every file the snapshots of `t` (or `snapshots`) list: manifest lists, manifests, data files (deleted entries
    too); with every snapshot, the metadata files of its log as well."""
    local = _local
    out = set() if snapshots is not None else {local(t.metadata_location), *(local(m.metadata_file) for m in t.metadata.metadata_log)}
    for s in t.snapshots() if snapshots is None else snapshots:
        out.add(local(s.manifest_list))
        for m in s.manifests(t.io):
            out.add(local(m.manifest_path))
            out.update(local(e.data_file.file_path) for e in m.fetch_manifest_entry(t.io, discard_deleted=False))
    return out


def assert_intact(tmp: Path, where: str) -> None:
    """Nothing a snapshot lists is gone, and the commit log is empty."""
    for d in DATASETS:
        t = table(tmp, d)
        missing = sorted(str(p) for p in referenced(t) if not p.exists())
        assert not missing, f"{where}: {d}: files its snapshots list are gone: {missing[:3]}"
    assert CommitStepStore(tmp / "work").datasets("t") == [], f"{where}: the commit log is not empty"
