"""Profiles one postgres_cdc run applying `--changes` changes (half inserts, half updates of rows already there) into an
Iceberg upsert table, the run in one process (`run --in-process`) sampled by py-spy, or where py-spy is not
installed by a thread of this process taking every thread's stack (the commit runs on threads of its own, which
cProfile does not see): where the apply path's time goes (pgoutput parse and value
conversion, rows → Arrow, the publisher's reduce by key, pyiceberg's copy-on-write rewrite). Prints the shares of the
named stages and the functions by own samples; the table is read back and compared.

With `--tables N`, the run of `bench_cdc.py --phase tables` instead (`--changes` inserts spread over N tables, into
Parquet, every table read back), with the stages of its per-table costs: the commit layer, the extractors'
connections, the run's cleanup.

    python scripts/profile_cdc.py --changes 50000
    python scripts/profile_cdc.py --tables 50 --changes 50000
"""

from __future__ import annotations

import argparse
import collections
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_cdc import ROOT, cdc_job, gobblin, gobblin_env, one_run, source_rows, table_rows

sys.path.insert(0, str(ROOT))

from gobblin_py.demo.pg_server import LocalPostgres

STAGES = {  # (file part, function): the samples with it on the stack
    "decode: slot read + pgoutput parse + values": ("postgres_cdc/extractor.py", "_changes"),
    "  of which pgoutput parse": ("postgres_cdc/pgoutput.py", "decode"),
    "  of which the slot read (psycopg)": ("postgres_cdc/decode.py", "peek"),
    "record pipeline (task: rows → Arrow, writer)": ("runtime/task/pipeline.py", "run"),
    "publish: upsert commit (whole)": ("iceberg/upsert_commit.py", "commit_upsert"),
    "  read and reduce the changes by key": ("iceberg/upsert.py", "read_changes"),
    "  copy-on-write rewrite (scan + write files)": ("iceberg/upsert.py", "rewrite"),
    "  snapshot commit": ("iceberg/upsert.py", "commit_snapshot"),
}

