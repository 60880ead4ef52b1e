"""Reads one chunk of a chunked snapshot (`chunks.py`): its key range in a short REPEATABLE READ transaction of its own,
through ADBC in that transaction's exported snapshot on the columnar path, else by psycopg's row cursor. Returns the
transaction's `pg_current_snapshot()`, which the chunk's commit keeps: the stream's filter judges changes by it."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from gobblin_py.builtin.sources.postgres_cdc import native
from gobblin_py.builtin.sources.postgres_cdc.chunks import range_condition
from gobblin_py.builtin.sources.postgres_cdc.columns import checked_primary
from gobblin_py.builtin.sources.postgres_cdc.settings import PostgresCdcSettings
from gobblin_py.builtin.sources.postgres_cdc.split import CdcSplit

log = logging.getLogger(__name__)


def read_chunk(s: PostgresCdcSettings, conn: Any, split: CdcSplit, arrow: bool,
               cursor_name: str) -> Iterator[tuple[str, Any]]:
    """("arrow", a record batch) or ("rows", a list of row tuples) of the chunk's rows, in the order its scan gives
    them (not always key order: nothing depends on it, as every key is in one chunk once); returns the snapshot's
    text. `conn` (autocommit) is left in autocommit."""
    import psycopg
    from psycopg import sql

    chunk = split.chunk
    assert chunk is not None
    conn.autocommit = False
    conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    conn.read_only = True
    try:
        seen, exported = conn.execute("SELECT pg_current_snapshot()::text, pg_export_snapshot()").fetchone()
        checked_primary(conn, split)  # the key as this snapshot sees it: the one its rows are ranged by
        columns = sql.SQL(", ").join(sql.SQL("{}::{}").format(sql.Identifier(c), sql.SQL(split.casts[c]))
                                     if c in split.casts else sql.Identifier(c) for c in split.columns)
        query = sql.SQL("SELECT {} FROM {} WHERE {}").format(columns, sql.Identifier(split.schema_name, split.table_name),
                                                             range_condition(chunk["key"], chunk["low"], chunk["high"]))
        n = 0
        if arrow:
            for batch in native.snapshot_batches(s, exported, query.as_string(conn), s.fetch_rows, split.table):
                yield "arrow", batch
                n += batch.num_rows
        else:
            with conn.cursor(name=cursor_name) as cur:
                cur.itersize = s.fetch_rows
                cur.execute(query)
                while rows := cur.fetchmany(s.fetch_rows):
                    yield "rows", rows
                    n += len(rows)
        log.info("%s: chunk %d read, %d row(s), snapshot %s", split.table, chunk["index"], n, seen)
        return str(seen)
    finally:
        if not conn.closed:
            conn.rollback()
            conn.autocommit, conn.read_only = True, False
            conn.isolation_level = None
