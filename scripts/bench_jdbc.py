"""Benchmark: the jdbc source (PostgreSQL → Avro) against the hand-written single-process script, in one run.

    .venv/bin/python scripts/bench_jdbc.py [--rows 2000000] [--rounds 1] [--changed 0.01]

Starts a local PostgreSQL 16 (pgserver's binaries, 127.0.0.1), loads N rows of a 10-column table (bigint key,
timestamptz watermark, int, numeric(12,2), smallint, double, text, varchar, boolean, date), then, `rounds` times,
alternating: the baseline (scripts/baseline_jdbc_to_avro.py: COPY binary → fastavro, one process) and
`gobblin-py run` on local[2] with 4 sub-ranges from a fresh work directory (Spark start included). After the last
round, `--changed` of the rows get a new `updated_at` and gobblin-py runs again incrementally, as shipped (a run
this small runs its tasks in the driver: `spark.in_driver_below`); then as many other rows change and it runs with
Spark forced (`in_driver_below: 0`). Both times against the full run's. Writes scripts/results/bench_jdbc-<N>.json.
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
sys.path.insert(0, str(REPO / "tests"))  # the local server is a test helper: tests/jdbc/pg_server.py

from gobblin_py.demo.pg_server import PASSWORD, LocalPostgres  # noqa: E402
from bench_results import save  # noqa: E402  (scripts/ is on sys.path: these run as scripts)

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


def job_file(tmp: Path, url: str) -> Path:
    job = {"job": {"name": "bench", "work_dir": str(tmp / "work")},
           "source": {"class": "jdbc", "url": url, "password_env": "BENCH_PG_PASSWORD", "partitions": 4,
                      "tables": [{"table": TABLE, "watermark_column": "updated_at", "primary_key": "id"}]},
           "writer": {"class": "avro", "codec": "deflate"},
           "publisher": {"final_dir": str(tmp / "output")},
           "spark": {"master": "local[2]"}}
    path = tmp / "job.yaml"
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    return path


def last_run(tmp: Path) -> dict:
    runs = sorted((tmp / "work" / "state" / "bench" / "runs").glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
    return json.loads(runs[-1].read_text())["body"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--changed", type=float, default=0.01)
    args = ap.parse_args()
    py = sys.executable
    env = {**os.environ, "PGPASSWORD": PASSWORD, "BENCH_PG_PASSWORD": PASSWORD, "SPARK_LOCAL_IP": "127.0.0.1"}
    figures: dict[str, list] = {"baseline": [], "gobblin": []}
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
        tmp = Path(scratch)
        for r in range(args.rounds):
            took, done = timed([py, str(REPO / "scripts" / "baseline_jdbc_to_avro.py"), url, TABLE,
                                str(tmp / f"baseline{r}.avro")], REPO, env)
            base = json.loads(done.stdout.strip().splitlines()[-1])
            assert base["records"] == args.rows, base
            figures["baseline"].append({"wall_s": took, "rows_per_s": args.rows / took})
            print(f"round {r + 1}: baseline  {took:6.2f}s  {args.rows / took:9.0f} rows/s", flush=True)
            run_dir = tmp / f"gobblin{r}"
            run_dir.mkdir()
            took, done = timed([py, "-m", "gobblin_py.cli.main", "run", str(job_file(run_dir, url))], run_dir, env)
            state = last_run(run_dir)
            written = sum(t["records_written"] for t in state["tasks"])
            assert written == args.rows, (written, args.rows)
            figures["gobblin"].append({"wall_s": took, "rows_per_s": args.rows / took, "phases": state["phases"],
                                       "tasks": len(state["tasks"])})
            print(f"round {r + 1}: gobblin   {took:6.2f}s  {args.rows / took:9.0f} rows/s  phases "
                  f"{ {k: round(v, 2) for k, v in state['phases'].items()} }", flush=True)
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
    med = statistics.median
    full = med(f["wall_s"] for f in figures["gobblin"])
    on_spark = incremental["spark"]
    result = {
        "rows": args.rows, "rounds": args.rounds, "machine_cores": os.cpu_count(),
        "baseline_s": med(f["wall_s"] for f in figures["baseline"]), "gobblin_s": full,
        "ratio_whole_job": med(f["wall_s"] for f in figures["baseline"]) / full,
        "gobblin_tasks_s": med(f["phases"]["tasks"] for f in figures["gobblin"]),
        "incremental": incremental,
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
    print(json.dumps({k: v for k, v in result.items() if k != "figures"}, indent=1))
    save(f"bench_jdbc-{args.rows}", result)


if __name__ == "__main__":
    main()
