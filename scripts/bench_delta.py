"""Benchmark: Kafka → a Delta table against Kafka → Parquet files, both gobblin-py, in one run (issue 32).

    .venv/bin/python scripts/bench_delta.py [--records 4000000] [--rounds 3] [--client confluent]

Starts a local broker (Tansu, 127.0.0.1), produces N ~100-byte JSON events into 4 sealed partitions (the events of
scripts/bench_kafka.py), then runs, `rounds` times each in alternating order, the same job from a fresh work
directory: writing Parquet files published as files, and writing Parquet files published into a Delta table
(`publisher: delta`). The files are read back with pyarrow, the table with `deltalake` (its own reader, at its
latest version): a run that loses or doubles a record is WRONG and never the fastest. Prints each run's time, the
ratio files/Delta (1.0: the same; the issue asks for 0.9 or more), the Delta commit's share of the job, and writes
scripts/results/bench_delta-<N>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # the local broker is a test helper: tests/support/kafka_broker.py
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from bench_common import (  # noqa: E402
    REFERENCE,
    Measured,
    ReadBack,
    Tool,
    compare,
    cpu_seconds,
    data_files,
    gobblin_details,
    parquet_read_back,
    print_comparison,
    run_rounds,
)
from bench_kafka import PARTITIONS, SCHEMA, TOPIC, produce  # noqa: E402
from bench_results import save  # noqa: E402
from support.kafka_broker import LocalBroker, create_topic  # noqa: E402

FILES = "gobblin-py (files)"


def job_file(tmp: Path, bootstrap: str, client: str, delta: bool) -> Path:
    """The bench job of scripts/bench_kafka.py with the Parquet writer, published as files or into a Delta table."""
    schema = tmp / "bench.avsc"
    schema.write_text(json.dumps(SCHEMA))
    publisher: dict[str, Any] = ({"class": "delta", "table_uri": str(tmp / "lake" / "{dataset}")} if delta
                                 else {"final_dir": str(tmp / "output")})
    job = {"job": {"name": "bench", "work_dir": str(tmp / "work")},
           "source": {"class": "kafka", "bootstrap_servers": bootstrap, "topics": [TOPIC], "max_workunits": PARTITIONS,
                      "client": client},
           "converters": [{"class": "json_to_avro", "schema": str(schema)}],
           "writer": {"class": "parquet"}, "publisher": publisher, "spark": {"master": "local[2]"}}
    path = tmp / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def delta_read_back(root: Path) -> ReadBack:
    """Rows and distinct ids of every Delta table under `root`, as deltalake reads each at its latest version."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    tables = [DeltaTable(str(log.parent)).to_pyarrow_table(columns=["id"]) for log in sorted(root.glob("*/_delta_log"))]
    if not tables:
        return ReadBack(0, 0)
    ids = pa.concat_tables(tables).column("id")
    return ReadBack(len(ids), pc.count_distinct(ids).as_py())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=4_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--client", default="confluent", help="gobblin-py's Kafka client: kafka-python or confluent")
    args = ap.parse_args()
    py = sys.executable
    with LocalBroker() as broker, tempfile.TemporaryDirectory(prefix="bench-delta-") as scratch:
        create_topic(broker.bootstrap, TOPIC, PARTITIONS)
        t0 = time.perf_counter()
        ends = produce(broker.bootstrap, args.records)
        total = sum(ends.values())
        print(f"produced {total} records into {PARTITIONS} partitions in {time.perf_counter() - t0:.1f}s", flush=True)

        def command(delta: bool):
            return lambda d: [py, "-m", "gobblin_py.cli.main", "run", str(job_file(d, broker.bootstrap, args.client, delta))]

        def details(d: Path, m: Measured) -> dict[str, Any]:
            out = gobblin_details(d, m)
            out["commit_share"] = out["phases"]["commit"] / m.wall_s
            return out

        tools = [Tool(REFERENCE, "delta", command(True), lambda d: delta_read_back(d / "lake"), details=details),
                 Tool(FILES, "parquet", command(False), lambda d: parquet_read_back(data_files(d / "output", ".parquet")),
                      details=details)]
        figures = run_rounds(tools, args.rounds, total, Path(scratch), server_cpu=lambda: cpu_seconds(broker.pid))
    summary = compare(figures, total, {t.name: t.writes for t in tools})
    med = statistics.median
    summary.update(records=total, client=args.client, rounds=args.rounds,
                   delta_commit_share=med(f["commit_share"] for f in figures[REFERENCE] if "commit_share" in f),
                   delta_commit_s=med(f["phases"]["commit"] for f in figures[REFERENCE] if "phases" in f),
                   files_commit_s=med(f["phases"]["commit"] for f in figures[FILES] if "phases" in f))
    print_comparison(summary)
    files = summary["tools"][FILES]
    print(f"files / delta: {files.get('ratio_vs_gobblin_py') or 0:.3f} (1.0: as fast; per round "
          f"{', '.join(f'{r:.3f}' for r in files.get('round_ratios', []))}); the Delta commit: "
          f"{summary['delta_commit_s']:.2f}s, {summary['delta_commit_share']:.1%} of the job "
          f"(the files' commit {summary['files_commit_s']:.2f}s)")
    save(f"bench_delta-{total}", {"summary": summary, "rounds": figures})
    return 0


if __name__ == "__main__":
    sys.exit(main())
