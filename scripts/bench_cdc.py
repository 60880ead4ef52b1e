"""postgres_cdc benchmarks (issue 30), against a local PostgreSQL 16 with logical decoding (pgserver's binaries).

- `--phase stream`: changes offered at `--rate` a second for `--seconds` (inserts, and updates of rows already there,
  in transactions of `--per-txn`, each one INSERT … SELECT and one UPDATE … WHERE id = ANY: one statement a row cannot
  offer more than about 7,000 a second here) while `gobblin-py run --continuous` applies them into an Iceberg table in upsert
  mode. Reported: changes applied a second, and the lag from each transaction's commit in PostgreSQL to the first
  table snapshot whose watermark passes it (p50, p99). At the end the table is read back and compared with the source
  table, row by row by key: a run that lost or doubled a row is reported as wrong, never as fast.
- `--phase tables`: `--changes` inserts spread over `--tables` tables (interleaved, every transaction touching
  several tables) applied by ONE `gobblin-py run` into Parquet, against the same changes in one table: the run's
  wall time for each, and their ratio (issue 45: a run decodes the slot once, whatever the number of tables), in
  `--rounds` rounds alternating which goes first (the median round's ratio is reported).
  Every file is read back with pyarrow and each table's ids compared with its `SELECT`.
- `--phase snapshot`: a table of `--rows` rows (made once by generate_series) read by the first run of postgres_cdc
  (its snapshot) against the jdbc source's full load of the same table, both into Parquet (or, `--publisher iceberg`,
  an Iceberg upsert table by id), both read back. With `--chunk-rows N`, also postgres_cdc with a chunked snapshot of
  N-row chunks, every chunk in the first run (`scripts/results/bench_cdc_snapshot_chunked_<rows>M_<publisher>.json`);
  `--rounds R` runs every tool R times, alternating, and reports jdbc's time over each one's (> 1: faster).

    python scripts/bench_cdc.py --phase stream --rate 10000 --seconds 120
    python scripts/bench_cdc.py --phase snapshot --rows 1000000
    python scripts/bench_cdc.py --phase snapshot --rows 10000000 --chunk-rows 250000 --publisher iceberg --rounds 2
    python scripts/bench_cdc.py --phase tables --tables 50 --changes 50000 --rounds 3 [--warm]
    python scripts/bench_cdc.py --phase stream --rates 10000,30000,50000 --seconds 60
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gobblin_py.demo.pg_server import PASSWORD, LocalPostgres  # noqa: E402

PASSWORD_ENV = "GOBBLIN_BENCH_PG_PASSWORD"
RESULTS = ROOT / "scripts" / "results"


def lsn_int(text: str) -> int:
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) | int(low, 16)


def gobblin_env() -> dict[str, str]:
    """The children's environment: the password, and this checkout's package first."""
    return {**os.environ, PASSWORD_ENV: PASSWORD, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def gobblin(args: list[str], cwd: Path, prefix: list[str] | None = None, **popen: Any) -> subprocess.Popen[str]:
    """`gobblin-py ARGS` in a child process (`prefix`: a profiler's command line before it)."""
    return subprocess.Popen([*(prefix or []), sys.executable, "-m", "gobblin_py.cli.main", *args], cwd=cwd,
                            env=gobblin_env(), text=True, **popen)


def cdc_job(tmp: Path, pg: LocalPostgres, db: str, publisher: dict[str, Any], writer: str = "parquet",
            slot: str = "bench", **source: Any) -> dict[str, Any]:
    return {"job": {"name": "bench", "work_dir": str(tmp / "work"), "checkpoint_interval": "1s"},
            "source": {"class": "postgres_cdc", "url": pg.url(db), "password_env": PASSWORD_ENV, "slot": slot,
                       "publication": "bench", "tables": ["public.acct"], "create_publication": True, **source},
            "writer": {"class": writer}, "publisher": publisher, "spark": {"master": "local[2]"}}


def stream(args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-cdc-"))
    with LocalPostgres({"wal_level": "logical", "max_replication_slots": 10, "max_wal_senders": 10}) as pg:
        db = pg.create_database("bench")
        conn = pg.connect(db)
        conn.execute("CREATE TABLE public.acct (id bigint PRIMARY KEY, owner text, balance bigint, note text)")
        conn.execute("INSERT INTO public.acct SELECT i, 'o' || i, i, NULL FROM generate_series(1, %s) AS i",
                     (args.initial,))
        publisher = {"class": "iceberg", "table": "db.acct", "warehouse": str(tmp / "warehouse"), "mode": "upsert",
                     "key": ["id"], "order_by": ["_lsn", "_seq"], "delete_when": {"column": "_op", "equals": ["delete"]},
                     "truncate_when": {"column": "_op", "equals": ["truncate"]}}
        (tmp / "job.yaml").write_text(yaml.safe_dump(cdc_job(tmp, pg, db, publisher)))
        first = gobblin(["run", "job.yaml"], tmp)
        if first.wait() != 0:
            raise SystemExit("the first run (snapshot) failed")
        commits: list[tuple[int, float, int]] = []  # (commit LSN, wall time, changes)
        stop = threading.Event()

        def offer() -> None:
            writer = pg.connect(db)
            next_id = args.initial + 1
            period = args.per_txn / args.rate
            due = time.monotonic()
            while not stop.is_set():
                inserts = (args.per_txn + 1) // 2  # two statements a transaction: the offer keeps up with 50k/s
                updated = sorted({1 + ((next_id + i) * 7919) % args.initial for i in range(args.per_txn - inserts)})
                with writer.transaction():
                    writer.execute("INSERT INTO public.acct SELECT g, 'n', 0, NULL FROM generate_series(%s, %s) AS g",
                                   (next_id, next_id + inserts - 1))
                    writer.execute("UPDATE public.acct SET balance = balance + 1, note = 'u' WHERE id = ANY(%s)",
                                   (updated,))
                next_id += inserts
                lsn = writer.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]
                commits.append((lsn_int(lsn), time.time(), inserts + len(updated)))
                due += period
                time.sleep(max(0.0, due - time.monotonic()))
            writer.close()

        log = open(tmp / "continuous.log", "w")
        spy = ([str(Path(sys.executable).parent / "py-spy"), "record", "--format", "raw", "--rate", "100", "--output",
                str(Path(args.profile).resolve()), "--", sys.executable] if args.profile else [sys.executable])
        runner = subprocess.Popen([*spy, "-m", "gobblin_py.cli.main", "run", "job.yaml", "--continuous"], cwd=tmp,
                                  env=gobblin_env(), text=True, stdout=log, stderr=subprocess.STDOUT)
        thread = threading.Thread(target=offer)
        started = time.time()
        thread.start()
        visible = watch_snapshots(tmp, lambda: time.time() - started < args.seconds)
        stop.set()
        thread.join()
        end_lsn = lsn_int(conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0])
        deadline = time.time() + 120
        while (not visible or visible[-1][1] < end_lsn - 1) and time.time() < deadline:  # drain what was offered
            visible += watch_snapshots(tmp, lambda: False, after=visible[-1][0] if visible else 0)
            time.sleep(1)
        drained = time.time()
        runner.send_signal(signal.SIGINT)
        runner.wait(timeout=120)
        log.close()
        lags = sorted(lag_of(lsn, at, visible) for lsn, at, _ in commits)
        offered = sum(n for _, _, n in commits)
        same = table_rows(tmp) == source_rows(conn)
        return {"phase": "stream", "offered_per_s": args.rate, "seconds": args.seconds, "changes_offered": offered,
                "offered_per_s_achieved": round(offered / args.seconds), "applied_per_s": round(offered / (drained - started)),
                "lag_p50_s": round(lags[len(lags) // 2], 2), "lag_p99_s": round(lags[int(len(lags) * 0.99)], 2),
                "snapshots": len(visible), "table_equals_source": same, "initial_rows": args.initial}


def watch_snapshots(tmp: Path, go_on: Any, after: int = 0) -> list[tuple[int, int, float]]:
    """(snapshot id, its watermark LSN, wall time seen) of each new upsert snapshot while `go_on()`."""
    from pyiceberg.catalog import load_catalog

    seen: list[tuple[int, int, float]] = []
    known = {after}
    while True:
        try:
            catalog = load_catalog("gobblin_py", type="sql", uri=f"sqlite:///{tmp / 'work' / 'iceberg' / 'catalog.db'}")
            table = catalog.load_table("db.acct")
            for s in table.snapshots():
                if s.snapshot_id in known or "gobblin-py.watermarks" not in (s.summary or {}):
                    continue
                known.add(s.snapshot_id)
                marks = json.loads(s.summary["gobblin-py.watermarks"])
                lsn = min(int(v["lsn"]) if isinstance(v, dict) else int(v) for v in marks.values())
                seen.append((s.snapshot_id, lsn, s.timestamp_ms / 1000))
        except Exception:  # noqa: BLE001 - the catalog mid-commit: look again
            pass
        if not go_on():
            return sorted(seen, key=lambda v: v[2])
        time.sleep(0.2)


def lag_of(lsn: int, at: float, visible: list[tuple[int, int, float]]) -> float:
    return next((t - at for _, mark, t in visible if mark > lsn), float("inf"))


def table_rows(tmp: Path) -> list[tuple[Any, ...]]:
    from pyiceberg.catalog import load_catalog

    catalog = load_catalog("gobblin_py", type="sql", uri=f"sqlite:///{tmp / 'work' / 'iceberg' / 'catalog.db'}")
    rows = catalog.load_table("db.acct").scan(selected_fields=("id", "owner", "balance", "note")).to_arrow().to_pylist()
    return sorted((r["id"], r["owner"], r["balance"], r["note"]) for r in rows)


def source_rows(conn: Any) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in conn.execute("SELECT id, owner, balance, note FROM public.acct ORDER BY id").fetchall()]


def snapshot(args: argparse.Namespace) -> dict[str, Any]:
    import pyarrow.parquet as pq

    tmp = Path(tempfile.mkdtemp(prefix="bench-cdc-"))
    out: dict[str, Any] = {"phase": "snapshot", "rows": args.rows}
    with LocalPostgres({"wal_level": "logical", "max_replication_slots": 10, "max_wal_senders": 10}) as pg:
        db = pg.create_database("bench")
        conn = pg.connect(db)
        conn.execute("CREATE TABLE public.acct (id bigint PRIMARY KEY, owner text, balance bigint, note text, "
                     "updated_at timestamptz NOT NULL DEFAULT now())")
        conn.execute("INSERT INTO public.acct SELECT i, 'o' || i, i, NULL, now() FROM generate_series(1, %s) AS i",
                     (args.rows,))
        conn.execute("VACUUM ANALYZE public.acct")
        jobs = {}
        for rnd in range(args.rounds):  # the tools alternate, so a noisy minute falls on each alike
            jobs.update(snapshot_jobs(args, tmp, pg, db, rnd))
        for (tool, rnd), job in jobs.items():
            where = tmp / f"{tool}-{rnd}"
            where.mkdir(parents=True, exist_ok=True)
            (where / "job.yaml").write_text(yaml.safe_dump(job))
            started = time.monotonic()
            done = gobblin(["run", "job.yaml"], where, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            text = done.communicate()[0]
            took = time.monotonic() - started
            ids: list[int] = []
            if args.publisher == "iceberg":
                ids = iceberg_ids(where)
            for f in sorted((where / "output").rglob("*.parquet")):
                ids += pq.read_table(f, columns=["id"]).column("id").to_pylist()
            ids = [i for i in ids if i is not None]  # the snapshot's leading truncate record has no key
            got = {"seconds": round(took, 1), "exit": done.returncode, "rows_read_back": len(ids), "distinct": len(set(ids)),
                   "ok": done.returncode == 0 and sorted(ids) == list(range(1, args.rows + 1))}
            out.setdefault(tool, []).append(got)
            print(json.dumps({tool: got}), file=sys.stderr)
            if done.returncode:
                print(text[-2000:], file=sys.stderr)
    for tool in [t for t in out if t != "jdbc" and isinstance(out[t], list)]:  # > 1: faster than the jdbc full load
        out[f"jdbc_over_{tool}"] = [round(j["seconds"] / c["seconds"], 2) for j, c in zip(out["jdbc"], out[tool])]
    return out


def snapshot_jobs(args: argparse.Namespace, tmp: Path, pg: LocalPostgres, db: str, rnd: int) -> dict[Any, dict[str, Any]]:
    """Round `rnd`'s jobs: postgres_cdc's one-transaction snapshot, the jdbc source's full load and (with
    --chunk-rows) postgres_cdc's chunked snapshot, each into Parquet files or an Iceberg upsert table by id."""
    def publisher(tool: str, order_by: list[str], cdc: bool) -> dict[str, Any]:
        if args.publisher == "parquet":
            return {"final_dir": str(tmp / f"{tool}-{rnd}" / "output")}
        markers = {"delete_when": {"column": "_op", "equals": ["delete"]},
                   "truncate_when": {"column": "_op", "equals": ["truncate"]}} if cdc else {}
        return {"class": "iceberg", "table": "db.acct", "warehouse": str(tmp / f"{tool}-{rnd}" / "warehouse"),
                "mode": "upsert", "key": ["id"], "order_by": order_by, **markers}

    def work(tool: str) -> Path:
        return tmp / f"{tool}-{rnd}"

    jobs: dict[Any, dict[str, Any]] = {
        ("postgres_cdc", rnd): cdc_job(work("postgres_cdc"), pg, db, publisher("postgres_cdc", ["_lsn", "_seq"], True),
                                       slot=f"bench_one_{rnd}"),
        ("jdbc", rnd): {"job": {"name": "bench", "work_dir": str(work("jdbc") / "work")},
                        "source": {"class": "jdbc", "url": pg.url(db), "password_env": PASSWORD_ENV,
                                   "tables": [{"table": "public.acct", "watermark_column": "updated_at",
                                               "primary_key": ["id"]}]},
                        "writer": {"class": "parquet"}, "publisher": publisher("jdbc", ["updated_at"], False),
                        "spark": {"master": "local[2]"}},
    }
    if args.chunk_rows:
        jobs[("postgres_cdc_chunked", rnd)] = cdc_job(
            work("postgres_cdc_chunked"), pg, db, publisher("postgres_cdc_chunked", ["_lsn", "_seq"], True),
            slot=f"bench_chunked_{rnd}", snapshot_chunk_rows=args.chunk_rows,
            snapshot_chunks_per_run=args.rows // args.chunk_rows + 1)
    return jobs


def iceberg_ids(where: Path) -> list[int]:
    from pyiceberg.catalog import load_catalog

    catalog = load_catalog("gobblin_py", type="sql", uri=f"sqlite:///{where / 'work' / 'iceberg' / 'catalog.db'}")
    return catalog.load_table("db.acct").scan(selected_fields=("id",)).to_arrow().column("id").to_pylist()


def tables(args: argparse.Namespace) -> dict[str, Any]:
    """One run over `--changes` changes in `--tables` tables, then the same changes in one table; `--rounds` times,
    which goes first alternating (the machine is shared: only a ratio taken back to back compares)."""
    out: dict[str, Any] = {"phase": "tables", "changes": args.changes, "per_txn": args.per_txn, "warm": args.warm,
                           "rounds": []}
    with LocalPostgres({"wal_level": "logical", "max_replication_slots": 10 + 2 * args.rounds,
                        "max_wal_senders": 10}) as pg:
        for r in range(args.rounds):
            runs: dict[str, Any] = {}
            for n in (args.tables, 1) if r % 2 == 0 else (1, args.tables):
                runs[f"tables_{n}"] = one_run(pg, n, args.changes, args.per_txn, tag=f"{n}_{r}", warm=args.warm)
                print(json.dumps(runs[f"tables_{n}"]), file=sys.stderr)
            runs["ratio"] = round(runs[f"tables_{args.tables}"]["run_s"] / runs["tables_1"]["run_s"], 2)
            runs["cpu_ratio"] = round(runs[f"tables_{args.tables}"]["cpu_s"] / runs["tables_1"]["cpu_s"], 2)
            out["rounds"].append(runs)
    for ratio in ("ratio", "cpu_ratio"):
        ratios = sorted(r[ratio] for r in out["rounds"])
        out[ratio] = ratios[len(ratios) // 2]  # the median round's
    out["ok"] = all(r[f"tables_{n}"]["every_table_equals_source"] for r in out["rounds"] for n in (args.tables, 1))
    return out


def one_run(pg: LocalPostgres, n: int, changes: int, per_txn: int, prefix: list[str] | None = None,
            tag: str = "", warm: bool = False) -> dict[str, Any]:
    """The wall time of the run applying `changes` inserts spread over `n` tables (after a first run that
    snapshots them empty), and whether every table's output holds exactly its rows. `prefix`: a profiler's command
    line the measured run runs under (`scripts/profile_cdc.py --tables`); `tag` names its database and slot (default:
    `n`). `warm`: a run of one change a table comes between the snapshot and the measured run, which is then a run in
    steady state (every table's state already rewritten once, the slot at every table's position)."""
    import pyarrow.parquet as pq

    tmp = Path(tempfile.mkdtemp(prefix=f"bench-cdc-{n}-"))
    tag = tag or str(n)
    db = pg.create_database(f"bench_{tag}")
    conn = pg.connect(db)
    names = [f"public.t{i:03d}" for i in range(n)]
    for t in names:
        conn.execute(f"CREATE TABLE {t} (id bigint PRIMARY KEY, owner text, balance bigint, note text)")
    job = cdc_job(tmp, pg, db, {"final_dir": str(tmp / "output")})
    job["source"].update(tables=names, slot=f"bench{tag}", publication=f"bench{tag}")  # a slot's name is the cluster's
    (tmp / "job.yaml").write_text(yaml.safe_dump(job))
    if gobblin(["run", "job.yaml"], tmp, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT).wait() != 0:
        raise SystemExit(f"the first run ({n} tables) failed")
    if warm:
        with conn.transaction(), conn.cursor() as cur:
            for k, t in enumerate(names):
                cur.execute(f"INSERT INTO {t} VALUES (%s, 'w', 0, NULL)", (-1 - k,))
        if gobblin(["run", "job.yaml"], tmp, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT).wait() != 0:
            raise SystemExit(f"the warm-up run ({n} tables) failed")
    for first in range(0, changes, per_txn):  # each transaction's inserts go round the tables
        with conn.transaction(), conn.cursor() as cur:
            ids = range(first, min(changes, first + per_txn))
            for k, t in enumerate(names):
                rows = [(i, i) for i in ids if i % n == k]
                if rows:
                    cur.executemany(f"INSERT INTO {t} VALUES (%s, 'n', %s, NULL)", rows)
    load = os.getloadavg()[0]  # the machine's load as the run starts: a shared machine's rounds differ by it
    started, cpu = time.monotonic(), _children_cpu()
    done = gobblin(["run", "job.yaml"], tmp, prefix, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    text = done.communicate()[0]
    took, cpu = time.monotonic() - started, _children_cpu() - cpu
    if done.returncode:
        print(text[-3000:], file=sys.stderr)
    ok = done.returncode == 0
    for t in names:
        ids: list[int] = []
        for f in sorted((tmp / "output" / t).rglob("*.parquet")):
            ids += [i for i in pq.read_table(f, columns=["id"]).column("id").to_pylist() if i is not None]
        want = [r[0] for r in conn.execute(f"SELECT id FROM {t} ORDER BY id").fetchall()]
        ok = ok and sorted(ids) == want
    conn.close()
    return {"tables": n, "run_s": round(took, 2), "cpu_s": round(cpu, 2), "load": round(load, 2), "exit": done.returncode,
            "every_table_equals_source": ok, "phases": run_phases(tmp / "work")}


def _children_cpu() -> float:
    """CPU seconds (user + system) of this process's waited-for children: what a run costs the machine, which a
    loaded machine changes less than the wall time."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_phases(work: Path) -> dict[str, float]:
    """The last run's phases (planning, tasks, commit, cleanup: seconds) from its run record."""
    runs = sorted((work / "state" / "bench" / "runs").glob("*.json"))
    if not runs:
        return {}
    body = json.loads(runs[-1].read_text())
    return (body.get("body", body).get("phases") or {}) if isinstance(body, dict) else {}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--phase", choices=["stream", "snapshot", "tables"], default="stream")
    p.add_argument("--rate", type=int, default=10_000, help="changes offered a second")
    p.add_argument("--seconds", type=int, default=120)
    p.add_argument("--per-txn", type=int, default=100, help="changes a transaction")
    p.add_argument("--initial", type=int, default=100_000, help="rows in the table before the stream")
    p.add_argument("--rows", type=int, default=1_000_000, help="rows for --phase snapshot")
    p.add_argument("--tables", type=int, default=50, help="tables for --phase tables (against one table)")
    p.add_argument("--changes", type=int, default=50_000, help="changes for --phase tables")
    p.add_argument("--rounds", type=int, default=1, help="--phase tables: rounds of both runs (the median ratio is reported); --phase snapshot: every tool this many times, alternating")
    p.add_argument("--profile", default=None, help="--phase stream: py-spy's raw samples of the runner to this file "
                   "(summed by `scripts/profile_cdc.py --raw FILE`)")
    p.add_argument("--rates", default=None, help="--phase stream at each of these offered rates (e.g. 10000,30000,50000)")
    p.add_argument("--chunk-rows", type=int, default=0, help="--phase snapshot: also a chunked snapshot of N-row chunks")
    p.add_argument("--warm", action="store_true", help="--phase tables: measure a run in steady state (after a run of "
                   "one change a table), not the first run after the snapshot")
    p.add_argument("--publisher", choices=["parquet", "iceberg"], default="parquet",
                   help="--phase snapshot: into Parquet files, or into an Iceberg upsert table by id")
    p.add_argument("--out", default=None, help="the results file's name under scripts/results (default: by phase)")
    args = p.parse_args()
    if args.phase == "stream" and args.rates:
        result: dict[str, Any] = {"phase": "stream", "runs": []}
        for rate in (int(r) for r in args.rates.split(",")):
            args.rate = rate
            result["runs"].append(stream(args))
    else:
        result = {"stream": stream, "snapshot": snapshot, "tables": tables}[args.phase](args)
    result["date"] = time.strftime("%Y-%m-%d")
    name = f"bench_cdc_{args.phase}{'_chunked' if args.phase == 'snapshot' and args.chunk_rows else ''}" \
           f"{'_warm' if args.phase == 'tables' and args.warm else ''}.json"
    if args.phase == "snapshot" and args.chunk_rows:
        name = f"bench_cdc_snapshot_chunked_{args.rows // 1_000_000}M_{args.publisher}.json"
    name = args.out or name
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / name).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
