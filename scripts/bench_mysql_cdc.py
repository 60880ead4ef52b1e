"""mysql_cdc benchmarks (issue 45), against a local MariaDB writing a row-based binlog (the OS package, as the tests
start it: tests/jdbc_mysql/mariadb_server.py).

- `--phase snapshot`: a table of `--rows` rows read by the first run of mysql_cdc (its chunked snapshot, one task per
  chunk of `--chunk-rows`) against the jdbc source's full load of the same table, both into Parquet, in turn
  `--repeat` times, every output read back with pyarrow and its ids counted (each of 1..rows once); with `--baseline
  DIR`, mysql_cdc's first run with that checkout's code too, in the same turn.
- `--phase stream`: `--changes` changes (inserts and updates of rows already there, in transactions of `--per-txn`)
  written after the table's snapshot, then one run applies them into an Iceberg table in upsert mode. Reported:
  changes applied a second (the run's wall time, process start included). The table is read back with pyiceberg and
  compared with `SELECT` by key: a run that lost or doubled a row is reported as wrong, never as fast. With
  `--baseline DIR`, the same with that checkout's code, the two in turn `--repeat` times on the same server.
- `--phase offered`: `run --continuous` while `--sessions` sessions offer changes (multi-row INSERT and UPDATE … IN,
  `--per-txn` a transaction) at each of `--rates` a second for `--seconds`, with `--baseline DIR` that checkout's run
  too, in turn at each rate `--repeat` times: changes applied a second and each transaction's lag to the Iceberg snapshot that holds it, p50/p99 (as
  bench_cdc.py's stream phase for postgres_cdc); the table compared with `SELECT` afterwards. The run starts with
  the offer, so its start (process, imports, a first commit ~3 s slower) is in the figures; `--warmup S` offers S
  seconds more first and counts only what committed after them (the steady state a long-lived run sees). Each run's
  record says whether Spark started (its log's "starting Spark"), its checkpoints' longest duration, and the run's
  own CPU seconds per 1,000 changes (what a change costs, less sensitive than the lag to a shared machine's load).
- `--phase read`: the binlog read alone (`binlog.read` of `--changes` changes to the table, as `--phase stream` writes
  them, every change counted), in a process of its own per read, this checkout, `--baseline DIR`'s, and this
  checkout with every event and value left to mysql-replication (`library`), in turn `--repeat` times on the same
  server: changes read a second and the ratios to this checkout's read in the same round.
- `--phase tables`: the same `--changes` (inserts and updates, in transactions of `--per-txn`, each in one table, the
  tables in turn) written to one table, then to `--tables` tables, each after the tables' snapshot; one run (tasks in
  the driver, `--in-process`, so no executor start weighs on either) reads them into Avro change files. Reported: each
  run's seconds and changes a second, and the many-table run's time over the one-table run's (issue 45's goal: at most
  1.5). With `--baseline DIR` (a checkout of the code before a change, e.g. `git worktree add /tmp/base main`) the
  same is measured with that code in the same invocation, on the same server. Every table's records replayed by key
  must equal its `SELECT`, else the run is reported wrong.

    python scripts/bench_mysql_cdc.py --phase snapshot --rows 1000000
    python scripts/bench_mysql_cdc.py --phase stream --changes 100000 --baseline /tmp/base
    python scripts/bench_mysql_cdc.py --phase read --changes 100000 --repeat 3 --baseline /tmp/base
    python scripts/bench_mysql_cdc.py --phase offered --rates 10000,30000,50000 --seconds 60
    python scripts/bench_mysql_cdc.py --phase tables --tables 50 --changes 20000 --baseline /tmp/base
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from bench_common import scratch_dir  # noqa: E402
from jdbc_mysql.mariadb_server import PASSWORD, LocalMariaDB  # noqa: E402

PASSWORD_ENV = "GOBBLIN_BENCH_MYSQL_PASSWORD"
RESULTS = ROOT / "scripts" / "results"


def gobblin(args: list[str], cwd: Path, code: Path = ROOT) -> tuple[int, float, str]:
    """(exit code, seconds, output) of `gobblin-py ARGS`, run with the package of the checkout `code`."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "gobblin_py.cli.main", *args], cwd=cwd, text=True,
                          env={**os.environ, PASSWORD_ENV: PASSWORD, "PYTHONPATH": str(code)}, capture_output=True)
    return done.returncode, time.monotonic() - started, done.stdout + done.stderr


