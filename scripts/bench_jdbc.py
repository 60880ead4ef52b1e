"""Benchmark: the jdbc source (PostgreSQL → Parquet or Avro) against the tools a user would pick instead, in one run.

    .venv/bin/python scripts/bench_jdbc.py [--rows 2000000] [--rounds 1] [--sink parquet|avro] [--changed 0.01]

Starts a local PostgreSQL 16 (pgserver's binaries, 127.0.0.1), loads N rows of a 10-column table (bigint key,
timestamptz watermark, int, numeric(12,2), smallint, double, text, varchar, boolean, date), then, `rounds` times,
each cold in a child process from a fresh directory, the order rotated every round:
`gobblin-py run` on local[2] with 4 sub-ranges (Spark's start included; writer `parquet`, or `avro` deflate),
dlt (scripts/baseline_jdbc_dlt.py: `sql_table` on ConnectorX → the filesystem destination, Parquet), and the
one-process ADBC script (scripts/baseline_jdbc_to_parquet.py: Arrow batches → one ParquetWriter); with `--sink avro`
also psycopg's binary COPY → fastavro (scripts/baseline_jdbc_to_avro.py). Every output is read back (pyarrow,
fastavro): a tool that loses or doubles a row is WRONG and never the fastest. Prints each tool's median time, rows/s
and its time against gobblin-py's (above 1: gobblin-py is faster), with the machine's CPU pressure and the cores other
work used in each round (the database's CPU not counted as other work). `--rows 20000` is the small first load.

After the last round, `--changed` of the rows get a new `updated_at` and gobblin-py runs again incrementally, as
shipped (a run this small runs its tasks in the driver: `spark.in_driver_below`); then as many other rows change and
it runs with Spark forced (`in_driver_below: 0`). Both times against the full run's.
Writes scripts/results/bench_jdbc-<N>-<sink>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gobblin_py.demo.pg_server import PASSWORD, LocalPostgres  # noqa: E402
from bench_common import (  # noqa: E402  (scripts/ is on sys.path: these run as scripts)
    REFERENCE, Measured, ReadBack, Tool, avro_read_back, compare, data_files, parquet_read_back, print_comparison,
    round_dir, run_rounds, server_cpu_seconds)
from bench_results import save  # noqa: E402

TABLE = "public.bench"
CREATE = """CREATE TABLE bench (id bigint PRIMARY KEY, updated_at timestamptz NOT NULL, customer int, amount numeric(12,2),
  qty smallint, price double precision, status text, note varchar(64), flag boolean, day date)"""
LOAD = """INSERT INTO bench SELECT i, now() - interval '1 hour' - ((%s - i) * 1.3) * interval '1 second', (i * 7919) % 100000,
  ((i * 31) % 1000000) / 100.0, (i % 100)::smallint, i * 0.001, (ARRAY['new','paid','shipped','done'])[i % 4 + 1],
  'note ' || md5(i::text), i % 3 = 0, date '2026-01-01' + (i % 365)::int FROM generate_series(1::bigint, %s) i"""


def timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    took = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{cmd[:4]} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return took, done


def job_file(tmp: Path, url: str, sink: str) -> Path:
    writer = {"class": "parquet"} if sink == "parquet" else {"class": "avro", "codec": "deflate"}
    job = {"job": {"name": "bench", "work_dir": str(tmp / "work")},
           "source": {"class": "jdbc", "url": url, "password_env": "BENCH_PG_PASSWORD", "partitions": 4,
                      "tables": [{"table": TABLE, "watermark_column": "updated_at", "primary_key": "id"}]},
           "writer": writer,
           "publisher": {"final_dir": str(tmp / "output")},
           "spark": {"master": "local[2]"}}
    path = tmp / "job.yaml"
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    return path


def last_run(tmp: Path) -> dict:
    runs = sorted((tmp / "work" / "state" / "bench" / "runs").glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
    return json.loads(runs[-1].read_text())["body"]


def gobblin_details(tmp: Path, m: Measured) -> dict:
    """gobblin-py's own account of its run: phases, tasks, rows written, rows that took the columnar path."""
    state = last_run(tmp)
    return {"phases": state["phases"], "tasks": len(state["tasks"]),
            "records_written": sum(t["records_written"] for t in state["tasks"]),
            "records_columnar": sum(t.get("records_columnar", 0) for t in state["tasks"])}


