"""Bin-packing WorkUnits into MultiWorkUnits by estimated size (Gobblin's worst-fit-decreasing packer)."""

from __future__ import annotations

import heapq
from collections.abc import Callable

from gobblin_py.api import MultiWorkUnit, WorkUnit


def worst_fit_decreasing(units: list[WorkUnit], bins: int, size: Callable[[WorkUnit], float]) -> list[WorkUnit | MultiWorkUnit]:
    """At most `bins` tasks: largest WorkUnit first, each into the currently lightest bin.

    A bin holding a single WorkUnit is returned as that WorkUnit.
    """
    if bins <= 0 or len(units) <= 1:
        return list(units)
    heap: list[tuple[float, int]] = [(0.0, i) for i in range(min(bins, len(units)))]
    contents: list[list[WorkUnit]] = [[] for _ in heap]
    for wu in sorted(units, key=lambda u: (-size(u), u.id)):
        load, i = heapq.heappop(heap)
        contents[i].append(wu)
        heapq.heappush(heap, (load + size(wu), i))
    out: list[WorkUnit | MultiWorkUnit] = []
    for n, group in enumerate(contents):
        if len(group) == 1:
            out.append(group[0])
        elif group:
            out.append(MultiWorkUnit(id=f"bin{n}", workunits=tuple(group)))
    return out
