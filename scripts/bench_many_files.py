"""Benchmark: many small files (issue 47): a first run over N files of a few records each, then rounds of a run that
finds 10 new files, a run with nothing new, `status --json` and `history list` over the job, against DuckDB reading
the same N files into one Parquet file.

    .venv/bin/python scripts/bench_many_files.py [--files 10000] [--records-per-file 3] [--rounds 3]
        [--in-process] [--unpacked] [--keep DIR] [--baseline DIR ...]

Every command runs as a child process; its wall time and CPU (user + system, the child's and its reaped children's,
from `getrusage`) are recorded, with the machine's load average. Every output is read back with pyarrow (each id once: a
tool that loses or doubles a record is WRONG). Writes scripts/results/bench_many_files-<N>.json (`-unpacked` with
--unpacked: `source.pack_bytes: 0`, a task a file, the baseline before packing). The machine is noisy: compare the
ratio to DuckDB from the same run, and the medians of the rounds. `--keep DIR` keeps the files and the job there; run
again with the same DIR, it skips the files, DuckDB and the first run and only adds rounds (for profiling a step at a
given number of committed files: `gobblin-py run DIR/job.yaml` from DIR). `--baseline DIR` (repeatable) runs each
round's steps with the package in DIR too (`git archive REV gobblin_py | tar -x -C DIR`), the order rotating each
round, on the same job: the ratio of the medians is what the changes since REV bought at that load.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench_common import parquet_read_back  # noqa: E402  (scripts/ is on sys.path: these run as scripts)
from bench_results import save  # noqa: E402

SCHEMA = {"type": "record", "name": "Small", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"}, {"name": "amount", "type": "double"}]}
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
"""The commands' environment: Python keeps the package's compiled bytecode, as an installed package's is kept (else each
command compiles every module it imports again: 0.1-0.2 s of a command's start)."""
STEPS = ("ten_new", "no_data", "status", "history")


def write_files(directory: Path, first: int, files: int, per: int) -> int:
    """`files` JSON-lines files of `per` records each, ids from `first * per`; the next free id."""
    directory.mkdir(parents=True, exist_ok=True)
    i = first * per
    for f in range(first, first + files):
        lines = []
        for _ in range(per):
            lines.append(json.dumps({"id": i, "name": f"n{i}", "amount": i / 7}))
            i += 1
        (directory / f"f-{f:06d}.jsonl").write_text("\n".join(lines) + "\n")
    return i


