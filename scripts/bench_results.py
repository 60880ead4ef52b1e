"""Where every benchmark keeps its figures: scripts/results/<name>.json, written and announced in one place; and
the command line and scratch directory the compaction benchmarks share."""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def save(name: str, data: dict[str, Any]) -> Path:
    """Write `data` to scripts/results/<name>.json and say where."""
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"{name}.json"
    out.write_text(json.dumps(data, indent=2, default=str) + "\n")
    print(f"written to {out}")
    return out


def compaction_args(doc: str, dedup: bool = False) -> argparse.Namespace:
    """The compaction benchmarks' options from the command line: --files, --records, --target-size (as bytes),
    --in-process, and --dedup where the benchmark offers it; `doc` is the script's docstring (its first line the help)."""
    from gobblin_py.units import parse_bytes  # the script has put the repository on sys.path

    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--records", type=int, default=2000)
    ap.add_argument("--target-size", type=parse_bytes, default="256MB")
    if dedup:
        ap.add_argument("--dedup", action="store_true", help="--dedup-key id --order-by ts")
    ap.add_argument("--in-process", action="store_true", help="merge on a thread instead of a Spark task")
    return ap.parse_args()


@contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    """A temporary directory for one benchmark run, removed afterwards however the run ends."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