def tools(url: str, sink: str, env: dict[str, str]) -> list[Tool]:
    """gobblin-py and its peers for `sink`, each writing into the round directory it is given."""
    py, scripts = sys.executable, REPO / "scripts"
    suffix = f".{sink}"

    def dlt_env(d: Path) -> dict[str, str]:  # dlt keeps its pipelines and config lookups inside the round directory
        return {**env, "DLT_DATA_DIR": str(d / "dlt-data"), "DLT_PROJECT_DIR": str(d), "DLT_LOCAL_DIR": str(d),
                "RUNTIME__DLTHUB_TELEMETRY": "false"}

    out = [
        Tool(REFERENCE, sink, lambda d: [py, "-m", "gobblin_py.cli.main", "run", str(job_file(d, url, sink))],
             lambda d: read_back(data_files(d / "output", suffix), sink), env=lambda d: env,
             details=gobblin_details, keep_last=True),
        Tool("dlt+connectorx", "parquet", lambda d: [py, str(scripts / "baseline_jdbc_dlt.py"), url, TABLE, str(d / "out")],
             lambda d: parquet_read_back(data_files(d / "out", ".parquet")), env=dlt_env),
        Tool("adbc+pyarrow", "parquet",
             lambda d: [py, str(scripts / "baseline_jdbc_to_parquet.py"), url, TABLE, str(d / "bench.parquet")],
             lambda d: parquet_read_back([d / "bench.parquet"]), env=lambda d: env),
    ]
    if sink == "avro":
        out.append(Tool("psycopg-copy+fastavro", "avro",
                        lambda d: [py, str(scripts / "baseline_jdbc_to_avro.py"), url, TABLE, str(d / "bench.avro")],
                        lambda d: avro_read_back([d / "bench.avro"]), env=lambda d: env))
    return out


def read_back(files: list[Path], sink: str) -> ReadBack:
    return parquet_read_back(files) if sink == "parquet" else avro_read_back(files)


