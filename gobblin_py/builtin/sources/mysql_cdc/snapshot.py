"""A table's snapshot in primary-key chunks, each exact at a binlog position of its own (the Flink CDC MySQL
algorithm), so no long transaction and no lock is held.

For each chunk: `low` = the binlog position of a consistent snapshot (MariaDB's `binlog_snapshot_position`, exact
for the transaction's read view; on MySQL, `SHOW MASTER STATUS` just before it); one SELECT of the next
`chunk_rows` rows by key in that short transaction; `high` = the binlog's end after it. The table's changes in
`(low, high]` whose key falls in the chunk's key range are applied to its rows (inserts and updates by key, deletes,
a key update as both): the chunk as it was at `high`. Its rows are emitted as `_op: read` at position `high`, and
the stream afterwards keeps a change of a key in that chunk only when its transaction commits after `high`
(`Chunks.after`). A chunk's range is (the previous chunk's last key, its own last key]; the last one is open above,
so every key is in exactly one chunk. A key that is not all integers is read as one chunk (MySQL orders strings by
their collation, which Python's order does not follow)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from gobblin_py.builtin.sources.mysql_cdc import binlog, position
from gobblin_py.builtin.sources.mysql_cdc.settings import MysqlCdcSettings, query

log = logging.getLogger(__name__)


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


@dataclass
class Chunks:
    """The chunks read: each one's key range and the position its rows are as of."""

    ranges: list[tuple[tuple[Any, ...] | None, tuple[Any, ...] | None, int]] = field(default_factory=list)

    def high(self, key: tuple[Any, ...]) -> int:
        """The position the chunk holding `key` was read at."""
        for lo, hi, at in self.ranges:
            if (lo is None or key > lo) and (hi is None or key <= hi):
                return at
        raise AssertionError(f"key {key} is in no chunk")  # the last chunk is open above

    def after(self, key: tuple[Any, ...], pos: int) -> bool:
        """Whether a change of `key` at `pos` is after the snapshot of its chunk (and so belongs to the stream)."""
        return pos > self.high(key)


def _snapshot_position(conn: Any) -> position.Position | None:
    """MariaDB's binlog position of the current consistent snapshot; None where the server has none (MySQL)."""
    found = dict(query(conn, "SHOW STATUS LIKE 'binlog_snapshot_%'"))
    if "binlog_snapshot_file" in found and found.get("binlog_snapshot_file"):
        return position.parse(str(found["binlog_snapshot_file"]), int(found["binlog_snapshot_position"]))
    return None


def read_chunks(s: MysqlCdcSettings, conn: Any, database: str, table: str, columns: list[str], key: list[str],
                chunked: bool, chunks: Chunks) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """(high, rows as of high) for each chunk of the table in key order; `chunks` fills as they are read."""
    cols = ", ".join(quote(c) for c in columns)
    keys = ", ".join(quote(k) for k in key)
    name = f"{quote(database)}.{quote(table)}"
    lo: tuple[Any, ...] | None = None
    limit = s.snapshot.chunk_rows if chunked else None
    while True:
        where, args = "", []
        if lo is not None:
            where = f" WHERE ({keys}) > ({', '.join(['%s'] * len(key))})"
            args = list(lo)
        sql = f"SELECT {cols} FROM {name}{where} ORDER BY {keys}" + (f" LIMIT {limit}" if limit else "")
        before = position.current(conn)
        try:
            with conn.cursor() as cur:
                cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
                low = _snapshot_position(conn) or before
                cur.execute(sql, args)
                rows = [dict(zip(columns, r)) for r in cur.fetchall()]
        finally:
            conn.rollback()
        high = position.current(conn)
        last = limit is None or len(rows) < limit
        hi = None if last else tuple(rows[-1][k] for k in key)
        by_key = {tuple(r[k] for k in key): r for r in rows}
        applied = 0
        for c in binlog.read(s, database, table, columns, low.value(), high.value(), high.base, high.width):
            applied += 1
            for image, keep in ((c.before, False), (c.after, True)):
                if image is None:
                    continue
                k = tuple(image[n] for n in key)
                if (lo is not None and k <= lo) or (hi is not None and k > hi):
                    continue
                if keep:
                    by_key[k] = image
                elif c.after is None or tuple(c.after[n] for n in key) != k:
                    by_key.pop(k, None)
            if c.op == "truncate":
                by_key.clear()
        chunks.ranges.append((lo, hi, high.value()))
        log.info("%s.%s: chunk after %s: %d row(s) at %s, %d change(s) applied from %s", database, table, lo, len(by_key),
                 high, applied, low)
        yield high.value(), [by_key[k] for k in sorted(by_key)] if chunked else list(by_key.values())
        if last:
            return
        lo = hi
