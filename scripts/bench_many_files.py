"""Benchmark: many small files (issue 47): a first run over N files of a few records each, a run that finds 10 new
files among them, and a run with nothing new, against DuckDB reading the same N files into one Parquet file.

    .venv/bin/python scripts/bench_many_files.py [--files 10000] [--records-per-file 3] [--in-process] [--unpacked]

Every output is read back with pyarrow (each id once: a tool that loses or doubles a record is WRONG). Prints each
step's wall time, the run record's size and `status --json`'s and `history list`'s times over the job; writes
scripts/results/bench_many_files-<N>.json (`-unpacked` with --unpacked: `source.pack_bytes: 0`, a task a file, the
baseline before packing). The machine is noisy: compare the ratio to DuckDB from the same run.
"""

from __future__ import annotations

import argparse
import json
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


def timed(cmd: list[str], cwd: Path) -> tuple[float, str]:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    took = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return took, done.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--records-per-file", type=int, default=3)
    ap.add_argument("--in-process", action="store_true", help="gobblin-py runs with --in-process (no Spark)")
    ap.add_argument("--unpacked", action="store_true", help="source.pack_bytes: 0 (a task a file, as before packing)")
    a = ap.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="bench-many-files-") as scratch:
        tmp = Path(scratch)
        data = tmp / "in" / "events"
        ids = write_files(data, 0, a.files, a.records_per_file)
        (tmp / "small.avsc").write_text(json.dumps(SCHEMA))
        job = {"job": {"name": "many", "work_dir": str(tmp / "work")}, "source": {"class": "files", "path": str(tmp / "in"), **({"pack_bytes": 0} if a.unpacked else {})},
               "converters": [{"class": "json_to_avro", "schema": str(tmp / "small.avsc")}],
               "writer": {"class": "parquet"}, "publisher": {"final_dir": str(tmp / "out")}}
        (tmp / "job.yaml").write_text(yaml.safe_dump(job, sort_keys=False))
        run = [py, "-m", "gobblin_py.cli.main", "run", "job.yaml"] + (["--in-process"] if a.in_process else [])
        figures: dict[str, float] = {}
        figures["duckdb_s"], _ = timed([py, "-c", (
            "import duckdb,sys; duckdb.connect().execute(\"COPY (SELECT * FROM read_json(?, columns={'id':'BIGINT',"
            "'name':'VARCHAR','amount':'DOUBLE'})) TO '" + str(tmp / "duck.parquet") + "' (FORMAT parquet)\", "
            "[sys.argv[1]])"), str(data / "*.jsonl")], tmp)
        duck = parquet_read_back([tmp / "duck.parquet"])
        figures["first_run_s"], _ = timed(run, tmp)
        write_files(data, a.files, 10, a.records_per_file)
        figures["ten_new_s"], _ = timed(run, tmp)
        figures["no_data_s"], _ = timed(run, tmp)
        figures["status_s"], _ = timed([py, "-m", "gobblin_py.cli.main", "status", "job.yaml", "--json"], tmp)
        figures["history_s"], _ = timed([py, "-m", "gobblin_py.cli.main", "history", "list", "job.yaml"], tmp)
        ours = parquet_read_back(sorted((tmp / "out").rglob("*.parquet")))
        expected = ids + 10 * a.records_per_file
        records = sorted(tmp.glob("work/**/runs/*.json*"))
        figures["run_record_bytes"] = max((p.stat().st_size for p in records), default=0)
        figures["events_bytes"] = sum(p.stat().st_size for p in tmp.glob("work/**/events*"))
    print(f"{a.files} files × {a.records_per_file} records{' (--in-process)' if a.in_process else ''}{' (--unpacked)' if a.unpacked else ''}")
    print(f"  DuckDB read_json → Parquet    {figures['duckdb_s']:8.2f} s   rows {duck.rows} ({'ok' if duck.rows == ids and duck.distinct_ids == ids else 'WRONG'})")
    print(f"  gobblin-py first run          {figures['first_run_s']:8.2f} s   {figures['duckdb_s'] / figures['first_run_s']:.2f}× DuckDB")
    print(f"  gobblin-py, 10 new files      {figures['ten_new_s']:8.2f} s")
    print(f"  gobblin-py, nothing new       {figures['no_data_s']:8.2f} s")
    print(f"  status --json                 {figures['status_s']:8.2f} s")
    print(f"  history list                  {figures['history_s']:8.2f} s")
    print(f"  largest run record            {figures['run_record_bytes']:>10,} B;  events log {figures['events_bytes']:,} B")
    print(f"  read back: {ours.rows} rows, {ours.distinct_ids} ids of {expected} ({'ok' if ours.rows == ours.distinct_ids == expected else 'WRONG'})")
    save(f"bench_many_files-{a.files}{'-unpacked' if a.unpacked else ''}", {
        "files": a.files, "records_per_file": a.records_per_file, "in_process": a.in_process, "unpacked": a.unpacked,
        **figures, "ok": ours.rows == ours.distinct_ids == expected})


if __name__ == "__main__":
    main()
