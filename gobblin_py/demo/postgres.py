"""`gobblin-py demo postgres`: a local PostgreSQL 16, a table of sample orders, a JDBC job file for it, and one run.

Everything it writes goes under one directory (default `./postgres-demo`): the job file, the job's work directory and
its output. It then keeps inserting and updating orders until Ctrl-C, so that each further run of the printed command
extracts the row versions written since the last one, exactly once.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gobblin_py.demo.kafka import run_job
from gobblin_py.demo.pg_server import PASSWORD, LocalPostgres

DATABASE = "shop"
TABLE = "orders"
PASSWORD_ENV = "DEMO_PG_PASSWORD"


@dataclass(frozen=True)
class DemoOptions:
    """What `gobblin-py demo postgres` was asked for."""

    directory: Path
    rows: int = 1000
    rate: int = 50
    seconds: float = 0.0
    once: bool = False
    data_dir: Path | None = None  # where the server's data directory goes (None: the temp directory)


def create_table(server: LocalPostgres, rows: int) -> None:
    """The `orders` table, its `version` a sequence every insert and update takes (the job's watermark)."""
    with server.connect(DATABASE) as conn:
        conn.execute("CREATE SEQUENCE order_versions")
        conn.execute(f"CREATE TABLE {TABLE} (id bigserial PRIMARY KEY, version bigint NOT NULL DEFAULT nextval('order_versions'), "
                     "customer text NOT NULL, amount double precision NOT NULL, status text NOT NULL, "
                     "updated_at timestamptz NOT NULL DEFAULT now())")
        insert(conn, rows)


def insert(conn: Any, rows: int) -> None:
    """`rows` new orders."""
    conn.execute(f"INSERT INTO {TABLE} (customer, amount, status) SELECT 'c' || (g %% 97), (g %% 500) / 10.0, 'new' "
                 "FROM generate_series(1, %s) g", (rows,))


def update(conn: Any, rows: int) -> None:
    """`rows` orders shipped: each gets a new version, so the next run extracts it again (a new row version)."""
    conn.execute(f"UPDATE {TABLE} SET status = 'shipped', version = nextval('order_versions'), updated_at = now() "
                 f"WHERE id IN (SELECT id FROM {TABLE} WHERE status = 'new' ORDER BY id LIMIT %s)", (rows,))


def write_job(directory: Path, url: str) -> Path:
    """The demo's job file under `directory`, with absolute paths so it runs from anywhere; its path."""
    directory.mkdir(parents=True, exist_ok=True)
    job = {
        "job": {"name": "postgres-demo", "work_dir": str(directory / "work")},
        "source": {"class": "jdbc", "url": url, "password_env": PASSWORD_ENV,
                   "tables": [{"table": TABLE, "watermark_column": "version", "primary_key": "id", "watermark_lag": 0}]},
        "writer": {"class": "avro", "codec": "deflate"},
        "publisher": {"final_dir": str(directory / "output")},
    }
    path = directory / "postgres-demo.yaml"
    path.write_text(f"# Written by `gobblin-py demo postgres`: the demo database's orders → Avro under output/, exactly once.\n"
                    f"# {PASSWORD_ENV}={PASSWORD} gobblin-py run {path}\n" + yaml.safe_dump(job, sort_keys=False))
    return path


def demo(options: DemoOptions, say: Callable[[str], None] = print) -> int:
    """Start PostgreSQL, fill the table, run the job once, then (unless `once`) write orders until stopped; the run's
    exit code."""
    directory = options.directory.resolve()
    with LocalPostgres(data_dir=options.data_dir) as server:
        server.create_database(DATABASE)
        create_table(server, options.rows)
        job = write_job(directory, server.url(DATABASE))
        say(f"PostgreSQL 16 on {server.host}:{server.port} (deleted when the demo stops); database {DATABASE}, table "
            f"{TABLE}: {options.rows} orders")
        say(f"running: {PASSWORD_ENV}={PASSWORD} gobblin-py run {job}")
        code = run_job(job, {PASSWORD_ENV: PASSWORD})
        say(f"output: {directory / 'output'} (Avro, one directory per table)")
        if options.once:
            return code
        say(f"inserting and shipping {options.rate} orders/s; in another terminal run again, as often as you like:\n\n"
            f"    {PASSWORD_ENV}={PASSWORD} gobblin-py run {job}\n\nCtrl-C stops the database.")
        started, written = time.monotonic(), 0
        per_tick = max(1, options.rate // 2)
        try:
            with server.connect(DATABASE) as conn:
                while not options.seconds or time.monotonic() - started < options.seconds:
                    insert(conn, per_tick)
                    update(conn, per_tick // 2 or 1)
                    written += per_tick + (per_tick // 2 or 1)
                    print(f"\r{written} row versions written", end="", file=sys.stderr, flush=True)
                    time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        say(f"\nstopping the database after {written} more row versions")
    return code
