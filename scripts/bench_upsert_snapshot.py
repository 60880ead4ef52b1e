"""The `iceberg` upsert publisher alone on a first snapshot (issue 45): its check and table commit of N rows in K
chunk files shaped as postgres_cdc writes them (the table's five columns plus `_op`, `_lsn`, `_seq`, `_commit_ts`,
`_xid`, a truncate record first; `order_by: [_lsn, _seq]` with the `_op` markers) against the same rows shaped as the
jdbc source writes them (five columns, `order_by: [updated_at]`), each into an empty table, alternating for --rounds.
The baseline is the jdbc-shaped commit: what the same publisher costs a first copy without CDC. Every table is read
back and must hold each id once. Run it from another checkout (PYTHONPATH) to compare code versions.

    PYTHONPATH=. python scripts/bench_upsert_snapshot.py --rows 2000000 --chunks 8 --rounds 3 [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from bench_common import scratch_dir

from gobblin_py.api import DatasetCommit, OutputFile
from gobblin_py.builtin.publishers.iceberg.publisher import IcebergPublisher
from gobblin_py.builtin.publishers.iceberg.settings import default_catalog

TS = pa.timestamp("us", "UTC")
BASE = pa.schema([("id", pa.int64()), ("owner", pa.string()), ("balance", pa.int64()), ("note", pa.string()),
                  ("updated_at", TS)])
CDC = pa.schema([*BASE, ("_op", pa.string()), ("_lsn", pa.int64()), ("_seq", pa.int64()), ("_commit_ts", TS),
                 ("_xid", pa.int64())])


def chunk(ids: Any, cdc: bool, index: int) -> pa.Table:
    """One chunk file's rows: the table's columns, and postgres_cdc's change columns (a snapshot row: `read`)."""
    n = len(ids)
    columns = [pa.array(ids), pa.array([f"o{i}" for i in ids]), pa.array(ids), pa.nulls(n, pa.string()),
               pa.array(np.full(n, 1_700_000_000_000_000), TS)]
    if not cdc:
        return pa.table(columns, schema=BASE)
    t = pa.table([*columns, pa.repeat(pa.scalar("read"), n), pa.repeat(pa.scalar(99, pa.int64()), n),
                  pa.array((index << 32) + np.arange(n)), pa.nulls(n, TS), pa.nulls(n, pa.int64())], schema=CDC)
    if index:
        return t
    truncate = {f.name: None for f in CDC} | {"_op": "truncate", "_lsn": 99, "_seq": -1}
    return pa.concat_tables([pa.Table.from_pylist([truncate], schema=CDC), t])


def one(tmp: Path, rows: int, chunks: int, cdc: bool, name: str) -> dict[str, Any]:
    """Check and commit one first snapshot into an empty table; the seconds of each, the ids read back checked."""
    out = tmp / name / "task-output"
    out.mkdir(parents=True)
    files, per = [], rows // chunks
    for c in range(chunks):
        p = out / f"part-{c}.parquet"
        t = chunk(np.arange(c * per + 1, (c + 1) * per + 1, dtype=np.int64), cdc, c)
        pq.write_table(t, p)
        files.append(OutputFile(path=str(p), rel_path=f"t/part-{c}.parquet", kind="data", records=t.num_rows,
                                size=p.stat().st_size, checksum=""))
    markers = {"order_by": ["_lsn", "_seq"], "delete_when": {"column": "_op", "equals": ["delete"]},
               "truncate_when": {"column": "_op", "equals": ["truncate"]}} if cdc else {"order_by": ["updated_at"]}
    pub = IcebergPublisher(IcebergPublisher.Settings.model_validate(
        {"table": "db.t", "warehouse": str(tmp / name / "warehouse"), "catalog": default_catalog(str(tmp / name / "work")),
         "mode": "upsert", "key": ["id"], **markers}))
    commit = DatasetCommit("bench", name, "t", f"bench/{name}/t", tuple(files), {"k": name}, 1)
    started = time.perf_counter()
    pub.check(commit)
    checked = time.perf_counter()
    pub.commit(commit)
    done = time.perf_counter()
    ids = pub.catalog().load_table("db.t").scan(selected_fields=("id",)).to_arrow()["id"]
    ok = len(ids) == rows and ids.to_numpy().min() == 1 and len(np.unique(ids.to_numpy())) == rows
    return {"check_s": round(checked - started, 3), "commit_s": round(done - checked, 3),
            "seconds": round(done - started, 3), "ok": bool(ok)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--chunks", type=int, default=8, help="chunk files (postgres_cdc: one per snapshot chunk)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", default=None, help="results JSON (default scripts/results/bench_upsert_snapshot.json)")
    args = p.parse_args()
    tmp = scratch_dir("bench-upsert-snapshot-")
    one(tmp, 10_000, 2, True, "warm")  # imports and the catalog's first open, outside the rounds
    result: dict[str, Any] = {"rows": args.rows, "chunks": args.chunks, "jdbc_shaped": [], "cdc_shaped": []}
    for r in range(args.rounds):
        for shape in ("jdbc_shaped", "cdc_shaped"):
            got = one(tmp, args.rows, args.chunks, shape == "cdc_shaped", f"{shape}-{r}")
            result[shape].append(got)
            print(json.dumps({shape: got}), flush=True)
    result["jdbc_over_cdc"] = [round(j["seconds"] / c["seconds"], 2) for j, c in zip(result["jdbc_shaped"], result["cdc_shaped"])]
    result["median_jdbc_over_cdc"] = statistics.median(result["jdbc_over_cdc"])
    result["date"] = time.strftime("%Y-%m-%d")
    out = Path(args.out) if args.out else Path(__file__).resolve().parent / "results" / "bench_upsert_snapshot.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if "over" in k}))


if __name__ == "__main__":
    main()
