"""A job that leaves many small Avro files per day partition (one per input file), and a reader of one partition
as a query engine reads it: the files directly in the directory, hidden (`.`) and `_` names skipped."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import fastavro
from support.jobs import EVENT_SCHEMA, write_job

from gobblin_py.testing.crash import cli

DAY_MS = 86_400_000
JAN1 = 1_767_225_600_000  # 2026-01-01T00:00Z


def add_input(root: Path, name: str, ids: range, day: int = 0, users: int = 7) -> None:
    """One input file of `ids`, every record on day `day` of January 2026: one more small file in that partition."""
    folder = root / "data" / "clicks"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{name}.jsonl", "w") as out:
        for i in ids:
            out.write(json.dumps({"id": i, "ts": JAN1 + day * DAY_MS + i, "user": f"u{i % users}", "kind": "click",
                                  "amount": float(i)}) + "\n")


def make_job(root: Path, files: int = 6, per_file: int = 200, commit_parallelism: int = 1, **compaction: Any) -> Path:
    """`files` inputs of `per_file` records, the last third on January 2nd; the job file (with `compaction:` if given;
    partitions committed one at a time unless `commit_parallelism`)."""
    for f in range(files):
        add_input(root, f"part-{f:03d}", range(f * per_file, (f + 1) * per_file), day=1 if f >= files * 2 // 3 else 0)
    job: dict[str, Any] = {
        "job": {"name": "c", "work_dir": str(root / "work"), "commit_parallelism": commit_parallelism},
        "source": {"class": "files", "path": str(root / "data"), "pack_bytes": 0},  # a file each: small files to compact
        "converters": [{"class": "json_to_avro", "schema": str(EVENT_SCHEMA)}],
        "writer": {"class": "avro", "codec": "deflate", "partition": {"column": "ts", "granularity": "DAY"}},
        "publisher": {"final_dir": str(root / "output")},
        "spark": {"master": "local[2]"},
    }
    if compaction:
        job["compaction"] = compaction
    return write_job(root, job)


def ingest(root: Path) -> None:
    done = cli(["run", "job.yaml", "--in-process", "-q"], root)
    assert done.returncode == 0, done.stdout + done.stderr


def compact(root: Path, *args: str, crash_at: str | None = None) -> Any:
    return cli(["compact", "job.yaml", "--in-process", *args], root, crash_at=crash_at)


def partition(root: Path, day: int = 1) -> Path:
    return root / "output" / "clicks" / "2026" / "01" / f"{day:02d}"


def read_partition(directory: Path) -> Counter[int]:
    """How many times a reader listing the partition sees each record id."""
    seen: Counter[int] = Counter()
    for path in sorted(directory.iterdir()):
        if path.name.startswith((".", "_")) or not path.name.endswith(".avro"):
            continue
        with open(path, "rb") as f:
            seen.update(r["id"] for r in fastavro.reader(f))
    return seen


def avro_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".avro"))


def records(directory: Path) -> list[dict[str, Any]]:
    out = []
    for name in avro_files(directory):
        with open(directory / name, "rb") as f:
            out.extend(fastavro.reader(f))
    return out
