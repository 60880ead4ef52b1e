"""A table's snapshot in primary-key chunks, each exact at a binlog position of its own (the Flink CDC MySQL
algorithm), so no long transaction and no lock is held, and chunks run as tasks of their own.

Planning (`boundaries`): chunk i holds the keys in (its low key, its high key]; the first is open below, the last
open above, so every key is in exactly one chunk whenever it was inserted. A boundary is the `chunk_rows`-th key after
the previous one; a key that is not all integers gives one chunk (MySQL orders strings by their collation, which
Python's order, used to route a change to its chunk, does not follow).

Reading one chunk (`read_chunk`): `low` = the binlog position of a consistent snapshot (MariaDB's
`binlog_snapshot_position`, exact for the transaction's read view; on MySQL, `SHOW MASTER STATUS` just before it);
one SELECT of the chunk's rows in that short read-only transaction; `high` = the binlog's end after it. The table's
changes in `(low, high]` whose key is in the chunk are applied to its rows (inserts and updates by key, deletes, a
key update as both): the chunk as it was at `high`. Its rows are emitted as `_op: read` at position `high`, and the
stream afterwards keeps a change of a key in that chunk only when its transaction commits after `high`
(`Chunks.after`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote as url_quote

from gobblin_py.builtin.sources.mysql_cdc import binlog, position
from gobblin_py.builtin.sources.mysql_cdc.settings import MysqlCdcSettings, query
from gobblin_py.errors import scrub

log = logging.getLogger(__name__)

Key = tuple[Any, ...]


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


@dataclass
class Chunks:
    """The chunks read: each one's key range and the position its rows are as of."""

    ranges: list[tuple[Key | None, Key | None, int]] = field(default_factory=list)

    @classmethod
    def of(cls, kept: list[tuple[list[Any] | None, list[Any] | None, int]]) -> Chunks:
        return cls([(tuple(lo) if lo is not None else None, tuple(hi) if hi is not None else None, int(at))
                    for lo, hi, at in kept])

    def high(self, key: Key) -> int:
        """The position the chunk holding `key` was read at."""
        for lo, hi, at in self.ranges:
            if (lo is None or key > lo) and (hi is None or key <= hi):
                return at
        raise AssertionError(f"key {key} is in no chunk")  # the chunks cover every key

    def after(self, key: Key, pos: int) -> bool:
        """Whether a change of `key` at `pos` is after the snapshot of its chunk (and so belongs to the stream)."""
        return pos > self.high(key)


def _where(key: list[str], lo: Key | None, hi: Key | None) -> tuple[str, list[Any]]:
    keys = ", ".join(quote(k) for k in key)
    marks = ", ".join(["%s"] * len(key))
    parts, args = [], []
    if lo is not None:
        parts.append(f"({keys}) > ({marks})")
        args += list(lo)
    if hi is not None:
        parts.append(f"({keys}) <= ({marks})")
        args += list(hi)
    return (" WHERE " + " AND ".join(parts)) if parts else "", args


def boundaries(s: MysqlCdcSettings, conn: Any, database: str, table: str, key: list[str], after: Key | None,
               count: int) -> list[Key | None]:
    """The high keys of up to `count` chunks after key `after` (None: the table's start); None ends the list: that
    chunk is open above, the last."""
    keys = ", ".join(quote(k) for k in key)
    out: list[Key | None] = []
    lo = after
    while len(out) < count:
        where, args = _where(key, lo, None)
        rows = query(conn, f"SELECT {keys} FROM {quote(database)}.{quote(table)}{where} ORDER BY {keys} "
                           f"LIMIT 1 OFFSET {s.snapshot.chunk_rows - 1}", args)
        if not rows:
            out.append(None)
            break
        lo = tuple(rows[0])
        out.append(lo)
    return out


def _snapshot_position(conn: Any) -> position.Position | None:
    """MariaDB's binlog position of the current consistent snapshot; None where the server has none (MySQL)."""
    found = {str(k).lower(): v for k, v in query(conn, "SHOW STATUS LIKE 'binlog_snapshot_%'")}  # `Binlog_snapshot_file`
    if found.get("binlog_snapshot_file"):
        return position.parse(str(found["binlog_snapshot_file"]), int(found["binlog_snapshot_position"]))
    return None