def postmaster_pid(pg: LocalPostgres) -> int:
    """The server's root process, whose tree (connections' backends included) is the database's CPU."""
    return int((pg.data / "postmaster.pid").read_text().split()[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--sink", choices=("parquet", "avro"), default="parquet", help="what gobblin-py writes")
    ap.add_argument("--changed", type=float, default=0.01)
    args = ap.parse_args()
    py = sys.executable
    env = {**os.environ, "PGPASSWORD": PASSWORD, "BENCH_PG_PASSWORD": PASSWORD, "SPARK_LOCAL_IP": "127.0.0.1"}
    with LocalPostgres() as pg, tempfile.TemporaryDirectory(prefix="bench-jdbc-") as scratch:
        db = pg.create_database("bench")
        t0 = time.perf_counter()
        with pg.connect(db) as conn:
            conn.execute(CREATE)
            conn.execute(LOAD.replace("%s", str(int(args.rows))))
            conn.execute("CREATE INDEX ON bench (updated_at)")
            conn.execute("VACUUM ANALYZE bench")
        print(f"loaded {args.rows} rows in {time.perf_counter() - t0:.1f}s", flush=True)
        url = pg.url(db)
        contenders = tools(url, args.sink, env)
        server = postmaster_pid(pg)
        figures = run_rounds(contenders, args.rounds, args.rows, Path(scratch), lambda: server_cpu_seconds(server))
        comparison = compare(figures, args.rows, {t.name: t.writes for t in contenders})
        print_comparison(comparison)
        run_dir = round_dir(Path(scratch), args.rounds - 1, contenders[0])
        if figures[REFERENCE][-1]["verdict"] != "ok":
            raise SystemExit(f"gobblin-py's last full run was {figures[REFERENCE][-1]['verdict']}: no incremental runs")
        changed = int(args.rows * args.changed)
        incremental: dict[str, dict] = {}
        for where, step, limit in (("driver", 0, None), ("spark", 1, 0)):  # as shipped, then with Spark forced
            job = yaml.safe_load((run_dir / "job.yaml").read_text())
            job["spark"].pop("in_driver_below", None)
            if limit is not None:
                job["spark"]["in_driver_below"] = limit
            (run_dir / "job.yaml").write_text(yaml.safe_dump(job, sort_keys=False))
            with pg.connect(db) as conn:  # another `changed` rows each time: ids ≡ step (mod rows/changed)
                conn.execute("UPDATE bench SET updated_at = now(), qty = qty + 1 WHERE id %% %s = %s" % (args.rows // changed, step))
            took, done = timed([py, "-m", "gobblin_py.cli.main", "run", str(run_dir / "job.yaml")], run_dir, env)
            assert ("in the driver, not on Spark" in done.stderr) == (where == "driver"), done.stderr
            state = last_run(run_dir)
            written = sum(t["records_written"] for t in state["tasks"])
            assert written == changed, (written, changed)
            incremental[where] = {"wall_s": took, "rows": written, "phases": state["phases"],
                                  "task_s": [t["duration_s"] for t in state["tasks"]],
                                  "log": [line.split(": ", 1)[-1] for line in done.stderr.splitlines() if "in the driver" in line]}
            print(f"incremental after {changed} changed rows, tasks in the {where}: {took:6.2f}s  phases "
                  f"{ {k: round(v, 2) for k, v in state['phases'].items()} }  tasks {incremental[where]['task_s']}", flush=True)
        # the output now holds the full load and each changed row once more per change (appended, not merged)
        found = read_back(data_files(run_dir / "output", f".{args.sink}"), args.sink)
        after = {"rows": found.rows, "distinct_ids": found.distinct_ids, "expected_rows": args.rows + 2 * changed,
                 "verdict": "ok" if (found.rows, found.distinct_ids) == (args.rows + 2 * changed, args.rows) else "WRONG"}
        print(f"after the incremental runs: read back {found.rows} rows, {found.distinct_ids} ids: {after['verdict']}")
    med = statistics.median
    full = comparison["tools"][REFERENCE]["median_s"]
    on_spark = incremental["spark"]
    result = {
        "rows": args.rows, "sink": args.sink, "rounds": args.rounds, "machine_cores": os.cpu_count(),
        "comparison": comparison,
        "gobblin_tasks_s": med(f["phases"]["tasks"] for f in figures[REFERENCE] if "phases" in f),
        "incremental": incremental, "read_back_after_incremental": after,
        # the measure, the incremental run against the full run: as shipped (a run this small runs its tasks
        # in the driver: no Spark start at all) ...
        "incremental_vs_full": incremental["driver"]["wall_s"] / full,
        # ... and with Spark forced (spark.in_driver_below: 0), beyond its start; and beyond Spark's fixed costs: its
        # start and, in the tasks phase, what is not the tasks' own time (the first Python workers' fork and imports,
        # scheduling: the tasks phase less the longest task, as 2 tasks run side by side)
        "incremental_on_spark_vs_full": on_spark["wall_s"] / full,
        "incremental_on_spark_after_start_vs_full": (on_spark["wall_s"] - on_spark["phases"]["executor_start"]) / full,
        "incremental_on_spark_fixed_s": on_spark["phases"]["tasks"] - max(on_spark["task_s"]),
        "incremental_on_spark_beyond_spark_fixed_vs_full": (on_spark["wall_s"] - on_spark["phases"]["executor_start"]
                                                            - on_spark["phases"]["tasks"] + max(on_spark["task_s"])) / full,
        "figures": figures,
    }
    print(json.dumps({k: v for k, v in result.items() if k not in ("figures", "comparison")}, indent=1))
    save(f"bench_jdbc-{args.rows}-{args.sink}", result)


if __name__ == "__main__":
    main()
