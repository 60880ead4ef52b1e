"""Writes the example job's sample data under jobs/data (deterministic: same bytes every time).

Two datasets over five days: `orders` (JSON lines and CSV) and `clicks` (JSON lines), with a few
deliberately bad records (torn JSON, a missing id, a non-numeric amount, a short CSV row) so the
example shows the error files.
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
DAY_MS = 86_400_000
COUNTRIES = ["US", "DE", "IN", "BR", "JP", "FR", None]


def event(rng: random.Random, i: int, day: int, kind: str) -> dict:
    return {
        "id": i,
        "ts": START_MS + day * DAY_MS + rng.randrange(DAY_MS),
        "user": f"u{rng.randrange(500):04d}",
        "kind": kind,
        "amount": round(rng.uniform(1, 500), 2) if kind == "order" else None,
        "country": rng.choice(COUNTRIES),
    }


def main(root: Path) -> None:
    rng = random.Random(42)
    orders, clicks = root / "orders", root / "clicks"
    orders.mkdir(parents=True, exist_ok=True)
    clicks.mkdir(parents=True, exist_ok=True)
    next_id = 1
    for day in range(5):
        lines = []
        for _ in range(400):
            lines.append(json.dumps(event(rng, next_id, day, "click")))
            next_id += 1
        if day == 1:
            lines.insert(17, '{"id": 999999, "ts": 1767312000000, "user": "u0001", "kind": "cli')  # torn line
            lines.insert(42, json.dumps({"ts": START_MS + DAY_MS + 5, "user": "u0002", "kind": "click"}))  # no id
        (clicks / f"clicks-2026-01-0{day + 1}.jsonl").write_text("\n".join(lines) + "\n")
    for day in range(5):
        rows = [event(rng, next_id + k, day, "order") for k in range(200)]
        next_id += 200
        if day % 2 == 0:
            if day == 2:
                rows[10]["amount"] = "abc"  # not a number
            (orders / f"orders-2026-01-0{day + 1}.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
        else:
            with open(orders / f"orders-2026-01-0{day + 1}.csv", "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["id", "ts", "user", "kind", "amount", "country"])
                for n, r in enumerate(rows):
                    row = [r["id"], r["ts"], r["user"], r["kind"], r["amount"], r["country"] or ""]
                    w.writerow(row[:4] if (day == 3 and n == 7) else row)  # one short row


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", default="jobs/data", type=Path, help="where to write (default: jobs/data)")
    main(parser.parse_args().out)
