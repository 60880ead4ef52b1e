"""The routed decode's hand-over (`builtin/sources/spool.py`, issue 45): a decode's messages routed to `--tables`
tables and each table's read back whole, through the spool files (`in_process=False`, what mysql_cdc's work units on
Spark's workers need) against handed over in memory (`in_process=True`, postgres_cdc's one task), in one process,
alternating, `--rounds` times. The messages are shaped as `bench_cdc.py --phase tables` routes them: `--changes`
inserts of ~60 bytes in transactions of `--per-txn`, each transaction touching every table (its Begin spooled to each).
Reported: seconds of each, and memory's over files' (the median round's); every table's messages compared.

    python scripts/bench_spool.py --tables 50 --changes 50000 --rounds 7
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gobblin_py.builtin.sources.spool import TableSpools

RESULTS = Path(__file__).resolve().parent / "results"


def messages(tables: int, changes: int, per_txn: int) -> list[tuple[int, bytes]]:
    """(table index, message) in the order a decode routes them: per transaction, each table's Begin then its inserts."""
    out: list[tuple[int, bytes]] = []
    for first in range(0, changes, per_txn):
        begin = b"B" + struct.pack("!qqI", first, 0, first)
        ids = range(first, min(changes, first + per_txn))
        for k in range(tables):
            mine = [i for i in ids if i % tables == k]
            if mine:
                out.append((k, begin))
                out += [(k, b"I" + struct.pack("!I", k) + b"N" + b"x" * 50 + str(i).encode()) for i in mine]
    return out


def one(root: Path, names: list[str], routed: list[tuple[int, bytes]], in_process: bool, tag: str) -> tuple[float, bool]:
    """Seconds to route `routed` and read every table back; whether each table got exactly its messages."""
    spools = TableSpools(root, "bench", [tag], names, in_process=in_process)

    def decode() -> None:
        spools.start()
        buffers = [spools.buffers[n] for n in names]
        for k, data in routed:
            spools.append(buffers[k], data)
        spools.finish()

    started = time.perf_counter()
    got = {n: list(spools.read(n, decode, "bench.spool_read")) for n in names}
    took = time.perf_counter() - started
    want = {n: [d for k, d in routed if names[k] == n] for n in names}
    return took, got == want


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tables", type=int, default=50)
    p.add_argument("--changes", type=int, default=50_000)
    p.add_argument("--per-txn", type=int, default=100)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--out", default=None, help="the results file's name under scripts/results")
    args = p.parse_args()
    names = [f"public.t{i:03d}" for i in range(args.tables)]
    routed = messages(args.tables, args.changes, args.per_txn)
    rounds = []
    with tempfile.TemporaryDirectory(prefix="bench-spool-") as tmp:
        for r in range(args.rounds):
            times: dict[str, float] = {}
            for mode in (("files", "memory") if r % 2 == 0 else ("memory", "files")):
                times[mode], ok = one(Path(tmp), names, routed, mode == "memory", f"{r}-{mode}")
                if not ok:
                    raise SystemExit(f"round {r}, {mode}: a table's messages differ")
            rounds.append({**{k: round(v, 4) for k, v in times.items()}, "ratio": round(times["memory"] / times["files"], 3),
                           "load": round(os.getloadavg()[0], 2)})
            print(json.dumps(rounds[-1]), file=sys.stderr)
    out = {"tables": args.tables, "changes": args.changes, "per_txn": args.per_txn, "messages": len(routed),
           "rounds": rounds, "ratio": statistics.median(r["ratio"] for r in rounds),
           "files_s": statistics.median(r["files"] for r in rounds), "memory_s": statistics.median(r["memory"] for r in rounds)}
    print(json.dumps(out, indent=2))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / (args.out or "bench_spool.json")).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
