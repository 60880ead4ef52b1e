"""The run's one read of the binlog, routed to every streamed table (issue 45).

A run's streamed tables all read the binlog up to the same end, each from its own committed position. Planning tells
them so (`route`): the first of them to read scans the binlog once, from the lowest of their positions to the end
(`binlog.scan`), and spools each table's part (its row events grouped by transaction, the DDL statements naming it)
to a file of its own under the run's local staging directory (`builtin/sources/spool.py`, shared with postgres_cdc).
Every table then reads its own spool and keeps, as before, only the transactions committing in its own (low, end]:
column checks, DDL (which fails only the table it names), chunk filtering and key updates stay in `binlog.changes`
and the extractor. Crash points `mysql_cdc.decode_midway` (at the N-th transaction routed) and
`mysql_cdc.spool_read` (after the N-th table's spool) let a test kill the run there; nothing here moves a position.
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Iterator
from pathlib import Path

from gobblin_py import crashpoints
from gobblin_py.api import WorkUnit
from gobblin_py.builtin.sources.mysql_cdc import binlog
from gobblin_py.builtin.sources.mysql_cdc.settings import MysqlCdcSettings
from gobblin_py.builtin.sources.mysql_cdc.split import MysqlCdcSplit
from gobblin_py.builtin.sources.spool import TableSpools


def route(units: list[WorkUnit], end: int) -> list[WorkUnit]:
    """The stream units with changes to read up to the run's end told the run's tables one read serves and the lowest
    of their positions; each weighed (`read_bytes`) at its share of the binlog, which is read once."""
    splits = [MysqlCdcSplit.of(u) for u in units]
    streams = {p.table: p for p in splits if p.chunk is None and p.end == end and p.low < end}
    if len(streams) < 2:
        return units
    low = min(p.low for p in streams.values())
    share = max(p.read_bytes for p in streams.values()) // len(streams)
    tables = sorted(streams)
    return [dataclasses.replace(u, split=p.model_copy(update={"routed": tables, "decode_low": low,
                                                              "read_bytes": share}).packed())
            if p.chunk is None and p.table in streams else u for u, p in zip(units, splits)]


class RoutedDecode:
    """The run's one read of the binlog over (low, end] for `tables`, spooled per table under `root`."""

    def __init__(self, root: Path, s: MysqlCdcSettings, tables: list[str], low: int, end: int, base: str,
                 width: int) -> None:
        self.settings, self.low, self.end, self.base, self.width = s, low, end, base, width
        self.spools = TableSpools(root, "mysql_cdc", [s.endpoint, base, str(width), str(low), str(end)], tables)

    def parts(self, table: str) -> Iterator[binlog.Rows | binlog.Statement]:
        """`table`'s row events and DDL of the range, reading the binlog first when no whole spool is there."""
        for data in self.spools.read(table, self._decode, "mysql_cdc.spool_read"):
            yield pickle.loads(data)

    def _decode(self) -> None:
        spools = self.spools
        spools.start()
        for part in binlog.scan(self.settings, spools.tables, self.low, self.end, self.base, self.width,
                                committed=lambda: crashpoints.crash_point("mysql_cdc.decode_midway")):
            spools.append(spools.buffers[part.table], pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL))
        spools.finish()
