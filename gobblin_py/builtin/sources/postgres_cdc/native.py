"""A snapshot's rows as Arrow through ADBC's PostgreSQL driver (COPY in binary), in the very snapshot the extractor's
psycopg transaction took: that transaction exports it (`pg_export_snapshot()`) and the ADBC connection imports it
(`SET TRANSACTION SNAPSHOT`), so the visibility rule that hands over to the slot's changes holds for the rows read
here exactly as for rows read through psycopg. About twenty times the rows per second of psycopg's row cursor."""

from __future__ import annotations

import importlib.util
import re
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
    try:
        with dbapi.connect(info) as native, native.cursor() as cur:
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cur.execute(f"SET TRANSACTION SNAPSHOT '{snapshot_id}'")
            cur.execute(query)
            yield from rebatch(iter(cur.fetch_record_batch()), rows)
    except (dbapi.Error, OSError) as exc:
        text = str(exc).replace(password, "***") if password else str(exc)
        raise SourceError(f"{s.endpoint}, table {table}: reading the snapshot through ADBC failed: "
                          f"{text.strip().splitlines()[0] if text.strip() else type(exc).__name__}") from None
