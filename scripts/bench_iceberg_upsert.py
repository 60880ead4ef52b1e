"""Benchmark: the iceberg publisher's upsert commit (N changes into a table of M rows in F data files), against
pyiceberg's own `Table.upsert`, what a pyiceberg user would call instead (two snapshots, an overwrite and an append,
and no deletes).

    .venv/bin/python scripts/bench_iceberg_upsert.py [--rows 1000000] [--files 20] [--changes 10000] [--commits 3]
                                                     [--clustered]

Loads M rows (id, name, amount, updated_at) as F commits of M/F consecutive ids (so F data files, each an id range),
then times C upsert commits of N changes each: 90% updates of existing ids, 5% new ids, 5% deletes, the ids spread
over the whole table (every file holds a changed key: the worst case of copy-on-write) or, with --clustered, one
contiguous id range (few files touched). The baseline does the same updates and inserts (not the deletes) with
`Table.upsert(join_cols=["id"])` on a copy of the table. Checks both tables against the expected rows by key; prints
the time per commit and files rewritten; writes scripts/results/bench_iceberg_upsert[-clustered].json.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from bench_results import save, scratch  # noqa: E402  (scripts/ is on sys.path: these run as scripts)

from gobblin_py.api import DatasetCommit, OutputFile  # noqa: E402
from gobblin_py.builtin.publishers.iceberg.publisher import IcebergPublisher  # noqa: E402
from gobblin_py.builtin.publishers.iceberg.settings import default_catalog  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.float64()), ("op", pa.string()),
                    ("updated_at", pa.int64())])


def rows(ids: list[int], version: int, op: str = "u") -> pa.Table:
    return pa.table({"id": ids, "name": [f"n{i}-v{version}" for i in ids], "amount": [i * 0.5 + version for i in ids],
                     "op": [op] * len(ids), "updated_at": [version] * len(ids)}, schema=SCHEMA)


def commit_of(root: Path, run: str, table: pa.Table) -> DatasetCommit:
    out = root / "task-output" / run
    out.mkdir(parents=True)
    pq.write_table(table, out / "part.parquet")
    f = OutputFile(path=str(out / "part.parquet"), rel_path="t/part.parquet", records=table.num_rows,
                   size=(out / "part.parquet").stat().st_size, checksum="")
    return DatasetCommit("bench", run, "t", f"bench/{run}/t", (f,), {"k": run}, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--files", type=int, default=20)
    ap.add_argument("--changes", type=int, default=10_000)
    ap.add_argument("--commits", type=int, default=3)
    ap.add_argument("--clustered", action="store_true")
    a = ap.parse_args()
    rng = random.Random(7)
    with scratch("bench-upsert-") as root:
        pub = IcebergPublisher(IcebergPublisher.Settings.model_validate(
            {"table": "db.t", "warehouse": str(root / "warehouse"), "catalog": default_catalog(str(root / "work")),
             "mode": "upsert", "key": ["id"], "order_by": ["updated_at"], "delete_when": {"column": "op", "equals": ["d"]}}))
        per = a.rows // a.files
        t0 = time.perf_counter()
        for f in range(a.files):
            pub.commit(commit_of(root, f"load{f}", rows(list(range(f * per, (f + 1) * per)), 0, "c")))
        load_s = time.perf_counter() - t0
        catalog = pub.catalog()
        base = catalog.load_table("db.t")
        baseline = catalog.create_table("db.baseline", schema=base.schema(), location=f"file://{root}/warehouse/db/baseline")
        for f in range(a.files):
            baseline.append(rows(list(range(f * per, (f + 1) * per)), 0, "c"))
        expected = {i: (f"n{i}-v0", "c") for i in range(a.rows)}
        baseline_expected = dict(expected)
        next_id = a.rows
        ours, theirs, rewritten = [], [], []
        for c in range(1, a.commits + 1):
            n_upd, n_new = int(a.changes * 0.9), int(a.changes * 0.05)
            n_del = a.changes - n_upd - n_new
            live = sorted(expected)
            if a.clustered:
                start = rng.randrange(0, max(1, len(live) - n_upd - n_del))
                picked = live[start:start + n_upd + n_del]
            else:
                picked = rng.sample(live, n_upd + n_del)
            upd, dele = picked[:n_upd], picked[n_upd:]
            new = list(range(next_id, next_id + n_new))
            next_id += n_new
            changes = pa.concat_tables([rows(upd + new, c), rows(dele, c, "d")])
            commit = commit_of(root, f"c{c}", changes)
            t0 = time.perf_counter()
            pub.commit(commit)
            ours.append(time.perf_counter() - t0)
            summary = catalog.load_table("db.t").current_snapshot().summary
            rewritten.append(int(__import__("json").loads(summary["gobblin-py.upsert"])["files_rewritten"]))
            for i in upd + new:
                expected[i] = (f"n{i}-v{c}", "u")
                baseline_expected[i] = (f"n{i}-v{c}", "u")
            for i in dele:
                expected.pop(i)
            t0 = time.perf_counter()
            catalog.load_table("db.baseline").upsert(rows(upd + new, c), join_cols=["id"])
            theirs.append(time.perf_counter() - t0)
        for name, want in (("db.t", expected), ("db.baseline", baseline_expected)):
            got = catalog.load_table(name).scan(selected_fields=("id", "name", "op")).to_arrow()
            assert got.num_rows == len(want), (name, got.num_rows, len(want))
            assert {r["id"]: (r["name"], r["op"]) for r in got.to_pylist()} == want, name
        result = {"rows": a.rows, "files": a.files, "changes_per_commit": a.changes, "commits": a.commits,
                  "clustered": a.clustered, "load_s": round(load_s, 2),
                  "upsert_s": [round(x, 3) for x in ours], "upsert_median_s": round(statistics.median(ours), 3),
                  "files_rewritten": rewritten,
                  "baseline_pyiceberg_upsert_s": [round(x, 3) for x in theirs],
                  "baseline_median_s": round(statistics.median(theirs), 3),
                  "ratio_vs_baseline": round(statistics.median(ours) / statistics.median(theirs), 2),
                  "snapshots": len(catalog.load_table("db.t").snapshots()) - a.files,
                  "baseline_snapshots": len(catalog.load_table("db.baseline").snapshots()) - a.files}
        print(result)
        save("bench_iceberg_upsert" + ("-clustered" if a.clustered else ""), result)


if __name__ == "__main__":
    main()
