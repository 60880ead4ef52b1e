"""Benchmark: `gobblin-py compact` of one Iceberg table partition of many small Parquet files, against reading and
writing the same rows once with pyarrow in one process.

    .venv/bin/python scripts/bench_compact_iceberg.py [--files 1000] [--records 2000] [--target-size 256MB]
                                                      [--dedup] [--in-process]

Ingests F JSON-lines files of R events, all on 2026-01-01, with the parquet writer and the iceberg publisher (SQLite
catalog), so the table's partition holds F small files; then: (1) the baseline, every row of those files read with
pyarrow and written once to one zstd Parquet file (before and after the compaction, the ratio taken against the
mean); (2) the compaction as the command runs it (job lock, recovery, one Spark task for the partition on local[2]
or a thread with --in-process, the commit sequence: publish, the replace snapshot, the record), on an executor
already started (Spark's start printed apart); with --dedup, keeping one row per id, the latest by ts. Checks that
every row is read back once (pyiceberg plans, DuckDB reads), that the partition is ceil(input bytes / target) files
in one replace snapshot; prints times and the ratio; writes
scripts/results/bench_compact_iceberg[-dedup][-in-process][-<target>].json.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

import duckdb  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import yaml  # noqa: E402
from bench_results import compaction_args, save, scratch  # noqa: E402  (scripts/ is on sys.path: these run as scripts)

from gobblin_py.compaction.compactor import Compactor  # noqa: E402
from gobblin_py.compaction.plan import CompactionOptions, DedupSpec  # noqa: E402
from gobblin_py.config import load_job  # noqa: E402
from gobblin_py.runtime.executors.in_process import InProcessExecutor  # noqa: E402
from gobblin_py.runtime.executors.spark import SparkExecutor  # noqa: E402
from gobblin_py.runtime.runner import JobRunner  # noqa: E402

JAN1 = 1_767_225_600_000
COUNTRIES = ["DE", "FR", "US", "JP", "BR", None]


def make_inputs(data: Path, files: int, records: int) -> None:
    """`files` JSON-lines files of `records` events each (ids unique), every one on 2026-01-01."""
    data.mkdir(parents=True)
    for f in range(files):
        base = f * records
        with open(data / f"part-{f:05d}.jsonl", "w") as out:
            for i in range(records):
                out.write(json.dumps({"id": base + i, "ts": JAN1 + (base + i) % 86_400_000, "user": f"u{(base + i) % 9973}",
                                      "kind": "click" if i % 3 else "view", "amount": float(i % 997) / 10,
                                      "country": COUNTRIES[i % 6]}) + "\n")


def job_file(root: Path) -> Path:
    job = {"job": {"name": "bench", "work_dir": str(root / "work")},
           "source": {"class": "files", "path": str(root / "data")},
           "converters": [{"class": "json_to_avro", "schema": str(REPO / "jobs" / "schemas" / "event.avsc")}],
           "writer": {"class": "parquet", "partition": {"column": "ts", "granularity": "DAY"}},
           "publisher": {"class": "iceberg", "table": "bench.{dataset}", "warehouse": str(root / "warehouse")},
           "spark": {"master": "local[2]", "conf": {"spark.ui.enabled": False}}}
    path = root / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def partition_paths(table: object) -> list[str]:
    return [task.file.file_path.removeprefix("file://") for task in table.scan().plan_files()]  # type: ignore[attr-defined]


def baseline(paths: list[str], out: Path) -> tuple[float, int]:
    """Read every row with pyarrow and write each once into one zstd Parquet file: seconds, rows."""
    t0 = time.perf_counter()
    rows = pa.concat_tables([pq.read_table(p) for p in paths], promote_options="permissive")
    pq.write_table(rows, out, compression="zstd")
    return time.perf_counter() - t0, rows.num_rows


def main() -> None:
    args = compaction_args(__doc__, dedup=True)
    target = args.target_size
    with scratch("bench-compact-iceberg-") as tmp:
        root = tmp / "job"
        make_inputs(root / "data" / "clicks", args.files, args.records)
        job = load_job(job_file(root))
        t0 = time.perf_counter()
        assert JobRunner(job, InProcessExecutor()).run().succeeded
        from gobblin_py.builtin.publishers.iceberg.publisher import IcebergPublisher

        publisher = job.branches[0].publisher.create()
        assert isinstance(publisher, IcebergPublisher)
        table = publisher.catalog().load_table("bench.clicks")
        before = partition_paths(table)
        total = sum(os.path.getsize(p) for p in before)
        print(f"{len(before)} files × {args.records} rows ({total / 1e6:.1f} MB) ingested in {time.perf_counter() - t0:.1f}s")
        assert len(before) == args.files

        base_s, base_n = baseline(before, tmp / "baseline.parquet")
        print(f"baseline (pyarrow read + write once, one process): {base_s:.2f}s for {base_n} rows")

        executor = InProcessExecutor() if args.in_process else SparkExecutor(job)
        t0 = time.perf_counter()
        executor.start()
        if not args.in_process:
            executor.session()  # type: ignore[attr-defined]
        start_s = time.perf_counter() - t0
        dedup = DedupSpec("id", "latest", "ts") if args.dedup else None
        try:
            t0 = time.perf_counter()
            report = Compactor(JobRunner(job, executor)).run(CompactionOptions(target_bytes=target, dedup=dedup))
            took = time.perf_counter() - t0
        finally:
            executor.stop()
        assert report.succeeded, report.to_json()
        table = table.refresh()
        after = partition_paths(table)
        ids = duckdb.connect().execute("SELECT count(*), count(DISTINCT id) FROM read_parquet(?)", [after]).fetchone()
        assert ids == (base_n, base_n), (ids, base_n)
        expected = max(1, math.ceil(total / target))
        assert len(after) == expected, (len(after), expected)
        operations = [s.summary.operation.value for s in table.snapshots()]
        assert operations == ["append", "overwrite" if args.dedup else "replace"], operations
        phases = {k: round(v, 3) for k, v in (report.result.phases if report.result else {}).items()}
        out_bytes = sum(os.path.getsize(p) for p in after)
        print(f"compact{' --dedup-key id' if args.dedup else ''}: {took:.2f}s; {args.files} files → {len(after)} "
              f"(ceil({total} / {target}) = {expected}, {out_bytes} bytes) in one {operations[-1]} snapshot; phases {phases}")
        print(f"(the executor's start, before the compaction: {start_s:.1f}s)")
        after_s, _ = baseline(before, tmp / "baseline2.parquet")  # the replaced files stay until snapshots expire
        mean = (base_s + after_s) / 2
        print(f"baseline again, after the compaction: {after_s:.2f}s; the compaction is {took / mean:.2f}× the mean {mean:.2f}s")
        name = "bench_compact_iceberg" + ("-dedup" if args.dedup else "") + ("-in-process" if args.in_process else "") + \
            ("" if target == 256_000_000 else f"-{target}")
        save(name, {"files": args.files, "records_per_file": args.records, "input_bytes": total, "target_bytes": target,
                    "baseline_s": [round(base_s, 3), round(after_s, 3)], "executor_start_s": round(start_s, 3),
                    "executor": "in-process" if args.in_process else "spark local[2]", "seconds": round(took, 3),
                    "ratio": round(took / mean, 3), "files_after": len(after), "bytes_after": out_bytes,
                    "snapshot": operations[-1], "phases": phases})


if __name__ == "__main__":
    main()
