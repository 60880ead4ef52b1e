"""Benchmark: how many files a continuous run leaves, with and without compaction, at a steady rate.

    .venv/bin/python scripts/bench_small_files.py [--rate 20000] [--interval 5] [--seconds 180] [--target-size 256MB]

An hour is simulated by a minute: the writer partitions by MINUTE (`yyyy/MM/dd/HH/mm` of the produce time), and
the job's `compaction:` section merges every closed minute partition (not written to for 20 s) every 20 s, between
checkpoints, in the continuous run itself. Every checkpoint writes one file per Kafka partition into the minute's
partition, so a closed minute holds 60 / interval × 4 files before compaction (720 × 4 an hour at 5 s); after it,
ceil(bytes / target). Prints, for each closed minute: files before (checkpoint files published into it) and after,
its bytes, and every record checked present once; then the hour it stands for: 60 such minutes of bytes → the files
per hour partition and per Kafka partition per hour at `--target-size`.

Writes scripts/results/bench_small_files.json. The broker, producer and job are scripts/bench_continuous.py's.
"""

from __future__ import annotations

import argparse
import collections
import math
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_continuous import PARTITIONS, Continuous, job_file, producer_result, start_producer
from bench_results import save
from support.kafka_broker import LocalBroker, create_topic, end_offsets


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=20_000)
    ap.add_argument("--interval", type=float, default=5.0)
    ap.add_argument("--seconds", type=float, default=180.0)
    ap.add_argument("--target-size", default="256MB")
    args = ap.parse_args()
    import fastavro

    from gobblin_py.config.model import CompactionSection

    target = CompactionSection.model_validate({"target_size": args.target_size}).target_size
    topic = "smallfiles"
    with LocalBroker() as broker, tempfile.TemporaryDirectory(prefix="bench-small-files-") as scratch:
        tmp = Path(scratch)
        create_topic(broker.bootstrap, topic, PARTITIONS)
        path = job_file(tmp, broker.bootstrap, topic, f"{args.interval}s")
        job = yaml.safe_load(path.read_text())
        job["writer"]["partition"] = {"column": "ts", "granularity": "MINUTE", "pattern": "yyyy/MM/dd/HH/mm"}
        job["compaction"] = {"schedule": "0/20 * * * * ?", "older_than": "20s", "target_size": args.target_size}
        path.write_text(yaml.safe_dump(job))
        published: dict[str, set[str]] = collections.defaultdict(set)  # every file name ever seen per minute partition
        output = tmp / "output" / topic
        with Continuous(tmp, path) as run:
            run.warm(broker.bootstrap, topic)
            producer = start_producer(broker.bootstrap, topic, args.rate, args.seconds, 0)
            while producer.poll() is None:
                for f in output.rglob("*.avro"):
                    if not any(part.startswith(".") for part in f.relative_to(output).parts):
                        published[str(f.parent.relative_to(output))].add(f.name)
                time.sleep(0.5)
            made = producer_result(producer)
            run.wait_for(topic, end_offsets(broker.bootstrap, topic))
            time.sleep(45)  # the last closed minutes' compaction
            record, events = run.stop(), run.events()
        minutes = sorted(published)
        closed = minutes[1:-2]  # the warm-up's minute and the last ones, still open or not yet compacted, left out
        rows, ids = [], collections.Counter()
        for m in minutes:
            for f in (output / m).glob("*.avro"):
                with open(f, "rb") as fh:
                    ids.update(r["id"] for r in fastavro.reader(fh) if r["id"] < 10**12)
        for m in closed:
            files = sorted((output / m).glob("*.avro"))
            size = sum(f.stat().st_size for f in files)
            rows.append({"minute": m, "files_before": len([n for n in published[m] if not n.startswith("compacted-")]),
                         "files_after": len(files), "bytes": size, "expected_after": max(1, math.ceil(size / target))})
        assert set(ids.values()) == {1} and len(ids) == made["produced"], (len(ids), made)
    compactions = sum(1 for e in events if e["name"] == "CompactionFinished")
    bytes_per_minute = sum(r["bytes"] for r in rows) / len(rows)
    hour_files = math.ceil(60 * bytes_per_minute / target)
    summary = {"rate": args.rate, "interval_s": args.interval, "seconds": args.seconds, "target_size": target,
               "records": made["produced"], "checkpoints": record.get("checkpoints_total"), "compactions": compactions,
               "closed_minutes": rows, "bytes_per_minute": bytes_per_minute,
               "hour": {"files_without_compaction_per_kafka_partition": int(3600 / args.interval),
                        "files_with_compaction_per_hour_partition": hour_files,
                        "files_with_compaction_per_kafka_partition": hour_files / PARTITIONS}}
    for r in rows:
        print(f"minute {r['minute']}: {r['files_before']} checkpoint files → {r['files_after']} after compaction "
              f"(ceil(bytes/target) = {r['expected_after']}), {r['bytes'] / 1e6:.1f} MB")
    print(f"every one of {made['produced']} records once; {compactions} compactions in the run")
    print(f"an hour at this rate: {60 * bytes_per_minute / 1e9:.2f} GB → {hour_files} file(s) per hour partition at "
          f"{args.target_size} ({hour_files / PARTITIONS:.2f} per Kafka partition), against {int(3600 / args.interval)} "
          "per Kafka partition without compaction")
    save("bench_small_files", {"summary": summary})
    return 0


if __name__ == "__main__":
    sys.exit(main())
