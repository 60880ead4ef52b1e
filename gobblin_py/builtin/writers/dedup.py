"""One record per key, as a compaction with `--dedup-key` keeps them: the same choice for every format's merge."""

from __future__ import annotations

import json
from typing import Any

from gobblin_py.api import DedupSpec


def kept_records(records: list[dict[str, Any]], spec: DedupSpec) -> list[dict[str, Any]]:
    """One record per key (in the order keys first appear), the latest or first by `order_by`, ties to the later
    record for `latest`; records without the key are all kept."""
    kept: dict[Any, dict[str, Any]] = {}
    keyless: list[dict[str, Any]] = []
    latest = spec.keep == "latest"
    for rec in records:
        key = rec.get(spec.key)
        if key is None:
            keyless.append(rec)
            continue
        if not isinstance(key, (str, int, float, bytes, bool)):
            key = json.dumps(key, sort_keys=True, default=str)
        old = kept.get(key)
        if old is None:
            kept[key] = rec
        elif spec.order_by is None:
            if latest:
                kept[key] = rec
        else:
            new_v, old_v = rec.get(spec.order_by), old.get(spec.order_by)
            if new_v is not None and (old_v is None or (new_v >= old_v if latest else new_v < old_v)):
                kept[key] = rec
    return [*kept.values(), *keyless]