def cdc_job(tmp: Path, maria: LocalMariaDB, publisher: dict[str, Any], db: str = "bench") -> dict[str, Any]:
    return {"job": {"name": "bench", "work_dir": str(tmp / "work")},
            "source": {"class": "mysql_cdc", "url": maria.url(db, "mysql"), "password_env": PASSWORD_ENV,
                       "tables": [f"{db}.acct"], "snapshot": {"chunk_rows": 100_000, "chunks_per_run": 64}},
            "writer": {"class": "parquet"}, "publisher": publisher, "spark": {"master": "local[2]"}}


def fill(maria: LocalMariaDB, rows: int, db: str = "bench") -> None:
    maria.create_database(db)
    maria.execute(db, "CREATE TABLE acct (id bigint PRIMARY KEY, owner varchar(40), balance bigint, note text, "
                           "updated_at timestamp(6) NOT NULL)")
    with maria.connect(db) as conn, conn.cursor() as cur:
        cur.execute("SET SESSION max_recursive_iterations = 100000000")
        for start in range(0, rows, 100_000):
            cur.execute("INSERT INTO acct SELECT seq, CONCAT('o', seq), seq, NULL, NOW(6) - INTERVAL 1 HOUR FROM seq_%s_to_%s"
                        % (start + 1, min(rows, start + 100_000)))