TABLE_STAGES = {  # --tables: where a run's per-table costs are
    "decode: slot read + pgoutput parse + values": ("postgres_cdc/extractor.py", "_changes"),
    "extractor: open the connection": ("postgres_cdc/settings.py", "connect"),
    "record pipeline (task: rows → Arrow, writer)": ("runtime/task/pipeline.py", "run"),
    "commit: every dataset (commit_many)": ("commit/distributed.py", "commit_many"),
    "  write the sequences to the store": ("commit/store.py", "put"),
    "  the steps": ("commit/protocol.py", "apply_steps"),
    "  remove the records": ("commit/store.py", "remove"),
    "  fsync a directory (anywhere)": ("gobblin_py/durable.py", "fsync_dir"),
    "  fsync a file's content (anywhere)": ("gobblin_py/durable.py", "atomic_replace"),
    "cleanup: staging and task output": ("runtime/runner.py", "clean_run"),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--changes", type=int, default=50_000)
    p.add_argument("--initial", type=int, default=100_000)
    p.add_argument("--top", type=int, default=35)
    p.add_argument("--tables", type=int, default=0, help="profile bench_cdc.py's --phase tables run over N tables")
    p.add_argument("--warm", action="store_true", help="--tables: profile a run in steady state (bench_cdc.py --warm)")
    p.add_argument("--raw", default=None, help="only sum up py-spy raw samples already taken (bench_cdc.py --profile)")
    args = p.parse_args()
    if args.raw:
        summary(Path(args.raw), "", args.top, TABLE_STAGES if args.tables else STAGES)
        return
    if args.tables:
        tables(args)
        return
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
        prof = tmp / "run.txt"
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        if Path(spy).exists():
            done = subprocess.Popen([spy, "record", "--format", "raw", "--rate", "200", "--output", str(prof), "--",
                                     sys.executable, "-m", "gobblin_py.cli.main", "run", "job.yaml", "--in-process"],
                                    cwd=tmp, env=gobblin_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            text = done.communicate()[0]
            failed = done.returncode != 0
        else:  # no py-spy: the run in this process, every thread's stack sampled by a thread of ours
            print("py-spy is not installed: sampling the run in this process instead", file=sys.stderr)
            failed, text = sample_in_process(tmp / "job.yaml", prof), ""
        took = time.monotonic() - started
        if failed:
            print(text[-3000:], file=sys.stderr)
            raise SystemExit("the profiled run failed")
        same = table_rows(tmp) == source_rows(conn)
    summary(prof, f"run: {took:.1f} s wall for {args.changes} changes ({args.changes / took:,.0f}/s), table equals "
                  f"source: {same}; ", args.top)


def sample_in_process(job: Path, out: Path, every_s: float = 0.005) -> bool:
    """Runs `job` in this process (tasks in the driver) while a thread of ours takes every other thread's stack each
    `every_s`, written as py-spy's raw format (`frame;frame;… count`, a frame `function (path:line)`); whether the run
    failed. Threads waiting (a pool's idle workers, a lock, a sleep) are left out, as py-spy's --idle does not."""
    import collections
    import os
    import threading

    from gobblin_py.config import load_job
    from gobblin_py.runtime.executors.in_process import InProcessExecutor
    from gobblin_py.runtime.runner import JobRunner

    idle = ("wait", "_wait_for_tstate_lock", "sleep", "select", "poll", "get", "_worker", "accept")
    stacks: collections.Counter[str] = collections.Counter()
    stop = threading.Event()

    def sample() -> None:
        me = threading.get_ident()
        while not stop.is_set():
            for tid, frame in sys._current_frames().items():
                if tid == me or frame.f_code.co_name in idle:
                    continue
                names = []
                f: Any = frame
                while f is not None:
                    names.append(f"{f.f_code.co_name} ({f.f_code.co_filename}:{f.f_lineno})")
                    f = f.f_back
                stacks[";".join(reversed(names))] += 1
            time.sleep(every_s)

    sampler = threading.Thread(target=sample, daemon=True)
    here = Path.cwd()
    os.environ.update(gobblin_env())
    os.chdir(job.parent)
    sampler.start()
    try:
        result = JobRunner(load_job(job), InProcessExecutor(threads=2)).run()
    finally:
        stop.set()
        sampler.join()
        os.chdir(here)
    out.write_text("".join(f"{stack} {n}\n" for stack, n in stacks.items()))
    return not result.succeeded


def tables(args: argparse.Namespace) -> None:
    """The tables run (`bench_cdc.one_run`) under py-spy, its children too."""
    prof = Path(tempfile.mkdtemp(prefix="profile-cdc-tables-")) / "run.txt"
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    with LocalPostgres({"wal_level": "logical", "max_replication_slots": 10, "max_wal_senders": 10}) as pg:
        out = one_run(pg, args.tables, args.changes, 100, warm=args.warm,
                      prefix=[spy, "record", "--subprocesses", "--format", "raw", "--rate", "200", "--output", str(prof), "--"])
    print(f"py-spy's raw samples: {prof}")
    summary(prof, f"run over {args.tables} tables{' (warm)' if args.warm else ''}: {out['run_s']} s wall (under py-spy) for {args.changes} changes, every "
                  f"table equals its source: {out['every_table_equals_source']}; ", args.top, TABLE_STAGES)


def summary(prof: Path, head: str, top: int, stages: dict[str, tuple[str, str]] = STAGES) -> None:
    """The stages' shares of py-spy's samples, then the functions with the most samples of their own."""
    stacks: collections.Counter[str] = collections.Counter()
    for line in prof.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        stacks[stack] += int(count)
    total = sum(stacks.values())
    print(f"{head}{total} samples")
    for stage, (where, name) in stages.items():
        n = sum(c for st, c in stacks.items() if any(_is(f, where, name) for f in st.split(";")))
        print(f"  {stage:50s} {100 * n / total:5.1f}%")
    own: collections.Counter[str] = collections.Counter()
    for st, c in stacks.items():
        own[st.split(";")[-1]] += c
    for frame, c in own.most_common(top):
        print(f"{100 * c / total:5.1f}%  {frame}")


def _is(frame: str, where: str, name: str) -> bool:
    """Whether a py-spy frame (`Class.function (path:line)`) is function `name` of a file whose path holds `where`."""
    fn, _, path = frame.partition(" (")
    return (fn == name or fn.endswith("." + name)) and where in path


if __name__ == "__main__":
    main()
