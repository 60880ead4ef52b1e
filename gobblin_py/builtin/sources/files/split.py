"""The files source's split: which bytes of which file one WorkUnit reads."""

from __future__ import annotations

from gobblin_py.api.split import Split


class FileSplit(Split):
    """Bytes `[start, end)` of `file` (a path or URL), cut on line boundaries by the planner when tailing."""

    file: str
    start: int = 0
    end: int
