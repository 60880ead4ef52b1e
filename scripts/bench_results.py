"""Where every benchmark keeps its figures: scripts/results/<name>.json, written and announced in one place."""

from __future__ import annotations

import json
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
