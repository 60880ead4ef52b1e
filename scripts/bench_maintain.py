"""Benchmark: `gobblin-py maintain` on an Iceberg table of 10,000 snapshots (issue 32).

    .venv/bin/python scripts/bench_maintain.py [--snapshots 10000] [--keep-last 10]

Runs jobs/example-iceberg.yaml once (from a copy of jobs/, catalog and warehouse in a scratch directory), then gives
the `clicks` table a history of `--snapshots` append snapshots a minute apart (see `grow`: pyiceberg itself cannot
write that many), as a streaming job that committed every minute for a week without expiry leaves it. Then times, each in a child process: `maintain --expire-snapshots-older-than 1s --keep-last N` dry (it
lists what it would delete), the same with `--yes`, and a second `--yes` that finds nothing to do; and, as the floor,
pyiceberg's own expiry of the same snapshots by age on the table, restored after (metadata only: it deletes no file). The table
is read back with pyiceberg before and after: the same rows, and N snapshots left. Writes
scripts/results/bench_maintain-<N>.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench_results import save  # noqa: E402

TABLE = "events.clicks"


def catalog(tmp: Path) -> Any:
    from pyiceberg.catalog import load_catalog

    return load_catalog("gobblin_py", type="sql", uri=f"sqlite:///{tmp / 'work' / 'iceberg' / 'catalog.db'}")


def cli(tmp: Path, *args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "gobblin_py.cli.main", *args], cwd=tmp, capture_output=True, text=True)
    took = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"gobblin-py {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return took, done


def grow(tmp: Path, snapshots: int) -> float:
    """The table's history made `snapshots` long; seconds taken.

    pyiceberg cannot build it: each of its commits rewrites and re-validates the whole metadata (1.6 s a commit at
    1,000 snapshots here, growing with them), and appends in one transaction copy the metadata once per append. So
    the history is written as a writer would have left it: before the job's one real snapshot S (which stays the
    newest and current), `snapshots` − 1 older append snapshots, each with a manifest list and a manifest of its own
    (copies of S's, rewritten with fastavro to point at each other) listing S's data files; one metadata file holds
    them all, and the catalog points at it."""
    import json
    import sqlite3
    import uuid

    import fastavro

    t0 = time.perf_counter()
    table = catalog(tmp).load_table(TABLE)
    meta_path = Path(table.metadata_location.removeprefix("file://"))
    meta = json.loads(meta_path.read_text())
    (real,) = meta["snapshots"]
    real_list = Path(real["manifest-list"].removeprefix("file://"))
    with open(real_list, "rb") as f:
        reader = fastavro.reader(f)
        list_schema, list_meta, (entry,) = reader.writer_schema, dict(reader.metadata), list(reader)
    real_manifest = Path(entry["manifest_path"].removeprefix("file://"))
    with open(real_manifest, "rb") as f:
        reader = fastavro.reader(f)
        manifest_schema, manifest_meta, manifest_rows = reader.writer_schema, dict(reader.metadata), list(reader)
    drop = {"avro.schema", "avro.codec"}
    history, ts, parent = [], real["timestamp-ms"] - snapshots * 60_000, None
    for n in range(1, snapshots):
        sid = uuid.uuid4().int >> 65
        manifest = real_manifest.with_name(f"bench-{n}-m0.avro")
        with open(manifest, "wb") as f:
            fastavro.writer(f, manifest_schema, [{**r, "snapshot_id": sid} for r in manifest_rows],
                            metadata={k: v for k, v in manifest_meta.items() if k not in drop}, codec="deflate")
        manifest_list = real_list.with_name(f"snap-bench-{n}.avro")
        with open(manifest_list, "wb") as f:
            fastavro.writer(f, list_schema, [{**entry, "manifest_path": f"file://{manifest}", "added_snapshot_id": sid,
                                              "manifest_length": manifest.stat().st_size}],
                            metadata={**{k: v for k, v in list_meta.items() if k not in drop}, "snapshot-id": str(sid)},
                            codec="deflate")
        history.append({**real, "snapshot-id": sid, "timestamp-ms": ts + n * 60_000, "manifest-list": f"file://{manifest_list}",
                        "summary": {k: v for k, v in real["summary"].items() if not k.startswith("gobblin-py")},
                        **({"parent-snapshot-id": parent} if parent else {})})
        parent = sid
    real = {**real, "parent-snapshot-id": parent}
    meta["snapshots"] = history + [real]
    meta["snapshot-log"] = [{"timestamp-ms": s["timestamp-ms"], "snapshot-id": s["snapshot-id"]} for s in meta["snapshots"]]
    new_path = meta_path.with_name(f"99999-{uuid.uuid4()}.metadata.json")
    new_path.write_text(json.dumps(meta))
    with sqlite3.connect(tmp / "work" / "iceberg" / "catalog.db") as db:
        db.execute("UPDATE iceberg_tables SET metadata_location = ?, previous_metadata_location = ? "
                   "WHERE table_namespace = ? AND table_name = ?", (f"file://{new_path}", table.metadata_location,
                                                                   *TABLE.split(".")))
    took = time.perf_counter() - t0
    print(f"  {len(catalog(tmp).load_table(TABLE).metadata.snapshots)} snapshots ({took:.0f}s)", flush=True)
    return took


def ids(tmp: Path) -> Counter:
    return Counter(catalog(tmp).load_table(TABLE).scan().to_arrow().column("id").to_pylist())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--snapshots", type=int, default=10_000)
    ap.add_argument("--keep-last", type=int, default=10)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-maintain-") as scratch:
        tmp = Path(scratch) / "job"
        shutil.copytree(REPO / "jobs", tmp / "jobs")
        job = tmp / "jobs" / "example-iceberg.yaml"
        job.write_text(job.read_text() + "  warehouse: ./warehouse\n")
        cli(tmp, "run", str(job), "--in-process", "-q")
        grow_s = grow(tmp, args.snapshots)
        before = ids(tmp)
        time.sleep(1.5)
        backup = Path(scratch) / "backup"  # the catalog holds absolute paths: the floor runs on the table, restored after
        shutil.copytree(tmp, backup, symlinks=True)
        expire = ["maintain", str(job), "--expire-snapshots-older-than", "1s", "--keep-last", str(args.keep_last)]
        dry_s, dry = cli(tmp, *expire)
        listed = dry.stdout.count("snapshot ")

        table = catalog(tmp).load_table(TABLE)
        cutoff = sorted(s.timestamp_ms for s in table.metadata.snapshots)[-args.keep_last]
        t0 = time.perf_counter()  # by age: its `by_ids` deep-copies the metadata twice per id (hours here)
        table.maintenance.expire_snapshots().older_than(dt.datetime.fromtimestamp(cutoff / 1000, dt.UTC)).commit()
        floor_s = time.perf_counter() - t0
        shutil.rmtree(tmp)
        shutil.copytree(backup, tmp, symlinks=True)  # back to the table of N snapshots

        yes_s, yes = cli(tmp, *expire, "--yes")
        again_s, again = cli(tmp, *expire, "--yes")
        after = ids(tmp)
        left = len(catalog(tmp).load_table(TABLE).metadata.snapshots)
    verdict = "ok" if after == before and left == args.keep_last else "WRONG"
    summary = {"snapshots": args.snapshots, "keep_last": args.keep_last, "grow_s": grow_s, "rows": sum(before.values()),
               "dry_run_s": dry_s, "dry_run_listed_lines": listed, "apply_s": yes_s, "second_apply_s": again_s,
               "pyiceberg_metadata_only_expiry_s": floor_s, "snapshots_left": left, "verdict": verdict,
               "apply_output_tail": yes.stdout.strip().splitlines()[-3:], "second_output_tail": again.stdout.strip().splitlines()[-2:]}
    for k, v in summary.items():
        print(f"{k}: {v}")
    save(f"bench_maintain-{args.snapshots}", summary)
    return 0 if verdict == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
