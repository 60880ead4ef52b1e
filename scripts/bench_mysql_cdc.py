"""mysql_cdc benchmarks (issue 45), against a local MariaDB writing a row-based binlog (the OS package, as the tests
start it: tests/jdbc_mysql/mariadb_server.py).

- `--phase snapshot`: a table of `--rows` rows read by the first run of mysql_cdc (its chunked snapshot, one task per
  chunk) against the jdbc source's full load of the same table, both into Parquet, both read back by id.
- `--phase stream`: `--changes` changes (inserts and updates of rows already there, in transactions of `--per-txn`)
  written after the table's snapshot, then one run applies them into an Iceberg table in upsert mode. Reported:
  changes applied a second (the run's wall time, process start included). The table is read back with pyiceberg and
  compared with `SELECT` by key: a run that lost or doubled a row is reported as wrong, never as fast.

    python scripts/bench_mysql_cdc.py --phase snapshot --rows 1000000
    python scripts/bench_mysql_cdc.py --phase stream --changes 200000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from jdbc_mysql.mariadb_server import PASSWORD, LocalMariaDB  # noqa: E402

PASSWORD_ENV = "GOBBLIN_BENCH_MYSQL_PASSWORD"
RESULTS = ROOT / "scripts" / "results"


def gobblin(args: list[str], cwd: Path) -> tuple[int, float, str]:
    """(exit code, seconds, output) of `gobblin-py ARGS`."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "gobblin_py.cli.main", *args], cwd=cwd, text=True,
                          env={**os.environ, PASSWORD_ENV: PASSWORD, "PYTHONPATH": str(ROOT)}, capture_output=True)
    return done.returncode, time.monotonic() - started, done.stdout + done.stderr


def cdc_job(tmp: Path, maria: LocalMariaDB, publisher: dict[str, Any]) -> dict[str, Any]:
    return {"job": {"name": "bench", "work_dir": str(tmp / "work")},
            "source": {"class": "mysql_cdc", "url": maria.url("bench", "mysql"), "password_env": PASSWORD_ENV,
                       "tables": ["bench.acct"], "snapshot": {"chunk_rows": 100_000, "chunks_per_run": 64}},
            "writer": {"class": "parquet"}, "publisher": publisher, "spark": {"master": "local[2]"}}


def fill(maria: LocalMariaDB, rows: int) -> None:
    maria.create_database("bench")
    maria.execute("bench", "CREATE TABLE acct (id bigint PRIMARY KEY, owner varchar(40), balance bigint, note text, "
                           "updated_at timestamp(6) NOT NULL)")
    with maria.connect("bench") as conn, conn.cursor() as cur:
        cur.execute("SET SESSION max_recursive_iterations = 100000000")
        for start in range(0, rows, 100_000):
            cur.execute("INSERT INTO acct SELECT seq, CONCAT('o', seq), seq, NULL, NOW(6) - INTERVAL 1 HOUR FROM seq_%s_to_%s"
                        % (start + 1, min(rows, start + 100_000)))