def timed(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> dict[str, float]:
    """Run `cmd` to its end: its wall time, its CPU seconds (user + system of it and its reaped children: the growth of
    this process's RUSAGE_CHILDREN, the commands running one at a time) and the load average (1 minute) as it ended;
    a non-zero exit stops the benchmark with the command's output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env or ENV)
    took = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return {"wall_s": took, "cpu_s": cpu, "load_1m": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--records-per-file", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3, help="rounds of: 10 new files, nothing new, status, history")
    ap.add_argument("--in-process", action="store_true", help="gobblin-py runs with --in-process (no Spark)")
    ap.add_argument("--unpacked", action="store_true", help="source.pack_bytes: 0 (a task a file, as before packing)")
    ap.add_argument("--baseline", type=Path, action="append", default=[], help="a copy of the package to compare (its parent directory, as on "
                    "PYTHONPATH: `git archive REV gobblin_py | tar -x -C DIR`): each round runs its steps too, in turn")
    ap.add_argument("--keep", type=Path, help="keep the files and the job in this directory; reuse them if there")
    a = ap.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="bench-many-files-") as scratch:
        tmp = a.keep.resolve() if a.keep else Path(scratch)
        data = tmp / "in" / "events"
        run = [py, "-m", "gobblin_py.cli.main", "run", "job.yaml"] + (["--in-process"] if a.in_process else [])
        first: dict[str, float] = {}
        duck = None
        if not (tmp / "job.yaml").exists():
            write_files(data, 0, a.files, a.records_per_file)
            (tmp / "small.avsc").write_text(json.dumps(SCHEMA))
            job = {"job": {"name": "many", "work_dir": str(tmp / "work")},
                   "source": {"class": "files", "path": str(tmp / "in"), **({"pack_bytes": 0} if a.unpacked else {})},
                   "converters": [{"class": "json_to_avro", "schema": str(tmp / "small.avsc")}],
                   "writer": {"class": "parquet"}, "publisher": {"final_dir": str(tmp / "out")}}
            (tmp / "job.yaml").write_text(yaml.safe_dump(job, sort_keys=False))
            duckdb = timed([py, "-c", (
                "import duckdb,sys; duckdb.connect().execute(\"COPY (SELECT * FROM read_json(?, columns={'id':'BIGINT',"
                "'name':'VARCHAR','amount':'DOUBLE'})) TO '" + str(tmp / "duck.parquet") + "' (FORMAT parquet)\", "
                "[sys.argv[1]])"), str(data / "*.jsonl")], tmp)
            duck = parquet_read_back([tmp / "duck.parquet"])
            (tmp / "duck.parquet").unlink()
            first = {"duckdb_s": duckdb["wall_s"], "duckdb_cpu_s": duckdb["cpu_s"]}
            run_first = timed(run, tmp)
            first |= {"first_run_s": run_first["wall_s"], "first_run_cpu_s": run_first["cpu_s"], "first_run_load_1m": run_first["load_1m"]}
        codes = {"ours": ENV} | {str(b): {**ENV, "PYTHONPATH": str(b.resolve())} for b in a.baseline}
        for env in codes.values():  # each package's bytecode compiled before the first timed command
            subprocess.run([py, "-m", "compileall", "-q", str(Path(env.get("PYTHONPATH", str(REPO)).split(":")[0]) / "gobblin_py")],
                           check=True, env=env)
        rounds: dict[str, list[dict[str, dict[str, float]]]] = {code: [] for code in codes}
        for n in range(a.rounds):  # with baselines, each goes first in turn
            names = list(codes)
            for code in names[n % len(names):] + names[:n % len(names)]:
                env = codes[code]
                write_files(data, sum(1 for _ in data.iterdir()), 10, a.records_per_file)
                r = {"ten_new": timed(run, tmp, env), "no_data": timed(run, tmp, env)}
                r["status"] = timed([py, "-m", "gobblin_py.cli.main", "status", "job.yaml", "--json"], tmp, env)
                r["history"] = timed([py, "-m", "gobblin_py.cli.main", "history", "list", "job.yaml"], tmp, env)
                rounds[code].append(r)
        committed = sum(1 for _ in data.iterdir())
        ours = parquet_read_back(sorted((tmp / "out").rglob("*.parquet")))
        expected = committed * a.records_per_file
        records = sorted(tmp.glob("work/**/runs/*.json*"))
        sizes = {"run_record_bytes": max((p.stat().st_size for p in records), default=0),
                 "events_bytes": sum(p.stat().st_size for p in tmp.glob("work/**/events*"))}
    medians = {code: {f"{step}_{k}": statistics.median(r[step][k] for r in rs) for step in STEPS for k in ("wall_s", "cpu_s")}
               for code, rs in rounds.items() if rs}
    ok = ours.rows == ours.distinct_ids == expected
    print(f"{a.files} files × {a.records_per_file} records, {committed} committed at the end"
          f"{' (--in-process)' if a.in_process else ''}{' (--unpacked)' if a.unpacked else ''}")
    if first:
        print(f"  DuckDB read_json → Parquet    {first['duckdb_s']:8.2f} s   rows {duck.rows} "
              f"({'ok' if duck.rows == a.files * a.records_per_file == duck.distinct_ids else 'WRONG'})")
        print(f"  gobblin-py first run          {first['first_run_s']:8.2f} s   {first['duckdb_s'] / first['first_run_s']:.2f}× DuckDB"
              f"  (CPU {first['first_run_cpu_s']:.2f} s, load {first['first_run_load_1m']:.1f})")
    for code, rs in rounds.items():
        if not rs:
            continue
        print(f" {code if code == 'ours' else f'baseline {code}'}:")
        for step, label in zip(STEPS, ("10 new files", "nothing new", "status --json", "history list")):
            walls = ", ".join(f"{r[step]['wall_s']:.2f}" for r in rs)
            cpus = ", ".join(f"{r[step]['cpu_s']:.2f}" for r in rs)
            loads = ", ".join(f"{r[step]['load_1m']:.1f}" for r in rs)
            ratio = (f"  ÷ ours {medians[code][f'{step}_wall_s'] / medians['ours'][f'{step}_wall_s']:.2f}× "
                     f"(CPU {medians[code][f'{step}_cpu_s'] / medians['ours'][f'{step}_cpu_s']:.2f}×)" if code != "ours" else "")
            print(f"  {label:<27}{medians[code][f'{step}_wall_s']:8.2f} s median (rounds {walls}; CPU {cpus}; load {loads}){ratio}")
    print(f"  largest run record            {sizes['run_record_bytes']:>10,} B;  events log {sizes['events_bytes']:,} B")
    print(f"  read back: {ours.rows} rows, {ours.distinct_ids} ids of {expected} ({'ok' if ok else 'WRONG'})")
    save(f"bench_many_files-{a.files}{'-unpacked' if a.unpacked else ''}", {
        "files": a.files, "records_per_file": a.records_per_file, "in_process": a.in_process, "unpacked": a.unpacked,
        "committed_at_end": committed, **first, **medians.get("ours", {}), **sizes, "rounds": rounds["ours"], "ok": ok,
        "baselines": {code: {"medians": medians.get(code), "rounds": rs} for code, rs in rounds.items() if code != "ours"},
        **({"duckdb_ok": duck.rows == a.files * a.records_per_file == duck.distinct_ids} if duck else {})})


if __name__ == "__main__":
    main()