def _select(database: str, table: str, columns: list[str], key: list[str], lo: Key | None, hi: Key | None,
            floats: frozenset[str]) -> tuple[str, list[Any]]:
    """The chunk's SELECT, in key order (FLOAT columns as DOUBLE, see `read_chunk`)."""
    where, args = _where(key, lo, hi)
    keys = ", ".join(quote(k) for k in key)
    select = ", ".join(f"CAST({quote(c)} AS DOUBLE) AS {quote(c)}" if c in floats else quote(c) for c in columns)
    return f"SELECT {select} FROM {quote(database)}.{quote(table)}{where} ORDER BY {keys}", args


def read_chunk_native(s: MysqlCdcSettings, conn: Any, database: str, table: str, columns: list[str], key: list[str],
                      lo: Key | None, hi: Key | None, floats: frozenset[str] = frozenset()) -> tuple[int, Any] | None:
    """(high, the chunk's rows as of high as one Arrow table in key order) read by ConnectorX (Rust, the binary
    protocol: PyMySQL's row parse was ~90 % of a chunk's task), or None where the rows path must read it: a server
    without MariaDB's `binlog_snapshot_position` (MySQL), ConnectorX not installed, or a change of the chunk's keys
    (or a truncate) in its window.

    Exact as `read_chunk`: `low` is taken in a consistent snapshot of `conn` (every transaction in the binlog up to it
    is visible there), which ends before ConnectorX's SELECT starts on its own connection, so its view holds at least
    those; `high` is taken after the SELECT ends, and the binlog is written before a commit becomes visible, so every
    transaction the view holds ends by `high`. With no change of the chunk's keys in (low, high], the rows the SELECT
    saw are the chunk as of `high`; with one, the rows path reads the chunk again."""
    import importlib.util

    if importlib.util.find_spec("connectorx") is None:
        return None
    import connectorx

    sql, args = _select(database, table, columns, key, lo, hi, floats)
    try:
        with conn.cursor() as cur:
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
            low = _snapshot_position(conn)
            text = cur.mogrify(sql, args)  # PyMySQL's own quoting: ConnectorX takes no parameters
    finally:
        conn.rollback()
    if low is None:
        return None
    given = s.connection_args()
    url = (f"mysql://{url_quote(given['user'], safe='')}:{url_quote(given['password'], safe='')}@{given['host']}:"
           f"{given['port']}/{url_quote(database, safe='')}")
    try:
        arrow = connectorx.read_sql(url, text, return_type="arrow", pre_execution_query=["SET time_zone = '+00:00'"])
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - ConnectorX's errors and Rust panics: the rows path reads the chunk
        log.info("%s.%s: chunk (%s, %s] read by rows: ConnectorX: %s", database, table, lo, hi,
                 scrub(str(exc), given["password"])[:300])
        return None
    high = position.current(conn)
    for c in binlog.read(s, database, table, columns, low.value(), high.value(), high.base, high.width):
        if c.op == "truncate":
            return None
        for image in (c.before, c.after):
            if image is not None:
                k = tuple(image[n] for n in key)
                if (lo is None or k > lo) and (hi is None or k <= hi):
                    return None
    log.info("%s.%s: chunk (%s, %s]: %d row(s) at %s by ConnectorX", database, table, lo, hi, arrow.num_rows, high)
    return high.value(), arrow


def read_chunk(s: MysqlCdcSettings, conn: Any, database: str, table: str, columns: list[str], key: list[str],
               lo: Key | None, hi: Key | None, floats: frozenset[str] = frozenset()) -> tuple[int, list[dict[str, Any]]]:
    """(high, the chunk's rows as of high, in key order). `floats`: FLOAT columns, selected as DOUBLE: the text
    protocol prints a FLOAT to 6 digits, which is not the stored value (the binlog's, which the stream reads)."""
    sql, args = _select(database, table, columns, key, lo, hi, floats)
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
    by_key = {tuple(r[k] for k in key): r for r in rows}
    applied = 0
    for c in binlog.read(s, database, table, columns, low.value(), high.value(), high.base, high.width):
        applied += 1
        if c.op == "truncate":
            by_key.clear()
            continue
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
    log.info("%s.%s: chunk (%s, %s]: %d row(s) at %s, %d change(s) applied from %s", database, table, lo, hi,
             len(by_key), high, applied, low)
    try:
        ordered = [by_key[k] for k in sorted(by_key)]
    except TypeError:  # a key Python cannot order (NULL never is one: a primary key); keep the server's order
        ordered = list(by_key.values())
    return high.value(), ordered
