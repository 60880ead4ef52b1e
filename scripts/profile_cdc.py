"""Profiles one postgres_cdc run applying `--changes` changes (half inserts, half updates of rows already there) into an
Iceberg upsert table, the run in one process under cProfile (`run --in-process`): where the apply path's time goes
(pgoutput parse and value conversion, rows → Arrow, the publisher's reduce by key, pyiceberg's copy-on-write rewrite).
Prints the functions by own time and the shares of the named stages; the table is read back and compared.

    python scripts/profile_cdc.py --changes 50000
"""

from __future__ import annotations

import argparse
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_cdc import ROOT, cdc_job, gobblin, source_rows, table_rows  # noqa: E402

sys.path.insert(0, str(ROOT))

from gobblin_py.demo.pg_server import LocalPostgres  # noqa: E402

STAGES = {  # (file part, function): a stage's cumulative time
    "decode: slot read + pgoutput parse + values": ("postgres_cdc/extractor.py", "_changes"),
    "record pipeline (task, rows → Arrow, writer)": ("runtime/task/pipeline.py", "run"),
    "publish: upsert commit (whole)": ("iceberg/upsert_commit.py", "commit_upsert"),
    "publish: read and reduce the changes by key": ("iceberg/upsert.py", "read_changes"),
    "publish: copy-on-write rewrite (scan + write files)": ("iceberg/upsert.py", "rewrite"),
    "publish: snapshot commit": ("iceberg/upsert.py", "commit_snapshot"),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--changes", type=int, default=50_000)
    p.add_argument("--initial", type=int, default=100_000)
    p.add_argument("--top", type=int, default=35)
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="profile-cdc-"))
    with LocalPostgres({"wal_level": "logical", "max_replication_slots": 10, "max_wal_senders": 10}) as pg:
        db = pg.create_database("bench")
        conn = pg.connect(db)
        conn.execute("CREATE TABLE public.acct (id bigint PRIMARY KEY, owner text, balance bigint, note text)")
        conn.execute("INSERT INTO public.acct SELECT i, 'o' || i, i, NULL FROM generate_series(1, %s) AS i", (args.initial,))
        publisher = {"class": "iceberg", "table": "db.acct", "warehouse": str(tmp / "warehouse"), "mode": "upsert",
                     "key": ["id"], "order_by": ["_lsn", "_seq"], "delete_when": {"column": "_op", "equals": ["delete"]},
                     "truncate_when": {"column": "_op", "equals": ["truncate"]}}
        (tmp / "job.yaml").write_text(yaml.safe_dump(cdc_job(tmp, pg, db, publisher)))
        if gobblin(["run", "job.yaml", "--in-process"], tmp).wait() != 0:
            raise SystemExit("the first run (snapshot) failed")
        next_id = args.initial + 1
        for first in range(0, args.changes, 100):
            with conn.transaction(), conn.cursor() as cur:
                n = min(100, args.changes - first)
                cur.executemany("INSERT INTO public.acct VALUES (%s, 'n', 0, NULL)",
                                [(next_id + i,) for i in range(n // 2)])
                cur.executemany("UPDATE public.acct SET balance = balance + 1, note = 'u' WHERE id = %s",
                                [(1 + ((next_id + i) * 7919) % args.initial,) for i in range(n - n // 2)])
                next_id += n // 2
        started = time.monotonic()
        prof = tmp / "run.prof"
        done = gobblin(["run", "job.yaml", "--in-process"], tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       prefix=("-m", "cProfile", "-o", str(prof)))
        text = done.communicate()[0]
        took = time.monotonic() - started
        if done.returncode:
            print(text[-3000:], file=sys.stderr)
            raise SystemExit("the profiled run failed")
        same = table_rows(tmp) == source_rows(conn)
    stats = pstats.Stats(str(prof))
    total = max(v[3] for v in stats.stats.values())  # type: ignore[attr-defined]
    print(f"run: {took:.1f} s wall for {args.changes} changes ({args.changes / took:,.0f}/s), table equals source: {same}")
    for stage, (where, name) in STAGES.items():
        cum = sum(v[3] for (f, _, fn), v in stats.stats.items() if where in f and fn == name)  # type: ignore[attr-defined]
        print(f"  {stage:55s} {cum:7.2f} s  {100 * cum / total:5.1f}%")
    stats.sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
