"""What a competent engineer writes instead of gobblin-py to turn a directory of JSON-lines (or CSV) files into Parquet,
with an explicit schema each (no inference pass): plain PySpark on local[2], `spark.read.schema(...).json(dir)
.write.parquet(out)` (a directory of part files), DuckDB, `COPY (SELECT * FROM read_json(..., columns={...})) TO out
(FORMAT parquet)` (one file), or pyarrow, `pyarrow.json.read_json(file, explicit_schema)` → `pq.write_table`, file by
file (one Parquet file each); for CSV (`--format csv`, files with a header row) `spark.read.schema(...).csv(dir,
header=True)`, DuckDB's `read_csv(..., header = true, columns = {...})` and `pyarrow.csv.read_csv` with the column
types. Each writes with its own default codec (snappy).

    .venv/bin/python scripts/baseline_files_to_parquet.py spark IN_DIR OUT_DIR [--format csv]
    .venv/bin/python scripts/baseline_files_to_parquet.py duckdb IN_DIR OUT.parquet [--format csv]
    .venv/bin/python scripts/baseline_files_to_parquet.py pyarrow IN_DIR OUT_DIR [--format csv]

IN_DIR holds the *.jsonl (or *.csv) files of scripts/bench_files.py. Prints one JSON line: {"seconds": S}.
"""

from __future__ import annotations

import argparse
import json
import time

SPARK_SCHEMA = ("id BIGINT, user_id INT, session STRING, page STRING, country STRING, amount DOUBLE, score DOUBLE, "
                "qty INT, ts TIMESTAMP, ok BOOLEAN")
DUCKDB_COLUMNS = {"id": "BIGINT", "user_id": "INTEGER", "session": "VARCHAR", "page": "VARCHAR", "country": "VARCHAR",
                  "amount": "DOUBLE", "score": "DOUBLE", "qty": "INTEGER", "ts": "TIMESTAMPTZ", "ok": "BOOLEAN"}


def with_spark(in_dir: str, out: str, fmt: str) -> None:
    """Spark's JSON or CSV reader and Parquet writer on local[2] (the UI off, as gobblin-py's session has it)."""
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("baseline-files-to-parquet")
             .config("spark.ui.enabled", "false").getOrCreate())
    try:
        reader = spark.read.schema(SPARK_SCHEMA)
        (reader.csv(in_dir, header=True) if fmt == "csv" else reader.json(in_dir)).write.parquet(out)
    finally:
        spark.stop()


def with_duckdb(in_dir: str, out: str, fmt: str) -> None:
    """DuckDB's JSON or CSV reader and Parquet writer, on every core."""
    import duckdb

    columns = "{" + ", ".join(f"'{name}': '{kind}'" for name, kind in DUCKDB_COLUMNS.items()) + "}"
    read = (f"read_csv('{in_dir}/*.csv', header = true, columns = {columns})" if fmt == "csv" else
            f"read_json('{in_dir}/*.jsonl', format = 'newline_delimited', columns = {columns})")
    duckdb.sql(f"COPY (SELECT * FROM {read}) TO '{out}' (FORMAT parquet)")


def with_pyarrow(in_dir: str, out: str, fmt: str) -> None:
    """Arrow's JSON or CSV reader (its own threads) and Parquet writer, one file at a time."""
    from pathlib import Path

    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.json as pj
    import pyarrow.parquet as pq

    types = {"BIGINT": pa.int64(), "INTEGER": pa.int32(), "VARCHAR": pa.string(), "DOUBLE": pa.float64(),
             "TIMESTAMPTZ": pa.timestamp("ms", "UTC"), "BOOLEAN": pa.bool_()}
    schema = pa.schema([(name, types[kind]) for name, kind in DUCKDB_COLUMNS.items()])
    Path(out).mkdir(parents=True, exist_ok=True)
    for path in sorted(Path(in_dir).glob(f"*.{fmt}")):
        if fmt == "csv":
            table = pcsv.read_csv(path, convert_options=pcsv.ConvertOptions(column_types=schema))
        else:
            table = pj.read_json(path, parse_options=pj.ParseOptions(explicit_schema=schema))
        pq.write_table(table, Path(out) / f"{path.stem}.parquet")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("engine", choices=("spark", "duckdb", "pyarrow"))
    ap.add_argument("in_dir")
    ap.add_argument("out")
    ap.add_argument("--format", choices=("jsonl", "csv"), default="jsonl")
    args = ap.parse_args()
    t0 = time.perf_counter()
    {"spark": with_spark, "duckdb": with_duckdb, "pyarrow": with_pyarrow}[args.engine](args.in_dir, args.out, args.format)
    print(json.dumps({"seconds": time.perf_counter() - t0}))


if __name__ == "__main__":
    main()