def snapshot(args: argparse.Namespace) -> dict[str, Any]:
    import pyarrow.parquet as pq

    tmp = Path(tempfile.mkdtemp(prefix="bench-mysql-cdc-"))
    out: dict[str, Any] = {"phase": "snapshot", "rows": args.rows}
    with LocalMariaDB(binlog=True) as maria:
        fill(maria, args.rows)
        jobs = {
            "mysql_cdc": cdc_job(tmp / "mysql_cdc", maria, {"final_dir": str(tmp / "mysql_cdc" / "output")}),
            "jdbc": {"job": {"name": "bench", "work_dir": str(tmp / "jdbc" / "work")},
                     "source": {"class": "jdbc", "url": maria.url("bench"), "password_env": PASSWORD_ENV,
                                "tables": [{"table": "bench.acct", "watermark_column": "updated_at",
                                            "primary_key": ["id"]}]},
                     "writer": {"class": "parquet"}, "publisher": {"final_dir": str(tmp / "jdbc" / "output")},
                     "spark": {"master": "local[2]"}},
        }
        for tool, job in jobs.items():
            where = tmp / tool
            where.mkdir(parents=True, exist_ok=True)
            (where / "job.yaml").write_text(yaml.safe_dump(job))
            code, took, text = gobblin(["run", "job.yaml"], where)
            ids: list[int] = []
            for f in sorted((where / "output").rglob("*.parquet")):
                ids += pq.read_table(f, columns=["id"]).column("id").to_pylist()
            ids = [i for i in ids if i is not None]  # the snapshot's leading truncate record has no key
            out[tool] = {"seconds": round(took, 1), "rows_per_s": round(len(ids) / took), "exit": code,
                         "rows_read_back": len(ids),
                         "ok": code == 0 and sorted(ids) == list(range(1, args.rows + 1))}
            if not out[tool]["ok"]:
                print(text[-3000:], file=sys.stderr)
    return out


def stream(args: argparse.Namespace) -> dict[str, Any]:
    from pyiceberg.catalog import load_catalog

    tmp = Path(tempfile.mkdtemp(prefix="bench-mysql-cdc-"))
    with LocalMariaDB(binlog=True) as maria:
        fill(maria, args.initial)
        publisher = {"class": "iceberg", "table": "db.acct", "warehouse": str(tmp / "warehouse"), "mode": "upsert",
                     "key": ["id"], "order_by": ["_pos", "_seq"], "delete_when": {"column": "_op", "equals": ["delete"]},
                     "truncate_when": {"column": "_op", "equals": ["truncate"]}}
        (tmp / "job.yaml").write_text(yaml.safe_dump(cdc_job(tmp, maria, publisher)))
        for _ in range(2):  # the snapshot's chunks, then the stream that follows them
            code, _, text = gobblin(["run", "job.yaml"], tmp)
            if code:
                raise SystemExit(f"a first run failed: {text[-2000:]}")
        with maria.connect("bench", autocommit=False) as conn, conn.cursor() as cur:
            next_id = args.initial + 1
            for t in range(args.changes // args.per_txn):
                for n in range(args.per_txn):
                    if n % 2:
                        cur.execute("UPDATE acct SET balance = balance + 1, note = 'u' WHERE id = %s",
                                    (1 + ((t * args.per_txn + n) * 7919) % args.initial,))
                    else:
                        cur.execute("INSERT INTO acct VALUES (%s, 'n', 0, NULL, NOW(6))", (next_id,))
                        next_id += 1
                conn.commit()
        code, took, text = gobblin(["run", "job.yaml"], tmp)
        catalog = load_catalog("gobblin_py", type="sql", uri=f"sqlite:///{tmp / 'work' / 'iceberg' / 'catalog.db'}")
        fields = ("id", "owner", "balance", "note")
        rows = catalog.load_table("db.acct").scan(selected_fields=fields).to_arrow().to_pylist()
        same = sorted(tuple(r[c] for c in fields) for r in rows) == sorted(
            maria.query("bench", "SELECT id, owner, balance, note FROM acct"))
        changes = (args.changes // args.per_txn) * args.per_txn
        return {"phase": "stream", "initial_rows": args.initial, "changes": changes, "per_txn": args.per_txn,
                "exit": code, "seconds": round(took, 1), "applied_per_s": round(changes / took),
                "table_equals_source": same}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phase", choices=["snapshot", "stream"], required=True)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--initial", type=int, default=100_000)
    parser.add_argument("--changes", type=int, default=100_000)
    parser.add_argument("--per-txn", type=int, default=10)
    args = parser.parse_args()
    result = snapshot(args) if args.phase == "snapshot" else stream(args)
    result["date"] = time.strftime("%Y-%m-%d")
    print(json.dumps(result, indent=2))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"bench_mysql_cdc_{args.phase}.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
