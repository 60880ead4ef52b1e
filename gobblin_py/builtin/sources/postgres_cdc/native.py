"""A snapshot's rows as Arrow through ADBC's PostgreSQL driver (COPY in binary), in the very snapshot the extractor's
psycopg transaction took: that transaction exports it (`pg_export_snapshot()`) and the ADBC connection imports it
(`SET TRANSACTION SNAPSHOT`), so the visibility rule that hands over to the slot's changes holds for the rows read
here exactly as for rows read through psycopg. About twenty times the rows per second of psycopg's row cursor.

A connection that read a snapshot whole is rolled back and kept for the next read in this process (`KEEP` in all,
each for `KEEP_S` seconds): ADBC's driver reads the server's whole pg_type when it connects, ~75 ms here,
which a chunked snapshot of 40 chunks paid 40 times (issue 45). A kept connection begins each read with a
transaction of its own; one the server closed meanwhile fails its first statement and is replaced by a new one. A
forked child forgets its parent's."""

from __future__ import annotations

import atexit
import importlib.util
import os
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

from gobblin_py.builtin.schemas.arrow_rows import rebatch
from gobblin_py.builtin.sources.postgres_cdc.settings import PostgresCdcSettings, read_password
from gobblin_py.errors import SourceError

_SNAPSHOT_ID = re.compile(r"[0-9A-F]+-[0-9A-F]+(-[0-9]+)?")


def installed() -> bool:
    """Whether ADBC's PostgreSQL driver and pyarrow can be imported here (the row cursor serves otherwise)."""
    return all(importlib.util.find_spec(m) is not None for m in ("adbc_driver_postgresql", "pyarrow"))


def snapshot_batches(s: PostgresCdcSettings, snapshot_id: str, query: str, rows: int, table: str) -> Iterator[Any]:
    """The rows `query` gives in the exported snapshot `snapshot_id`, as Arrow record batches of `rows` rows (the
    driver's own types). SourceError naming the table, the password cut out, where the driver fails."""
    from adbc_driver_postgresql import dbapi
    from psycopg.conninfo import make_conninfo

    if not _SNAPSHOT_ID.fullmatch(snapshot_id):
        raise SourceError(f"table {table}: {snapshot_id!r} is not a snapshot id pg_export_snapshot() gives")
    password = read_password(s.password_env)
    info = make_conninfo(s.url, password=password, connect_timeout=s.connect_timeout_s, application_name="gobblin-py cdc",
                         options=f"-c statement_timeout={s.statement_timeout}")
    native, whole = None, False
    try:
        native, kept = _take(info), True
        if native is None:
            native, kept = dbapi.connect(info), False
        cur = native.cursor()
        try:
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        except (dbapi.Error, OSError):
            if not kept:
                raise
            _close(native)  # the server closed it while it was kept: a new one
            native = dbapi.connect(info)
            cur = native.cursor()
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        cur.execute(f"SET TRANSACTION SNAPSHOT '{snapshot_id}'")
        cur.execute(query)
        yield from rebatch(iter(cur.fetch_record_batch()), rows)
        cur.close()
        whole = True
    except (dbapi.Error, OSError) as exc:
        text = str(exc).replace(password, "***") if password else str(exc)
        raise SourceError(f"{s.endpoint}, table {table}: reading the snapshot through ADBC failed: "
                          f"{text.strip().splitlines()[0] if text.strip() else type(exc).__name__}") from None
    finally:
        if native is not None and whole:
            _give(info, native)
        elif native is not None:
            _close(native)


KEEP = 4
"""Connections kept between reads, in all (the oldest closed for a newer one): a few, whatever the servers."""
KEEP_S = 60.0
"""A kept connection unused this long is closed when the pool is next touched (or at exit)."""
_kept: dict[str, list[tuple[float, Any]]] = {}
_kept_lock = threading.Lock()


def _take(info: str) -> Any | None:
    """A kept connection to `info` (None: none), closing those kept too long."""
    now, stale, found = time.monotonic(), [], None
    with _kept_lock:
        for conns in _kept.values():
            stale += [c for at, c in conns if now - at >= KEEP_S]
            conns[:] = [(at, c) for at, c in conns if now - at < KEEP_S]
        if _kept.get(info):
            found = _kept[info].pop()[1]
    for c in stale:
        _close(c)
    return found


def _give(info: str, native: Any) -> None:
    """Keeps a connection whose read ended whole, its transaction rolled back; closes it when it cannot."""
    try:
        native.rollback()
    except Exception:  # noqa: BLE001 - a connection that cannot roll back is not kept
        _close(native)
        return
    evicted = None
    with _kept_lock:
        if sum(len(c) for c in _kept.values()) >= KEEP:  # the oldest goes (most likely another server's)
            key = min((k for k in _kept if _kept[k]), key=lambda k: _kept[k][0][0])
            evicted = _kept[key].pop(0)[1]
        _kept.setdefault(info, []).append((time.monotonic(), native))
    if evicted is not None:
        _close(evicted)


def _close(native: Any) -> None:
    try:
        native.close()
    except Exception:  # noqa: BLE001, S110 - closing a broken connection: nothing left to do
        pass


def _forget_kept() -> None:
    """In a forked child: the parent's kept connections are its own (closing one here would end it for the parent)."""
    global _kept_lock
    _kept.clear()
    _kept_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_kept)


@atexit.register
def _close_kept() -> None:
    with _kept_lock:
        conns = [c for kept in _kept.values() for _, c in kept]
        _kept.clear()
    for c in conns:
        _close(c)
