"""A job that leaves many small Parquet files per day partition of a Delta table (one per input file), and what a
reader that did not write the table sees: delta-rs reading its latest version."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from compaction.compaction_jobs import add_input
from support.jobs import EVENT_SCHEMA, write_job

DAY0, DAY1 = "ts_day=2026-01-01", "ts_day=2026-01-02"
APP0 = "gobblin-py.compact/c/ts_day=2026-01-01"


def make_delta_table_job(root: Path, files: int = 6, per_file: int = 200) -> Path:
    """`files` inputs of `per_file` records (the last third on January 2nd), published to the Delta table
    `root/lake/clicks`."""
    for f in range(files):
        add_input(root, f"part-{f:03d}", range(f * per_file, (f + 1) * per_file), day=1 if f >= files * 2 // 3 else 0)
    job: dict[str, Any] = {
        "job": {"name": "c", "work_dir": str(root / "work"), "commit_parallelism": 1},
        "source": {"class": "files", "path": str(root / "data")},
        "converters": [{"class": "json_to_avro", "schema": str(EVENT_SCHEMA)}],
        "writer": {"class": "parquet", "partition": {"column": "ts", "granularity": "DAY", "pattern": "yyyy/MM/dd"}},
        "publisher": {"class": "delta", "table_uri": str(root / "lake" / "{dataset}")},
        "spark": {"master": "local[2]"},
    }
    return write_job(root, job)


def table(root: Path) -> Any:
    from deltalake import DeltaTable

    return DeltaTable(str(root / "lake" / "clicks"))


def ids(root: Path) -> Counter[int]:
    """id → how many rows of the table's latest version hold it, as delta-rs reads it."""
    return Counter(table(root).to_pyarrow_table(columns=["id"]).column("id").to_pylist())


def partition_files(root: Path, partition: str = DAY0) -> list[dict[str, Any]]:
    """The files of one partition the table's latest version lists: path (relative), size, records."""
    actions = table(root).get_add_actions(flatten=True)
    rows = zip(*(actions.column(c).to_pylist() for c in ("path", "size_bytes", "num_records", "partition.ts_day")))
    return [{"path": p, "size": s, "records": n} for p, s, n, day in rows if f"ts_day={day}" == partition]


def compaction_commits(root: Path) -> list[dict[str, Any]]:
    """The commitInfo of the table's compaction commits, oldest first."""
    return [h for h in reversed(table(root).history()) if h.get("gobblin-py.operation") == "compaction"]
