"""Readers of what a job published: every Avro record and every error-file entry under a directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fastavro
import orjson


def read_avro_dir(root: Path) -> list[dict[str, Any]]:
    """Every record of every .avro file under `root`, each with its file's path relative to `root`."""
    records = []
    for path in sorted(root.rglob("*.avro")):
        with open(path, "rb") as f:
            for rec in fastavro.reader(f):
                rec["_file"] = path.relative_to(root).as_posix()
                records.append(rec)
    return records


def read_error_files(root: Path) -> list[dict[str, Any]]:
    """Every entry of every `*.errors.jsonl` error file under `root`, in path order."""
    return [orjson.loads(line) for p in sorted(root.rglob("*.errors.jsonl")) for line in p.read_bytes().splitlines()]
