"""Benchmark: the files source (JSON lines or CSV → Parquet) against plain PySpark, DuckDB and pyarrow, in one run.

    .venv/bin/python scripts/bench_files.py [--records 2000000] [--files 16] [--rounds 1] [--format csv]

Writes N JSON-lines records (10 fields: ints, floats, strings, an ISO timestamp, a bool; ids unique) into 16 files
of one dataset directory, then, `rounds` times, each cold in a child process from a fresh directory, the order
rotated every round: `gobblin-py run` (files source → json_to_avro → parquet writer, local[2]), plain PySpark on
local[2] (`spark.read.schema(explicit).json(dir).write.parquet(out)`) and DuckDB (`COPY (SELECT * FROM
read_json(..., columns={...})) TO out (FORMAT parquet)`) and a one-process pyarrow script (`pyarrow.json.read_json`
with the explicit schema → `pq.write_table`, file by file), all scripts/baseline_files_to_parquet.py. Every output is
read back with pyarrow: a tool that loses or doubles a record is WRONG and never the fastest. Prints each tool's
median time, records/s and its time against gobblin-py's (above 1: gobblin-py is faster), with the machine's CPU
pressure and the cores other work used in each round. Writes scripts/results/bench_files-<N>.json.

`--format csv` writes the same records as CSV files with a header row (the timestamp ISO text, the boolean
`true`/`false`) and compares against DuckDB's `read_csv` and a `pyarrow.csv` script (PySpark too with `--spark`);
it writes scripts/results/bench_files-<N>-csv.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import orjson
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench_common import Tool, compare, data_files, gobblin_details, parquet_read_back, print_comparison, run_rounds  # noqa: E402  (scripts/ is on sys.path: these run as scripts)
from bench_results import save  # noqa: E402

DATASET = "events"
SCHEMA = {"type": "record", "name": "BenchFileEvent", "fields": [
    {"name": "id", "type": "long"}, {"name": "user_id", "type": "int"}, {"name": "session", "type": "string"},
    {"name": "page", "type": "string"}, {"name": "country", "type": "string"}, {"name": "amount", "type": "double"},
    {"name": "score", "type": "double"}, {"name": "qty", "type": "int"},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}}, {"name": "ok", "type": "boolean"},
]}
COUNTRIES = ["DE", "FR", "US", "GB", "JP", "BR", "IN", "NL", "SE", "PL"]
PAGES = [f"/shop/item/{i}" for i in range(200)]


def generate(directory: Path, records: int, files: int, fmt: str = "jsonl") -> int:
    """`records` events spread over `files` JSON-lines or CSV files (ids 0..N-1, each once); returns the bytes written."""
    directory.mkdir(parents=True)
    rng = random.Random(7)
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    per, size = -(-records // files), 0
    names = [f["name"] for f in SCHEMA["fields"]]
    for f in range(files):
        lines = [",".join(names).encode()] if fmt == "csv" else []
        for i in range(f * per, min(records, (f + 1) * per)):
            ts = (start + dt.timedelta(milliseconds=i * 37)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
            record = {"id": i, "user_id": rng.randrange(1_000_000), "session": f"{rng.getrandbits(64):016x}",
                      "page": rng.choice(PAGES), "country": rng.choice(COUNTRIES), "amount": round(rng.random() * 500, 2),
                      "score": rng.random(), "qty": rng.randrange(1, 20), "ts": ts, "ok": i % 3 != 0}
            if fmt == "csv":
                lines.append(",".join(str(v).lower() if type(v) is bool else str(v) for v in record.values()).encode())
            else:
                lines.append(orjson.dumps(record))
        path = directory / f"part-{f:02d}.{fmt}"
        path.write_bytes(b"\n".join(lines) + b"\n")
        size += path.stat().st_size
    return size


def job_file(tmp: Path, inputs: Path, schema: Path) -> Path:
    job = {"job": {"name": "bench", "work_dir": str(tmp / "work")},
           "source": {"class": "files", "path": str(inputs)},
           "converters": [{"class": "json_to_avro", "schema": str(schema)}],
           "writer": {"class": "parquet"},
           "publisher": {"final_dir": str(tmp / "output")},
           "spark": {"master": "local[2]"}}
    path = tmp / "job.yaml"
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    return path


def tools(inputs: Path, schema: Path, fmt: str = "jsonl", spark: bool = True) -> list[Tool]:
    """gobblin-py, plain PySpark (unless not `spark`), DuckDB and pyarrow, each writing Parquet into the round
    directory it is given."""
    py, baseline = sys.executable, str(REPO / "scripts" / "baseline_files_to_parquet.py")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    files, how = inputs / DATASET, ["--format", fmt]
    contenders = [
        Tool("gobblin-py", "parquet", lambda d: [py, "-m", "gobblin_py.cli.main", "run", str(job_file(d, inputs, schema))],
             lambda d: parquet_read_back(data_files(d / "output", ".parquet")), env=lambda d: env, details=gobblin_details),
        Tool("pyspark", "parquet", lambda d: [py, baseline, "spark", str(files), str(d / "out"), *how],
             lambda d: parquet_read_back(data_files(d / "out", ".parquet")), env=lambda d: env),
        Tool("duckdb", "parquet", lambda d: [py, baseline, "duckdb", str(files), str(d / "events.parquet"), *how],
             lambda d: parquet_read_back([d / "events.parquet"]), env=lambda d: env),
        Tool("pyarrow", "parquet", lambda d: [py, baseline, "pyarrow", str(files), str(d / "out"), *how],
             lambda d: parquet_read_back(data_files(d / "out", ".parquet")), env=lambda d: env),
    ]
    return [t for t in contenders if spark or t.name != "pyspark"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--files", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--format", choices=("jsonl", "csv"), default="jsonl")
    ap.add_argument("--spark", action=argparse.BooleanOptionalAction, default=None,
                    help="include plain PySpark (default: for JSON lines only)")
    args = ap.parse_args()
    spark = args.format == "jsonl" if args.spark is None else args.spark
    with tempfile.TemporaryDirectory(prefix="bench-files-") as scratch:
        tmp = Path(scratch)
        t0 = time.perf_counter()
        size = generate(tmp / "in" / DATASET, args.records, args.files, args.format)
        print(f"wrote {args.records} records ({size / 2**20:.0f} MiB of {args.format}) into {args.files} files in "
              f"{time.perf_counter() - t0:.1f}s", flush=True)
        schema = tmp / "event.avsc"
        schema.write_text(json.dumps(SCHEMA))
        contenders = tools(tmp / "in", schema, args.format, spark)
        figures = run_rounds(contenders, args.rounds, args.records, tmp / "runs")
    comparison = compare(figures, args.records, {t.name: t.writes for t in contenders})
    print_comparison(comparison)
    name = f"bench_files-{args.records}" + ("-csv" if args.format == "csv" else "")
    save(name, {"records": args.records, "format": args.format, "files": args.files, "input_bytes": size,
                "rounds": args.rounds, "machine_cores": os.cpu_count(), "comparison": comparison, "figures": figures})


if __name__ == "__main__":
    main()