def snapshot(args: argparse.Namespace) -> dict[str, Any]:
    """mysql_cdc's first run (its chunked snapshot) against the jdbc source's full load, in turn `--repeat` times."""
    tmp = scratch_dir("bench-mysql-cdc-")
    out: dict[str, Any] = {"phase": "snapshot", "rows": args.rows, "chunk_rows": args.chunk_rows,
                           "repeat": args.repeat}
    with LocalMariaDB(binlog=True) as maria:
        fill(maria, args.rows)
        for r in range(args.repeat):
            cdc = cdc_job(tmp / f"mysql_cdc-{r}", maria, {"final_dir": str(tmp / f"mysql_cdc-{r}" / "output")})
            cdc["source"]["snapshot"].update(chunk_rows=args.chunk_rows,  # the whole table in its first run
                                             chunks_per_run=max(64, -(-args.rows // args.chunk_rows)))
            jobs = {
                "mysql_cdc": cdc,
                "jdbc": {"job": {"name": "bench", "work_dir": str(tmp / f"jdbc-{r}" / "work")},
                         "source": {"class": "jdbc", "url": maria.url("bench"), "password_env": PASSWORD_ENV,
                                    "tables": [{"table": "bench.acct", "watermark_column": "updated_at",
                                                "primary_key": ["id"]}]},
                         "writer": {"class": "parquet"}, "publisher": {"final_dir": str(tmp / f"jdbc-{r}" / "output")},
                         "spark": {"master": "local[2]"}},
            }
            if args.baseline:  # the same first run with that checkout's code
                jobs["mysql_cdc_baseline"] = json.loads(json.dumps(cdc).replace(f"mysql_cdc-{r}", f"mysql_cdc_baseline-{r}"))
            for tool, job in jobs.items():
                where = tmp / f"{tool}-{r}"
                where.mkdir(parents=True, exist_ok=True)
                (where / "job.yaml").write_text(yaml.safe_dump(job))
                code, took, text = gobblin(["run", "job.yaml"], where,
                                           Path(args.baseline).resolve() if tool.endswith("_baseline") else ROOT)
                ids = _ids(where / "output")
                out.setdefault(tool, []).append({"seconds": round(took, 1), "rows_per_s": round(ids["rows"] / took),
                                                 "exit": code, "read_back": ids,
                                                 "ok": code == 0 and ids == {"rows": args.rows, "distinct": args.rows,
                                                                             "min": 1, "max": args.rows}})
                print(json.dumps({tool: out[tool][-1]}), file=sys.stderr)
                if not out[tool][-1]["ok"]:
                    print(text[-3000:], file=sys.stderr)
    out["mysql_cdc_over_jdbc_rows_per_s"] = [round(a["rows_per_s"] / b["rows_per_s"], 2)
                                             for a, b in zip(out["mysql_cdc"], out["jdbc"])]
    if args.baseline:
        out["baseline_over_jdbc_rows_per_s"] = [round(a["rows_per_s"] / b["rows_per_s"], 2)
                                                for a, b in zip(out["mysql_cdc_baseline"], out["jdbc"])]
        out["mysql_cdc_over_baseline_rows_per_s"] = [round(a["rows_per_s"] / b["rows_per_s"], 2)
                                                     for a, b in zip(out["mysql_cdc"], out["mysql_cdc_baseline"])]
    return out


def _ids(output: Path) -> dict[str, int]:
    """The ids of every Parquet file under `output`, read back with pyarrow: rows, distinct ids, least and greatest
    (ids 1..n each once is rows = distinct = max = n, min = 1)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    ids = pa.chunked_array([pq.read_table(f, columns=["id"]).column("id").cast(pa.int64())
                            for f in sorted(output.rglob("*.parquet"))], type=pa.int64())
    ids = ids.drop_null()  # the snapshot's leading truncate record has no key
    return {"rows": len(ids), "distinct": pc.count_distinct(ids).as_py(), "min": pc.min(ids).as_py() or 0,
            "max": pc.max(ids).as_py() or 0}


def write_changes(maria: LocalMariaDB, changes: int, per_txn: int, initial: int, db: str = "bench") -> int:
    """`changes` changes to `db.acct` (inserts of new keys and updates of rows already there, in transactions of
    `per_txn`); how many were written."""
    with maria.connect(db, autocommit=False) as conn, conn.cursor() as cur:
        next_id = initial + 1
        for t in range(changes // per_txn):
            for n in range(per_txn):
                if n % 2:
                    cur.execute("UPDATE acct SET balance = balance + 1, note = 'u' WHERE id = %s",
                                (1 + ((t * per_txn + n) * 7919) % initial,))
                else:
                    cur.execute("INSERT INTO acct VALUES (%s, 'n', 0, NULL, NOW(6))", (next_id,))
                    next_id += 1
            conn.commit()
    return (changes // per_txn) * per_txn


def _one_stream(maria: LocalMariaDB, tmp: Path, code: Path, args: argparse.Namespace) -> dict[str, Any]:
    """A table of `--initial` rows in a database of its own, its snapshot, `--changes` changes, then the timed run of
    the checkout `code` applying them into an Iceberg upsert table, read back and compared with `SELECT`."""
    from pyiceberg.catalog import load_catalog

    db = f"b{tmp.name.replace('-', '_')}"
    tmp.mkdir(parents=True)
    fill(maria, args.initial, db)
    publisher = {"class": "iceberg", "table": "db.acct", "warehouse": str(tmp / "warehouse"), "mode": "upsert",
                 "key": ["id"], "order_by": ["_pos", "_seq"], "delete_when": {"column": "_op", "equals": ["delete"]},
                 "truncate_when": {"column": "_op", "equals": ["truncate"]}}
    (tmp / "job.yaml").write_text(yaml.safe_dump(cdc_job(tmp, maria, publisher, db)))
    for _ in range(2):  # the snapshot's chunks, then the stream that follows them
        code_, _, text = gobblin(["run", "job.yaml"], tmp, code)
        if code_:
            raise SystemExit(f"a first run failed: {text[-2000:]}")
    changes = write_changes(maria, args.changes, args.per_txn, args.initial, db)
    code_, took, text = gobblin(["run", "job.yaml"], tmp, code)
    catalog = load_catalog("gobblin_py", type="sql", uri=f"sqlite:///{tmp / 'work' / 'iceberg' / 'catalog.db'}")
    fields = ("id", "owner", "balance", "note")
    rows = catalog.load_table("db.acct").scan(selected_fields=fields).to_arrow().to_pylist()
    same = sorted(tuple(r[c] for c in fields) for r in rows) == sorted(
        maria.query(db, "SELECT id, owner, balance, note FROM acct"))
    if code_ or not same:
        print(text[-3000:], file=sys.stderr)
    return {"exit": code_, "seconds": round(took, 1), "applied_per_s": round(changes / took),
            "table_equals_source": same}


def stream(args: argparse.Namespace) -> dict[str, Any]:
    tmp = scratch_dir("bench-mysql-cdc-")
    out: dict[str, Any] = {"phase": "stream", "initial_rows": args.initial, "changes": args.changes,
                           "per_txn": args.per_txn, "repeat": args.repeat}
    codes = {"this": ROOT, **({"baseline": Path(args.baseline).resolve()} if args.baseline else {})}
    with LocalMariaDB(binlog=True) as maria:
        for r in range(args.repeat):  # the checkouts in turn, so a change in the machine's load weighs on both
            for name, code in codes.items():
                out.setdefault(name, []).append(_one_stream(maria, tmp / f"{name}-{r}", code, args))
                print(json.dumps({name: out[name][-1]}), file=sys.stderr)
    if args.baseline:
        out["this_over_baseline_per_s"] = [round(a["applied_per_s"] / b["applied_per_s"], 2)
                                           for a, b in zip(out["this"], out["baseline"])]
    return out


READ = """
import json, os, sys, time
from gobblin_py.builtin.sources.mysql_cdc import binlog
from gobblin_py.builtin.sources.mysql_cdc.settings import MysqlCdcSettings
a = json.loads(sys.argv[1])
s = MysqlCdcSettings(url=a["url"], password_env=a["env"], tables=["bench.acct"])
started = time.monotonic()
parts = binlog.scan(s, ["bench.acct"], a["low"], a["end"], a["base"], a["width"], fast=a["fast"])
n = sum(1 for _ in binlog.changes(parts, "bench.acct", a["columns"], a["low"], a["end"], a["base"]))
print(json.dumps({"changes": n, "seconds": time.monotonic() - started, "code": binlog.__file__}))
"""


def read(args: argparse.Namespace) -> dict[str, Any]:
    """The binlog read alone of the same changes, each checkout's in a process of its own, in turn."""
    from gobblin_py.builtin.sources.mysql_cdc import position
    from gobblin_py.builtin.sources.mysql_cdc.settings import MysqlCdcSettings, connect

    out: dict[str, Any] = {"phase": "read", "changes": args.changes, "per_txn": args.per_txn, "repeat": args.repeat}
    codes = {"this": ROOT, **({"baseline": Path(args.baseline).resolve()} if args.baseline else {})}
    os.environ[PASSWORD_ENV] = PASSWORD
    with LocalMariaDB(binlog=True) as maria:
        fill(maria, args.initial)
        conn = connect(MysqlCdcSettings(url=maria.url("bench", "mysql"), password_env=PASSWORD_ENV,
                                        tables=["bench.acct"]))
        low = position.current(conn)
        changes = write_changes(maria, args.changes, args.per_txn, args.initial)
        end = position.current(conn).value()
        conn.close()
        given = {"url": maria.url("bench", "mysql"), "env": PASSWORD_ENV, "low": low.value(), "end": end,
                 "base": low.base, "width": low.width,
                 "columns": ["id", "owner", "balance", "note", "updated_at"]}
        cases = {**{name: (code, True) for name, code in codes.items()}, "library": (ROOT, False)}
        for _ in range(args.repeat):
            for name, (code, fast) in cases.items():
                done = subprocess.run([sys.executable, "-c", READ, json.dumps({**given, "fast": fast})], text=True,
                                      capture_output=True, env={**os.environ, "PYTHONPATH": str(code)},
                                      cwd=code)  # `-c` puts the working directory first on the path
                if done.returncode:
                    raise SystemExit(done.stderr[-3000:])
                got = json.loads(done.stdout)
                out.setdefault(name, []).append({"seconds": round(got["seconds"], 2),
                                                 "read_per_s": round(got["changes"] / got["seconds"]),
                                                 "all_read": got["changes"] == changes, "code": got["code"]})
                print(json.dumps({name: out[name][-1]}), file=sys.stderr)
    for other in ("baseline", "library"):
        if other in out:
            out[f"this_over_{other}_per_s"] = [round(a["read_per_s"] / b["read_per_s"], 2)
                                               for a, b in zip(out["this"], out[other])]
    return out


def offered(args: argparse.Namespace) -> dict[str, Any]:
    """`run --continuous` while changes are offered at each of `--rates` a second for `--seconds` (inserts and updates,
    transactions of `--per-txn`), as bench_cdc.py's stream phase does for postgres_cdc: applied a second (offered
    changes over the time until the last is visible in the Iceberg table) and each transaction's lag (its commit to the
    first upsert snapshot whose committed binlog position is past it), p50/p99; the table read back and compared."""
    rates = [int(r) for r in args.rates.split(",")]
    out: dict[str, Any] = {"phase": "offered", "seconds": args.seconds, "per_txn": args.per_txn,
                           "sessions": args.sessions, "warmup_s": args.warmup, "load_before": os.getloadavg(),
                           "initial_rows": args.initial, "runs": []}
    codes = {"this": ROOT, **({"baseline": Path(args.baseline).resolve()} if args.baseline else {})}
    with LocalMariaDB(binlog=True) as maria:
        for r in range(args.repeat if args.baseline else 1):
            for rate in rates:
                for name, code in codes.items():  # the checkouts in turn at each rate, on the same server
                    tmp = scratch_dir("bench-mysql-cdc-offered-")
                    load = os.getloadavg()[0]
                    out["runs"].append({"code": name, "round": r, **_one_offered(maria, tmp, rate, args, code),
                                        "load_1m": [round(load, 2), round(os.getloadavg()[0], 2)]})
                    print(json.dumps(out["runs"][-1]), file=sys.stderr)
    return out


def _one_offered(maria: LocalMariaDB, tmp: Path, rate: int, args: argparse.Namespace, code: Path = ROOT) -> dict[str, Any]:
    import signal
    import threading

    db = f"o{rate}_{tmp.name.rsplit('-', 1)[-1]}"
    fill(maria, args.initial, db)
    publisher = {"class": "iceberg", "table": "db.acct", "warehouse": str(tmp / "warehouse"), "mode": "upsert",
                 "key": ["id"], "order_by": ["_pos", "_seq"], "delete_when": {"column": "_op", "equals": ["delete"]},
                 "truncate_when": {"column": "_op", "equals": ["truncate"]}}
    job = cdc_job(tmp, maria, publisher, db)
    job["job"]["checkpoint_interval"] = "1s"  # as bench_cdc.py's stream phase
    (tmp / "job.yaml").write_text(yaml.safe_dump(job))
    for _ in range(2):  # the snapshot's chunks, then the stream that follows them
        code_, _, text = gobblin(["run", "job.yaml"], tmp, code)
        if code_:
            raise SystemExit(f"a first run failed: {text[-2000:]}")
    commits: list[tuple[int, float, int]] = []  # (binlog position after the commit, wall time, changes)
    stop = threading.Event()

    def offer(session: int) -> None:
        """One of `--sessions` sessions, each offering `rate / sessions` a second: a multi-row INSERT of new keys (its
        own range) and an UPDATE … WHERE id IN of keys of its own (id % sessions), `--per-txn` changes a commit."""
        sessions = args.sessions
        with maria.connect(db, autocommit=False) as conn, conn.cursor() as cur:
            next_id, t = args.initial + 1 + session * 1_000_000_000, 0
            period, due = args.per_txn * sessions / rate, time.monotonic()
            while not stop.is_set():
                inserts = (args.per_txn + 1) // 2
                updated = sorted({1 + (((t * args.per_txn + i) * 7919) % (args.initial // sessions)) * sessions + session
                                  for i in range(args.per_txn - inserts)})
                cur.execute("INSERT INTO acct VALUES " + ",".join(
                    "(%d, 'n', 0, NULL, NOW(6))" % k for k in range(next_id, next_id + inserts)))
                if updated:
                    cur.execute("UPDATE acct SET balance = balance + 1, note = 'u' WHERE id IN (%s)"
                                % ",".join(map(str, updated)))
                conn.commit()
                cur.execute("SHOW MASTER STATUS")
                file, offset = cur.fetchone()[:2]
                commits.append((_position(file, offset), time.time(), inserts + len(updated)))
                next_id, t = next_id + inserts, t + 1
                due += period
                time.sleep(max(0.0, due - time.monotonic()))

    log = open(tmp / "continuous.log", "w")
    spy = [str(Path(sys.executable).parent / "py-spy"), "record", "--subprocesses", "--format", "raw", "--rate", "50",
           "-o", str(Path(args.py_spy).resolve().with_suffix(f".{rate}.txt")), "--"] if args.py_spy else []
    runner = subprocess.Popen([*spy, sys.executable, "-m", "gobblin_py.cli.main", "run", "job.yaml", "--continuous"], cwd=tmp,
                              env={**os.environ, PASSWORD_ENV: PASSWORD, "PYTHONPATH": str(code)}, text=True,
                              stdout=log, stderr=subprocess.STDOUT)
    threads = [threading.Thread(target=offer, args=(s,)) for s in range(args.sessions)]
    started = time.time()
    for thread in threads:
        thread.start()
    visible = _watch(tmp, lambda: time.time() - started < args.warmup + args.seconds)
    stop.set()
    for thread in threads:
        thread.join()
    end = max((c[0] for c in commits), default=0)
    deadline = time.time() + 180
    while (not visible or visible[-1][1] < end) and time.time() < deadline:  # drain what was offered
        visible += _watch(tmp, lambda: False, {v[0] for v in visible})
        time.sleep(1)
    drained = time.time()
    cpu = None if spy else _cpu_s(runner.pid)  # the run's CPU (Spark's too): what a change costs, whatever the load
    if spy:  # the run stops, then py-spy writes its samples and exits
        for child in Path(f"/proc/{runner.pid}/task/{runner.pid}/children").read_text().split():
            os.kill(int(child), signal.SIGINT)
    else:
        runner.send_signal(signal.SIGINT)
    runner.wait(timeout=120)
    log.close()
    counted = [c for c in commits if c[1] >= started + args.warmup]  # --warmup: the run's start not counted
    lags = sorted(next((seen - at for _, mark, seen in visible if mark >= pos), float("inf")) for pos, at, _ in counted)
    changes = sum(n for _, _, n in counted)
    same = _table_rows(tmp) == sorted(maria.query(db, "SELECT id, owner, balance, note FROM acct"))
    text = (tmp / "continuous.log").read_text(errors="replace")
    took = [float(t) for t in re.findall(r"checkpoint \d+ committed at [\d:]+: \d+ records in ([\d.]+)s", text)]
    return {"offered_per_s": rate, "offered_per_s_achieved": round(changes / args.seconds), "changes": changes,
            "applied_per_s": round(changes / (drained - started - args.warmup)), "lag_p50_s": round(lags[len(lags) // 2], 2),
            "lag_p99_s": round(lags[int(len(lags) * 0.99)], 2), "lag_max_s": round(lags[-1], 2), "snapshots": len(visible),
            "table_equals_source": same, "spark_started": "starting Spark" in text,
            "checkpoint_longest_s": max(took, default=None), "checkpoints": len(took), "runner_cpu_s": cpu,
            "cpu_ms_per_1000_changes": round(1e6 * cpu / sum(n for _, _, n in commits), 1) if cpu else None}


def _cpu_s(pid: int) -> float:
    """User and system CPU seconds process `pid` and every process under it (Spark's JVM and Python workers, when
    the run started Spark) have used so far (/proc/PID/stat)."""
    stats: dict[int, tuple[int, float]] = {}  # pid → (parent, CPU seconds)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # ended meanwhile
            stats[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"))
    tree, total = {pid}, 0.0
    for _ in range(8):  # the JVM's Python daemon's workers are a few levels down
        tree |= {p for p, (parent, _) in stats.items() if parent in tree}
    for p in tree:
        total += stats.get(p, (0, 0.0))[1]
    return total


def _position(file: str, offset: int) -> int:
    """A binlog position as mysql_cdc's watermark holds it: (file number << 32) | offset."""
    return (int(file.rsplit(".", 1)[1]) << 32) | int(offset)


def _watch(tmp: Path, go_on: Any, known: set[int] | None = None) -> list[tuple[int, int, float]]:
    """(snapshot id, its committed binlog position, wall time seen) of each new upsert snapshot while `go_on()`."""
    from pyiceberg.catalog import load_catalog

    seen: list[tuple[int, int, float]] = []
    known = set(known or ())
    while True:
        try:
            catalog = load_catalog("gobblin_py", type="sql", uri=f"sqlite:///{tmp / 'work' / 'iceberg' / 'catalog.db'}")
            for snap in catalog.load_table("db.acct").snapshots():
                marks = (snap.summary or {}).get("gobblin-py.watermarks")
                if snap.snapshot_id in known or marks is None:
                    continue
                known.add(snap.snapshot_id)
                mark = json.loads(marks).get("binlog")
                if isinstance(mark, int):
                    seen.append((snap.snapshot_id, mark, time.time()))
        except Exception:  # noqa: BLE001 - the catalog mid-commit: look again
            pass
        if not go_on():
            return sorted(seen, key=lambda v: v[2])
        time.sleep(0.2)


def _table_rows(tmp: Path) -> list[tuple[Any, ...]]:
    from pyiceberg.catalog import load_catalog

    catalog = load_catalog("gobblin_py", type="sql", uri=f"sqlite:///{tmp / 'work' / 'iceberg' / 'catalog.db'}")
    fields = ("id", "owner", "balance", "note")
    return sorted(tuple(r[c] for c in fields) for r in catalog.load_table("db.acct").scan(
        selected_fields=fields).to_arrow().to_pylist())


def _changes(maria: LocalMariaDB, db: str, tables: list[str], changes: int, per_txn: int, rows: int) -> int:
    """`changes` inserts and updates in transactions of `per_txn`, each transaction in one table, the tables in turn."""
    with maria.connect(db, autocommit=False) as conn, conn.cursor() as cur:
        next_id = [rows + 1] * len(tables)
        for t in range(changes // per_txn):
            k = t % len(tables)
            for n in range(per_txn):
                if n % 2:
                    cur.execute(f"UPDATE {tables[k]} SET balance = balance + 1 WHERE id = %s", (1 + (t * 7919 + n) % rows,))
                else:
                    cur.execute(f"INSERT INTO {tables[k]} VALUES (%s, 'n', 0)", (next_id[k],))
                    next_id[k] += 1
            conn.commit()
    return (changes // per_txn) * per_txn


def _one_layout(maria: LocalMariaDB, tmp: Path, code: Path, n_tables: int, args: argparse.Namespace) -> dict[str, Any]:
    """`n_tables` tables in a database of their own, snapshotted by a first run, then the changes and the timed run."""
    from avro.datafile import DataFileReader
    from avro.io import DatumReader

    db = f"b{tmp.name.replace('-', '_')}"
    maria.create_database(db)
    tables = [f"t{k:03d}" for k in range(n_tables)]
    for t in tables:
        maria.execute(db, f"CREATE TABLE {t} (id bigint PRIMARY KEY, owner varchar(40), balance bigint)",
                      f"INSERT INTO {t} SELECT seq, CONCAT('o', seq), seq FROM seq_1_to_{args.initial}")
    job = {"job": {"name": "bench", "work_dir": str(tmp / "work")},
           "source": {"class": "mysql_cdc", "url": maria.url(db, "mysql"), "password_env": PASSWORD_ENV,
                      "tables": [f"{db}.{t}" for t in tables]},
           "writer": {"class": "avro"}, "publisher": {"final_dir": str(tmp / "output")}}
    tmp.mkdir(parents=True)
    (tmp / "job.yaml").write_text(yaml.safe_dump(job))
    code_, _, text = gobblin(["run", "job.yaml", "--in-process"], tmp, code)
    if code_:
        raise SystemExit(f"the snapshot run failed: {text[-2000:]}")
    changes = _changes(maria, db, tables, args.changes, args.per_txn, args.initial)
    code_, took, text = gobblin(["run", "job.yaml", "--in-process"], tmp, code)
    same = code_ == 0
    for t in tables:
        table: dict[int, Any] = {}
        paths = sorted((tmp / "output" / f"{db}.{t}").rglob("*.avro"))
        records: list[dict[str, Any]] = []
        for path in paths:
            with DataFileReader(open(path, "rb"), DatumReader()) as reader:
                records.extend(reader)
        for r in sorted(records, key=lambda r: (r["_pos"], r["_seq"])):
            if r["_op"] == "delete":
                table.pop(r["id"], None)
            elif r["_op"] != "truncate":
                table[r["id"]] = r["balance"]
        same = same and table == dict(maria.query(db, f"SELECT id, balance FROM {t}"))
    if not same:
        print(text[-3000:], file=sys.stderr)
    return {"tables": n_tables, "changes": changes, "exit": code_, "seconds": round(took, 2),
            "changes_per_s": round(changes / took), "tables_equal_source": same}


def tables(args: argparse.Namespace) -> dict[str, Any]:
    tmp = scratch_dir("bench-mysql-cdc-")
    out: dict[str, Any] = {"phase": "tables", "tables": args.tables, "changes": args.changes, "per_txn": args.per_txn,
                           "initial_rows_per_table": args.initial, "repeat": args.repeat}
    codes = {"this": ROOT, **({"baseline": Path(args.baseline).resolve()} if args.baseline else {})}
    with LocalMariaDB(binlog=True) as maria:
        for name, code in codes.items():
            for r in range(args.repeat):
                one = _one_layout(maria, tmp / f"{name}-one-{r}", code, 1, args)
                many = _one_layout(maria, tmp / f"{name}-many-{r}", code, args.tables, args)
                out.setdefault(name, []).append({"one_table": one, "many_tables": many,
                                                 "many_over_one": round(many["seconds"] / one["seconds"], 2)})
                print(json.dumps({name: out[name][-1]}), file=sys.stderr)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phase", choices=["snapshot", "stream", "read", "tables", "offered"], required=True)
    parser.add_argument("--rates", default="10000,30000,50000", help="--phase offered: changes offered a second")
    parser.add_argument("--seconds", type=int, default=60, help="--phase offered: how long each rate is offered")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--chunk-rows", type=int, default=100_000, help="--phase snapshot: mysql_cdc's snapshot chunk")
    parser.add_argument("--initial", type=int, default=100_000)
    parser.add_argument("--changes", type=int, default=100_000)
    parser.add_argument("--per-txn", type=int, default=10)
    parser.add_argument("--sessions", type=int, default=4, help="--phase offered: sessions offering the changes")
    parser.add_argument("--warmup", type=int, default=0, help="--phase offered: seconds offered first and not counted "
                                                              "(the run's start)")
    parser.add_argument("--py-spy", help="--phase offered: the continuous run sampled by py-spy (--subprocesses), its "
                                         "collapsed stacks written to this path with the rate before the suffix")
    parser.add_argument("--tables", type=int, default=50, help="--phase tables: the many-table job's tables")
    parser.add_argument("--repeat", type=int, default=2, help="--phase snapshot, tables, stream, read: measurements of each case")
    parser.add_argument("--baseline", help="--phase snapshot, tables, stream, read, offered: a checkout whose code is measured too, for comparison")
    args = parser.parse_args()
    result = {"snapshot": snapshot, "stream": stream, "read": read, "tables": tables,
              "offered": offered}[args.phase](args)
    result["date"] = time.strftime("%Y-%m-%d")
    print(json.dumps(result, indent=2))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"bench_mysql_cdc_{args.phase}.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
