"""Benchmark: the jdbc source (PostgreSQL or MariaDB → Parquet or Avro) against the tools a user would pick instead, in one run.

    .venv/bin/python scripts/bench_jdbc.py [--db postgres|mariadb] [--rows 2000000] [--rounds 1] [--sink parquet|avro]
                                           [--changed 0.01] [--skip-rows-reader]

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

`--db mariadb` starts a local MariaDB instead (the tests' server, tests/jdbc_mysql/mariadb_server.py: Debian's
`mariadb-server` package, 127.0.0.1, InnoDB's buffer pool grown to 1 GiB so the table is read from memory as
PostgreSQL's is from the page cache) and loads the same table in MariaDB's types (bigint key, datetime(6) watermark
stamped in UTC and read with `watermark_zone: UTC` — a `timestamp` column would keep ConnectorX away —, int,
decimal(12,2), smallint, double, varchar(16), varchar(64), boolean, date) from the Sequence engine's `seq_1_to_N`.
The contenders: gobblin-py three times, with the jdbc source's default `reader: auto` (ConnectorX into Arrow, going on by
rows past a value it cannot read), with `reader: rows` (PyMySQL's rows), and with `first_load_split: watermark` (the
first load split on `updated_at` by COUNT and NTILE, as before issue 47, instead of on the primary key), all as above
(the first is the one the ratios are taken against, and the one run again incrementally); dlt on ConnectorX against the mysql:// URL; and the one-process
ConnectorX script (scripts/baseline_jdbc_connectorx.py: `connectorx.read_sql(…, return_type="arrow")` → one
`pq.write_table`) in the ADBC script's place. A contender that exits non-zero is reported FAILED, not fatal.

After the last round, `--changed` of the rows get a new `updated_at` and gobblin-py runs again incrementally, as
shipped (a run this small runs its tasks in the driver: `spark.in_driver_below`); then as many other rows change and
it runs with Spark forced (`in_driver_below: 0`). Both times against the full run's.
Writes scripts/results/bench_jdbc-<N>-<sink>.json (PostgreSQL) or bench_jdbc-<N>-<sink>-mariadb.json.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench_common import (  # noqa: E402  (scripts/ is on sys.path: these run as scripts)
    REFERENCE,
    ReadBack,
    Tool,
    avro_read_back,
    compare,
    data_files,
    gobblin_details,
    last_run,
    parquet_read_back,
    print_comparison,
    round_dir,
    run_rounds,
    server_cpu_seconds,
)
from bench_results import save  # noqa: E402

from gobblin_py.demo.pg_server import PASSWORD, LocalPostgres  # noqa: E402

TABLE = "public.bench"  # PostgreSQL's
CREATE = """CREATE TABLE bench (id bigint PRIMARY KEY, updated_at timestamptz NOT NULL, customer int, amount numeric(12,2),
  qty smallint, price double precision, status text, note varchar(64), flag boolean, day date)"""
LOAD = """INSERT INTO bench SELECT i, now() - interval '1 hour' - ((%s - i) * 1.3) * interval '1 second', (i * 7919) % 100000,
  ((i * 31) % 1000000) / 100.0, (i % 100)::smallint, i * 0.001, (ARRAY['new','paid','shipped','done'])[i % 4 + 1],
  'note ' || md5(i::text), i % 3 = 0, date '2026-01-01' + (i % 365)::int FROM generate_series(1::bigint, %s) i"""

# MariaDB: the same table and rows. The watermark is a wall clock in UTC (datetime: ConnectorX reads no `timestamp`,
# whose zone is the session's); `watermark_zone: UTC` bounds a run by the newest value instead of an hour before it.
MARIA_TABLE = "bench.bench"
MARIA_CREATE = """CREATE TABLE bench (id bigint PRIMARY KEY, updated_at datetime(6) NOT NULL, customer int,
  amount decimal(12,2), qty smallint, price double, status varchar(16), note varchar(64), flag boolean, day date)"""
MARIA_LOAD = """INSERT INTO bench SELECT seq, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR - INTERVAL ((%s - seq) * 1300000) MICROSECOND,
  (seq * 7919) % 100000, ((seq * 31) % 1000000) / 100, seq % 100, seq * 0.001, ELT(seq % 4 + 1, 'new', 'paid', 'shipped', 'done'),
  CONCAT('note ', MD5(seq)), seq % 3 = 0, DATE '2026-01-01' + INTERVAL (seq % 365) DAY FROM seq_1_to_%s"""
MARIA_BUFFER_POOL = 1 << 30
PEER_PASSWORD_ENV = {"postgres": "PGPASSWORD", "mariadb": "MYSQL_PWD"}  # what the baseline scripts read


@dataclass
class Database:
    """The database under test: its job `url` and the peers' (no password), the table, how gobblin-py finds the
    password, SQL to run on it, the server's root process (its CPU), and what `changed` rows' UPDATE looks like."""

    kind: str  # postgres | mariadb
    url: str
    peer_url: str
    table: str
    password: str
    password_env: str
    execute: Callable[[str], None]
    server_pid: int
    update: Callable[[int, int], str]  # (every k-th id, the remainder) → the UPDATE giving those rows a new watermark
    table_extra: dict = field(default_factory=dict)


def load_mariadb_server():
    """tests/jdbc_mysql/mariadb_server.py, the tests' local MariaDB, imported by its path."""
    path = REPO / "tests" / "jdbc_mysql" / "mariadb_server.py"
    spec = importlib.util.spec_from_file_location("bench_mariadb_server", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def start_postgres(stack: contextlib.ExitStack, rows: int) -> Database:
    pg = stack.enter_context(LocalPostgres())
    db = pg.create_database("bench")
    t0 = time.perf_counter()
    with pg.connect(db) as conn:
        conn.execute(CREATE)
        conn.execute(LOAD.replace("%s", str(int(rows))))
        conn.execute("CREATE INDEX ON bench (updated_at)")
        conn.execute("VACUUM ANALYZE bench")
    print(f"loaded {rows} rows in {time.perf_counter() - t0:.1f}s", flush=True)

    def execute(statement: str) -> None:
        with pg.connect(db) as conn:
            conn.execute(statement)

    return Database("postgres", pg.url(db), pg.url(db), TABLE, PASSWORD, "BENCH_PG_PASSWORD", execute, postmaster_pid(pg),
                    lambda k, step: f"UPDATE bench SET updated_at = now(), qty = qty + 1 WHERE id % {k} = {step}")


def start_mariadb(stack: contextlib.ExitStack, rows: int) -> Database:
    server = load_mariadb_server()
    maria = stack.enter_context(server.LocalMariaDB())
    db = maria.create_database("bench")
    maria.execute(db, f"SET GLOBAL innodb_buffer_pool_size = {MARIA_BUFFER_POOL}")
    t0 = time.perf_counter()
    maria.execute(db, MARIA_CREATE, MARIA_LOAD.replace("%s", str(int(rows))), "CREATE INDEX updated ON bench (updated_at)",
                  "ANALYZE TABLE bench")
    print(f"loaded {rows} rows in {time.perf_counter() - t0:.1f}s", flush=True)
    return Database("mariadb", maria.url(db), maria.url(db, scheme="mysql"), MARIA_TABLE, server.PASSWORD,
                    "BENCH_DB_PASSWORD", lambda statement: maria.execute(db, statement), maria.process.pid,
                    lambda k, step: f"UPDATE bench SET updated_at = UTC_TIMESTAMP(6), qty = qty + 1 WHERE id % {k} = {step}",
                    {"watermark_zone": "UTC"})


def timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    took = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{cmd[:4]} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return took, done


def job_file(tmp: Path, db: Database, sink: str, reader: str | None = None, split: str | None = None) -> Path:
    writer = {"class": "parquet"} if sink == "parquet" else {"class": "avro", "codec": "deflate"}
    table = {"table": db.table, "watermark_column": "updated_at", "primary_key": "id", **db.table_extra}
    job = {"job": {"name": "bench", "work_dir": str(tmp / "work")},
           "source": {"class": "jdbc", "url": db.url, "password_env": db.password_env, "partitions": 4,
                      **({"reader": reader} if reader else {}), **({"first_load_split": split} if split else {}),
                      "tables": [table]},
           "writer": writer,
           "publisher": {"final_dir": str(tmp / "output")},
           "spark": {"master": "local[2]"}}
    path = tmp / "job.yaml"
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    return path


def tools(db: Database, sink: str, env: dict[str, str]) -> list[Tool]:
    """gobblin-py and its peers for `sink` on `db`, each writing into the round directory it is given."""
    py, scripts = sys.executable, REPO / "scripts"
    suffix = f".{sink}"
    url, table = db.peer_url, db.table

    def dlt_env(d: Path) -> dict[str, str]:  # dlt keeps its pipelines and config lookups inside the round directory
        return {**env, "DLT_DATA_DIR": str(d / "dlt-data"), "DLT_PROJECT_DIR": str(d), "DLT_LOCAL_DIR": str(d),
                "RUNTIME__DLTHUB_TELEMETRY": "false"}

    out = [
        Tool(REFERENCE, sink, lambda d: [py, "-m", "gobblin_py.cli.main", "run", str(job_file(d, db, sink))],
             lambda d: read_back(data_files(d / "output", suffix), sink), env=lambda d: env,
             details=gobblin_details, keep_last=True),
        Tool("dlt+connectorx", "parquet", lambda d: [py, str(scripts / "baseline_jdbc_dlt.py"), url, table, str(d / "out")],
             lambda d: parquet_read_back(data_files(d / "out", ".parquet")), env=dlt_env),
    ]
    if db.kind == "mariadb":  # the default reader (ConnectorX) above; PyMySQL's rows here; ConnectorX alone for ADBC
        out.insert(1, Tool(f"{REFERENCE} rows", sink,
                           lambda d: [py, "-m", "gobblin_py.cli.main", "run", str(job_file(d, db, sink, "rows"))],
                           lambda d: read_back(data_files(d / "output", suffix), sink), env=lambda d: env,
                           details=gobblin_details))
        out.insert(2, Tool(f"{REFERENCE} watermark split", sink,  # the first load's split before issue 47
                           lambda d: [py, "-m", "gobblin_py.cli.main", "run", str(job_file(d, db, sink, None, "watermark"))],
                           lambda d: read_back(data_files(d / "output", suffix), sink), env=lambda d: env,
                           details=gobblin_details))
        out.append(Tool("connectorx+pyarrow", "parquet",
                        lambda d: [py, str(scripts / "baseline_jdbc_connectorx.py"), url, table, str(d / "bench.parquet")],
                        lambda d: parquet_read_back([d / "bench.parquet"]), env=lambda d: env))
        return out
    out.append(Tool("adbc+pyarrow", "parquet",
                    lambda d: [py, str(scripts / "baseline_jdbc_to_parquet.py"), url, table, str(d / "bench.parquet")],
                    lambda d: parquet_read_back([d / "bench.parquet"]), env=lambda d: env))
    if sink == "avro":
        out.append(Tool("psycopg-copy+fastavro", "avro",
                        lambda d: [py, str(scripts / "baseline_jdbc_to_avro.py"), url, table, str(d / "bench.avro")],
                        lambda d: avro_read_back([d / "bench.avro"]), env=lambda d: env))
    return out


def read_back(files: list[Path], sink: str) -> ReadBack:
    return parquet_read_back(files) if sink == "parquet" else avro_read_back(files)


def postmaster_pid(pg: LocalPostgres) -> int:
    """The server's root process, whose tree (connections' backends included) is the database's CPU."""
    return int((pg.data / "postmaster.pid").read_text().split()[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", choices=("postgres", "mariadb"), default="postgres", help="the database read")
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--sink", choices=("parquet", "avro"), default="parquet", help="what gobblin-py writes")
    ap.add_argument("--changed", type=float, default=0.01)
    ap.add_argument("--skip-rows-reader", action="store_true",
                    help="MariaDB: leave out gobblin-py with reader: rows (a minute a round at 2M rows)")
    args = ap.parse_args()
    py = sys.executable
    with contextlib.ExitStack() as stack:
        scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-jdbc-"))
        db = (start_mariadb if args.db == "mariadb" else start_postgres)(stack, args.rows)
        env = {**os.environ, PEER_PASSWORD_ENV[db.kind]: db.password, db.password_env: db.password,
               "SPARK_LOCAL_IP": "127.0.0.1"}
        contenders = [t for t in tools(db, args.sink, env) if not (args.skip_rows_reader and t.name == f"{REFERENCE} rows")]
        figures = run_rounds(contenders, args.rounds, args.rows, Path(scratch), lambda: server_cpu_seconds(db.server_pid))
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
            db.execute(db.update(args.rows // changed, step))  # another `changed` rows each time: ids ≡ step (mod rows/changed)
            took, done = timed([py, "-m", "gobblin_py.cli.main", "run", "-v", str(run_dir / "job.yaml")], run_dir, env)
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
        "db": args.db, "rows": args.rows, "sink": args.sink, "rounds": args.rounds, "machine_cores": os.cpu_count(),
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
    save(f"bench_jdbc-{args.rows}-{args.sink}" + ("-mariadb" if args.db == "mariadb" else ""), result)


if __name__ == "__main__":
    main()
