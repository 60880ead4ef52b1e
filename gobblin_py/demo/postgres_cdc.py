"""`gobblin-py demo postgres --cdc`: a local PostgreSQL 16 with logical decoding, the sample orders table, a
`postgres_cdc` job into an Iceberg upsert table, and rounds of inserts, updates and deletes, each followed by a run, a
comparison of the table with `SELECT * FROM orders` and a quiet pause, until Ctrl-C (or SIGTERM).

Everything it writes goes under one directory (default `./postgres-demo`): the job file, the job's work directory
`cdc-work/` (with the Iceberg catalog, `cdc-work/iceberg/catalog.db`) and the table's files under `warehouse/`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gobblin_py.demo.pg_server import PASSWORD, LocalPostgres
from gobblin_py.demo.postgres import (
    DATABASE,
    PASSWORD_ENV,
    TABLE,
    DemoOptions,
    create_table,
    insert,
    update,
)
from gobblin_py.errors import ConfigError

ICEBERG_TABLE = "shop.orders"
COLUMNS = ("id", "version", "customer", "amount", "status", "updated_at")
WORK = "cdc-work"
"""The job's work directory under the demo's (beside the plain demo's `work/`, so both demos share a --dir)."""
BURSTS = 5
"""Transactions of changes per round."""
LOGICAL = {"wal_level": "logical", "max_replication_slots": 4, "max_wal_senders": 4}


@dataclass(frozen=True)
class CdcDemoOptions(DemoOptions):
    """What `gobblin-py demo postgres --cdc` was asked for: the plain demo's options, and its rounds."""

    rounds: int = 0
    every: float = 5.0


def catalog_db(directory: Path) -> Path:
    """The Iceberg SQL catalog the job's publisher keeps (its default, under the work directory)."""
    return directory / WORK / "iceberg" / "catalog.db"


def check_fresh(directory: Path) -> None:
    """Refuse a --dir holding an earlier CDC demo's state: its slot and database went with that demo's server, so a
    run against the new one would fail (rightly) on the changed cluster."""
    for name in (WORK, "warehouse"):
        if (directory / name).exists():
            raise ConfigError(f"{directory / name} holds an earlier `demo postgres --cdc`, whose database was deleted "
                              f"when it stopped: delete {directory / WORK} and {directory / 'warehouse'}, or pick "
                              "another --dir")


def delete(conn: Any, rows: int) -> None:
    """`rows` shipped orders deleted (the oldest)."""
    conn.execute(f"DELETE FROM {TABLE} WHERE id IN (SELECT id FROM {TABLE} WHERE status = 'shipped' ORDER BY id LIMIT %s)",
                 (rows,))


def write_job(directory: Path, url: str) -> Path:
    """The CDC demo's job file under `directory`, with absolute paths so it runs from anywhere; its path."""
    directory.mkdir(parents=True, exist_ok=True)
    job = {
        "job": {"name": "postgres-cdc-demo", "work_dir": str(directory / WORK)},
        "source": {"class": "postgres_cdc", "url": url, "password_env": PASSWORD_ENV, "slot": "gobblin_demo",
                   "publication": "gobblin_demo", "tables": [f"public.{TABLE}"], "create_publication": True},
        "writer": {"class": "parquet"},
        "publisher": {"class": "iceberg", "table": ICEBERG_TABLE, "warehouse": str(directory / "warehouse"),
                      "mode": "upsert", "key": ["id"], "order_by": ["_lsn", "_seq"],
                      "delete_when": {"column": "_op", "equals": ["delete"]},
                      "truncate_when": {"column": "_op", "equals": ["truncate"]}},
    }
    path = directory / "postgres-cdc-demo.yaml"
    path.write_text("# Written by `gobblin-py demo postgres --cdc`: the demo database's orders, change by change, into an "
                    "Iceberg table kept equal to it by key.\n"
                    f"# {PASSWORD_ENV}={PASSWORD} gobblin-py run {path}\n" + yaml.safe_dump(job, sort_keys=False))
    return path


def compare_snippet(directory: Path, url: str) -> str:
    """The Python a user runs to compare the Iceberg table with `SELECT * FROM orders` by key (what `compare` does)."""
    return (f"    from pyiceberg.catalog import load_catalog; import psycopg\n"
            f"    with psycopg.connect('{url}', password='{PASSWORD}') as conn:\n"
            f"        cur = conn.execute('SELECT * FROM {TABLE}')\n"
            f"        columns = tuple(c.name for c in cur.description)\n"
            f"        source = {{r[0]: dict(zip(columns, r)) for r in cur}}\n"
            f"    catalog = load_catalog('gobblin_py', type='sql', uri='sqlite:///{catalog_db(directory)}')\n"
            f"    rows = catalog.load_table('{ICEBERG_TABLE}').scan(selected_fields=columns).to_arrow().to_pylist()\n"
            f"    table = {{r['id']: r for r in rows}}\n"
            f"    print(sorted(k for k in table.keys() | source.keys() if table.get(k) != source.get(k)) or f'equal: {{len(source)}} rows')")


def compare(directory: Path, server: LocalPostgres) -> tuple[int, list[int]]:
    """The Iceberg table (read with pyiceberg) against `SELECT * FROM orders`, by key: the source's row count and the
    keys whose rows differ (missing on one side or another value)."""
    from pyiceberg.catalog import load_catalog
    from pyiceberg.exceptions import NoSuchTableError

    catalog = load_catalog("gobblin_py", type="sql", uri=f"sqlite:///{catalog_db(directory)}")
    try:
        rows = catalog.load_table(ICEBERG_TABLE).scan(selected_fields=COLUMNS).to_arrow().to_pylist()
    except NoSuchTableError:  # the first run failed: every key differs
        rows = []
    table = {r["id"]: tuple(r[c] for c in COLUMNS) for r in rows}
    with server.connect(DATABASE) as conn:
        source = {r[0]: tuple(r) for r in conn.execute(f"SELECT {', '.join(COLUMNS)} FROM {TABLE}").fetchall()}
    return len(source), sorted(k for k in table.keys() | source.keys() if table.get(k) != source.get(k))


def equality_line(count: int, differing: list[int]) -> str:
    """What the demo prints after each run: `equal: N rows`, or the keys that differ."""
    if not differing:
        return f"equal: {count} rows"
    return f"differ: {len(differing)} of {count} rows, keys {differing[:20]}{' …' if len(differing) > 20 else ''}"


def run_job(job: Path) -> int:
    """One `gobblin-py run` in a child process of its own session (a terminal's Ctrl-C reaches the demo, which lets the
    run finish); its exit code."""
    child = subprocess.Popen([sys.executable, "-m", "gobblin_py.cli.main", "run", str(job)],
                             env={**os.environ, PASSWORD_ENV: PASSWORD}, start_new_session=True)
    try:
        return child.wait()
    finally:
        if child.poll() is None:  # a second Ctrl-C: stop the run now (the next run recovers its commit)
            child.kill()
            child.wait()


class Stop:
    """Set by the first SIGINT or SIGTERM. A second one raises KeyboardInterrupt (stop at once) while `armed`, that is
    while the server is up: never while it starts or stops, where an interrupted pg_ctl could leave it running."""

    def __init__(self) -> None:
        self.requested = False
        self.armed = False

    def __call__(self, signum: int, frame: object) -> None:
        if self.requested and self.armed:
            self.armed = False
            raise KeyboardInterrupt
        self.requested = True

    def sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self.requested and time.monotonic() < end:
            time.sleep(0.1)


@contextmanager
def stop_on_signals() -> Iterator[Stop]:
    stop = Stop()
    before = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield stop
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def demo(options: CdcDemoOptions, say: Callable[[str], None] = print) -> int:
    """Start PostgreSQL (wal_level=logical), fill the table, run the CDC job and compare; then each round write changes,
    run, compare and pause, until stopped (the round in flight ends with its run) or `rounds`/`seconds` are reached;
    the last run's exit code."""
    directory = options.directory.resolve()
    check_fresh(directory)
    started = time.monotonic()
    with stop_on_signals() as stop, LocalPostgres(LOGICAL, options.data_dir) as server:
        stop.armed = True
        try:
            return _rounds(options, directory, server, stop, started, say)
        except KeyboardInterrupt:
            say("\nstopped at once (a second signal): stopping the database")
            raise
        finally:
            stop.armed = False


def _rounds(options: CdcDemoOptions, directory: Path, server: LocalPostgres, stop: Stop, started: float,
            say: Callable[[str], None]) -> int:
    """What the demo does while its server is up; the last run's exit code."""
    server.create_database(DATABASE)
    create_table(server, options.rows)
    url = server.url(DATABASE)
    job = write_job(directory, url)
    say(f"PostgreSQL 16 on {server.host}:{server.port} with wal_level=logical (deleted when the demo stops); "
        f"database {DATABASE}, table {TABLE}: {options.rows} orders")
    say(f"running: {PASSWORD_ENV}={PASSWORD} gobblin-py run {job}")
    code = run_job(job)
    say(equality_line(*compare(directory, server)) + f" (Iceberg table {ICEBERG_TABLE} vs SELECT * FROM {TABLE}, "
        f"{time.monotonic() - started:.1f} s after the start)")
    if options.once:
        return code
    burst = max(1, int(options.rate * options.every))
    say(f"each round: {burst} orders inserted, half as many shipped (updated), a quarter deleted, in {BURSTS} "
        f"transactions; then the job runs and the table is compared; then {options.every:g} s quiet, when your own "
        f"comparison shows it equal too:\n\n{compare_snippet(directory, url)}\n\n"
        "Ctrl-C (or SIGTERM, SIGHUP) ends the round in flight with its run and comparison, then stops the database.")
    rounds = 0
    with server.connect(DATABASE) as conn:
        while not stop.requested and (not options.rounds or rounds < options.rounds) \
                and (not options.seconds or time.monotonic() - started < options.seconds):
            for _ in range(BURSTS):
                with conn.transaction():
                    insert(conn, burst // BURSTS or 1)
                    update(conn, burst // (2 * BURSTS) or 1)
                    delete(conn, burst // (4 * BURSTS) or 1)
            rounds += 1
            code = run_job(job)
            say(f"round {rounds}: " + equality_line(*compare(directory, server)))
            stop.sleep(options.every)
    say(f"stopped after {rounds} rounds: {equality_line(*compare(directory, server))}; stopping the database")
    return code
