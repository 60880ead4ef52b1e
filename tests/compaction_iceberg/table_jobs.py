"""A job that leaves many small Parquet files per day partition of an Iceberg table (one per input file, as the
compaction tests' file job does for Avro), and what a reader that did not write the table sees: the data files its
current snapshot lists (planned by pyiceberg), read by DuckDB."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from builtin.test_iceberg_publisher import catalog, table_ids
from compaction.compaction_jobs import add_input
from support.jobs import EVENT_SCHEMA, write_job

TABLE = "db.clicks"
DAY0, DAY1 = "ts_day=2026-01-01", "ts_day=2026-01-02"


def make_table_job(root: Path, files: int = 6, per_file: int = 200, **extra: Any) -> Path:
    """`files` inputs of `per_file` records (the last third on January 2nd), published to the table `db.clicks` in
    `root/warehouse`; `extra` sections (e.g. `compaction`) or job settings (`job=…`) added."""
    for f in range(files):
        add_input(root, f"part-{f:03d}", range(f * per_file, (f + 1) * per_file), day=1 if f >= files * 2 // 3 else 0)
    job: dict[str, Any] = {
        "job": {"name": "c", "work_dir": str(root / "work"), "commit_parallelism": 1, **extra.pop("job", {})},
        "source": {"class": "files", "path": str(root / "data")},
        "converters": [{"class": "json_to_avro", "schema": str(EVENT_SCHEMA)}],
        "writer": {"class": "parquet", "partition": {"column": "ts", "granularity": "DAY", "pattern": "yyyy/MM/dd"}},
        "publisher": {"class": "iceberg", "table": "db.{dataset}", "warehouse": str(root / "warehouse"),
                      **extra.pop("publisher", {})},
        "spark": {"master": "local[2]"},
        **extra,
    }
    return write_job(root, job)


def table(root: Path) -> Any:
    return catalog(root).load_table(TABLE)


def partition_files(root: Path, partition: str = DAY0) -> list[Any]:
    """The data files of one partition the table's current snapshot lists (pyiceberg's `inspect.files`)."""
    rows = table(root).inspect.files().to_pylist()
    return [r for r in rows if f"ts_day={r['partition']['ts_day']}" == partition]


def ids(root: Path) -> Counter[int]:
    """id → how many rows of the table hold it, as DuckDB reads the files pyiceberg plans (a reader of the table)."""
    return table_ids(table(root))


def compaction_snapshots(root: Path) -> list[dict[str, str]]:
    """The summaries (operation included) of the table's compaction snapshots, oldest first."""
    return [{"operation": s.summary.operation.value, **s.summary.additional_properties}
            for s in table(root).snapshots() if s.summary.get("gobblin-py.compaction")]
