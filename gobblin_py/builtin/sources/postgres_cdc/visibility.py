"""Which transactions a REPEATABLE READ snapshot sees, from the text `pg_current_snapshot()` gives: the rule that hands a
snapshot's rows over to the slot's changes (a change is read after a snapshot iff the snapshot does not see it)."""

from __future__ import annotations


class Snapshot:
    """Which transactions a snapshot sees, from `pg_current_snapshot()` (`xmin:xmax:xip,…`, 64-bit ids)."""

    def __init__(self, text: str) -> None:
        xmin, xmax, xip = text.split(":")
        self.xmin, self.xmax = int(xmin), int(xmax)
        self.xip = {int(x) for x in xip.split(",") if x}

    def sees(self, xid: int) -> bool:
        """Whether the snapshot sees (committed) transaction `xid` (32 bits, as pgoutput sends it)."""
        d = (xid - self.xmax) & 0xFFFFFFFF
        full = self.xmax + (d - (1 << 32) if d >= 1 << 31 else d)
        return full < self.xmin or (full < self.xmax and full not in self.xip)
