"""PostgreSQL for the jdbc source, through psycopg 3: connect with `statement_timeout`, pg_catalog columns, the SQL
(`percentile_disc` for the split), and rows streamed in binary format through a named server-side cursor; or, as
the native reader, the ADBC PostgreSQL driver's `COPY … (FORMAT binary)` decoded straight into Arrow in C."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator, Mapping
from typing import Any

from gobblin_py.builtin.sources.jdbc.bounds import Bound, time_bound
from gobblin_py.builtin.sources.jdbc.columns import WATERMARK_KINDS, Column, read_columns
from gobblin_py.builtin.sources.jdbc.dialect import (
    ConnectFailure,
    ConnectionSettings,
    Dialect,
    Failure,
    NativeReadError,
    TableQueries,
    TableQuerySettings,
    failure_by_words,
    first_line,
    inner_bounds,
    read_password,
    scrub,
)
from gobblin_py.builtin.sources.jdbc.ranges import Range, WatermarkKind
from gobblin_py.errors import ConfigError

SAMPLE_ABOVE = 1_000_000
"""A range of more rows than this is split at the quantiles of a sample (`split`)."""
SAMPLE_ROWS = 100_000
"""About how many of the range's rows the sample holds."""


class PostgresDialect(Dialect):
    """PostgreSQL 12+ (psycopg 3)."""

    name = "PostgreSQL"
    default_port = 5432
    driver = "psycopg"
    install = "the jdbc source needs psycopg 3: pip install 'gobblin-py[jdbc]'"
    table_hint = "schema-qualified (public.orders)"
    watermark_types = "a timestamp, timestamptz, date or integer column"

    def open(self, driver: Any, s: ConnectionSettings, password: str | None) -> Any:
        return driver.connect(s.url, password=password, connect_timeout=s.connect_timeout_s, autocommit=True,
                              application_name="gobblin-py", options=f"-c statement_timeout={s.statement_timeout}")

    def connect_failure(self, exc: Exception, text: str) -> ConnectFailure:
        if "password authentication failed" in text or getattr(exc, "sqlstate", None) in ("28P01", "28000"):
            return ConnectFailure.AUTH
        if "does not exist" in text and "database" in text:
            return ConnectFailure.NO_DATABASE
        if "statement_timeout" in text:
            return ConnectFailure.BAD_TIMEOUT
        return ConnectFailure.UNREACHABLE

    def resolve_table(self, conn: Any, table: str) -> tuple[str, str, list[Column]] | None:
        row = conn.execute("SELECT c.oid, n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                           "WHERE c.oid = to_regclass(%s)", (table,)).fetchone()
        if row is None:
            return None
        oid, schema_name, table_name = row
        return schema_name, table_name, read_columns(conn, oid)

    def identity(self, conn: Any, schema_name: str, table_name: str) -> dict[str, Any]:
        """The cluster's system identifier (where the user may read it) and the table's relation oid."""
        system, oid = conn.execute(
            "SELECT CASE WHEN has_function_privilege('pg_control_system()', 'EXECUTE') THEN (SELECT "
            "system_identifier::text FROM pg_control_system()) END, (SELECT c.oid::bigint FROM pg_class c JOIN pg_namespace "
            "n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s)", (schema_name, table_name)).fetchone()
        return {k: v for k, v in (("system", system), ("oid", oid)) if v is not None}

    def watermark_kind(self, column: Column) -> str | None:
        return None if column.declared.endswith("[]") else WATERMARK_KINDS.get(column.type_name)

    def queries(self, t: TableQuerySettings, schema_name: str, table_name: str, columns: list[str], kind: str, label: str,
                casts: Mapping[str, str] | None = None, watermark_not_null: bool = False) -> TableQueries:
        return PostgresQueries(t, schema_name, table_name, columns, kind, label, casts, watermark_not_null)

    def stream(self, conn: Any, query: Any, params: list[Any], fetch_rows: int, name: str,
               columns: list[str], casts: Mapping[str, str]) -> Iterator[list[tuple[Any, ...]]]:
        conn.autocommit = False  # a server-side cursor lives in a transaction
        # binary rows: psycopg's C loaders take ints, timestamps and numerics without parsing text (as COPY BINARY)
        with conn.cursor(name=name, binary=True) as cur:
            cur.itersize = fetch_rows
            cur.execute(query, params)
            while True:
                batch = cur.fetchmany(fetch_rows)
                if not batch:
                    return
                yield batch

    native_install = "reader native needs the ADBC PostgreSQL driver: pip install 'gobblin-py[jdbc]'"
    native_modules = ("adbc_driver_postgresql.dbapi", "psycopg.conninfo")

    def native_reader_installed(self) -> bool:
        return importlib.util.find_spec("adbc_driver_postgresql") is not None

    def read_arrow(self, conn: Any, s: ConnectionSettings, query: Any, params: list[Any]) -> Iterator[Any]:
        import psycopg
        from adbc_driver_postgresql import dbapi
        from psycopg.conninfo import make_conninfo

        # the parameters rendered as literals by psycopg's own quoting: ADBC reads a query without parameters by COPY
        text = psycopg.ClientCursor(conn).mogrify(query, params)
        password = read_password(s)
        info = make_conninfo(s.url, password=password, connect_timeout=s.connect_timeout_s,
                             application_name="gobblin-py", options=f"-c statement_timeout={s.statement_timeout}")
        try:
            with dbapi.connect(info) as native, native.cursor() as cur:
                cur.execute(text)
                reader = cur.fetch_record_batch()
                while True:
                    try:
                        batch = reader.read_next_batch()
                    except StopIteration:
                        return
                    except OSError as exc:  # the stream's error: libpq's message, without its SQLSTATE
                        raise _stream_error(str(exc)) from None
                    yield batch
        except dbapi.Error as exc:  # connecting or starting the COPY: by its SQLSTATE, the password cut out
            raise NativeReadError(_adbc_failure(exc), scrub(first_line(str(exc)), password)) from None

    def failure(self, exc: BaseException) -> Failure | None:
        import psycopg

        if isinstance(exc, psycopg.errors.QueryCanceled):
            return Failure.TIMEOUT
        if isinstance(exc, (psycopg.errors.UndefinedColumn, psycopg.errors.UndefinedTable)):
            return Failure.UNKNOWN_COLUMN
        if isinstance(exc, psycopg.OperationalError):
            return Failure.CONNECTION_LOST
        if isinstance(exc, psycopg.DataError):
            return Failure.BAD_VALUE
        if isinstance(exc, psycopg.Error):
            return Failure.OTHER
        return None

    def close(self, conn: Any) -> None:
        import psycopg

        try:
            if not conn.closed and not conn.autocommit:
                conn.rollback()  # the read's transaction: ends the server-side cursor
        except psycopg.Error:
            pass  # the connection is lost: closing it is all there is left to do
        conn.close()


STREAM_FAILURES = (("canceling statement due to statement timeout", Failure.TIMEOUT),
                   ("does not exist", Failure.UNKNOWN_COLUMN),
                   ("terminating connection", Failure.CONNECTION_LOST),
                   ("server closed the connection", Failure.CONNECTION_LOST),
                   ("connection", Failure.CONNECTION_LOST),
                   ("out of range", Failure.BAD_VALUE),
                   ("invalid input", Failure.BAD_VALUE))
"""libpq's words for each failure, in an ADBC stream's error."""


def _stream_error(text: str) -> NativeReadError:
    """An ADBC stream's error as a NativeReadError, its message without libpq's prefixes."""
    message = text.removeprefix("[libpq] ").replace("Execution error [PGRES_FATAL_ERROR]: ", "").replace("ERROR:  ", "")
    return NativeReadError(failure_by_words(text, STREAM_FAILURES), message.strip())


def _adbc_failure(exc: Any) -> Failure:
    """What an ADBC driver error means, by its SQLSTATE (or, without one, its status: IO is a lost connection)."""
    from adbc_driver_manager import AdbcStatusCode

    state = getattr(exc, "sqlstate", None) or ""
    if state == "57014":
        return Failure.TIMEOUT
    if state in ("42703", "42P01"):
        return Failure.UNKNOWN_COLUMN
    if state.startswith("08") or state.startswith("57P") or exc.status_code == AdbcStatusCode.IO:
        return Failure.CONNECTION_LOST
    if state.startswith("22"):
        return Failure.BAD_VALUE
    return Failure.OTHER


class PostgresQueries(TableQueries):
    """The SQL of one PostgreSQL table (psycopg.sql composition)."""

    def __init__(self, t: TableQuerySettings, schema_name: str, table_name: str, columns: list[str], kind: str, label: str,
                 casts: Mapping[str, str] | None = None, watermark_not_null: bool = False) -> None:
        from psycopg import sql

        self.sql = sql
        self.settings, self.columns, self.kind, self.label = t, columns, kind, label
        self.not_null = watermark_not_null
        self.casts = dict(casts or {})  # column → `text` or `text[]`: selected as their exact text, in any row format
        self.table = sql.Identifier(schema_name, table_name)
        self.wm = sql.Identifier(t.watermark_column)
        where = t.where.replace("%", "%%") if t.where else None  # a literal % (LIKE 'a%') is no placeholder
        self.where = sql.SQL(" AND ({})").format(sql.SQL(where)) if where else sql.SQL("")
        self.finite = sql.SQL("{wm} > '-infinity' AND {wm} < 'infinity'").format(wm=self.wm)  # time kinds only

    def upper_bound(self, conn: Any, s: ConnectionSettings) -> Bound:
        t, kind = self.settings, self.kind
        lag = t.watermark_lag
        if kind == WatermarkKind.INTEGER:
            if not isinstance(lag, int):
                raise ConfigError(f"{self.label}: watermark_lag {lag!r} must be a whole number for the "
                                  f"integer column {t.watermark_column}")
            if t.watermark_zone is not None:
                raise ConfigError(f"{self.label}: watermark_zone is for time columns; {t.watermark_column} is an integer "
                                  "(remove watermark_zone)")
            newest = self.newest(conn)
            return Bound(None if newest is None else newest - lag)
        interval = f"{lag} seconds" if isinstance(lag, (int, float)) else lag
        import psycopg

        try:
            lag_td = conn.execute("SELECT %s::interval", (interval,)).fetchone()[0]
        except psycopg.errors.DataError:
            raise ConfigError(f"{self.label}: watermark_lag {lag!r} is not a duration: give seconds (300) or "
                              "a PostgreSQL interval ('5 minutes')") from None
        now_utc, server_wall = conn.execute("SELECT now(), localtimestamp").fetchone()
        return time_bound(kind, kind == WatermarkKind.TIMESTAMPTZ, now_utc, server_wall,
                          self.newest(conn), lag_td, t.watermark_zone, self.label, t.watermark_column)

    def newest(self, conn: Any) -> Any:
        """The newest finite value: ±infinity is in no range (counted by count_infinite), and Python has no such datetime."""
        finite = self.finite if self.kind != WatermarkKind.INTEGER else self.sql.SQL("TRUE")
        query = self.sql.SQL("SELECT max({wm}) FROM {t} WHERE {finite}{where}").format(
            wm=self.wm, t=self.table, finite=finite, where=self.where)
        return conn.execute(query, []).fetchone()[0]  # params given: `%%` in where is read as `%`

    def count_range(self, conn: Any, r: Range) -> int:
        cond, params = self.range_condition(r)
        return int(conn.execute(self.sql.SQL("SELECT count(*) FROM {t} WHERE {cond}{where}").format(
            t=self.table, cond=cond, where=self.where), params).fetchone()[0])

    def range_condition(self, r: Range) -> tuple[Any, list[Any]]:
        """`(lo, hi]` of the watermark column; a range from the start also holds the rows without a watermark (never
        those at -infinity: like +infinity, in no range). Of a NOT NULL column, without the `IS NULL` arm: the same
        rows, and the condition stays an index range (with the arm, PostgreSQL 16 filters the whole index or table:
        the first of a 2M-row first load's four sub-ranges took 0.62 s of the server's time, the others 0.19 s)."""
        sql = self.sql
        if r.lo is None:
            finite = self.finite if self.kind != WatermarkKind.INTEGER else sql.SQL("TRUE")
            if self.not_null:
                return sql.SQL("({finite} AND {wm} <= %s)").format(finite=finite, wm=self.wm), [r.hi]
            return sql.SQL("(({finite} AND {wm} <= %s) OR {wm} IS NULL)").format(finite=finite, wm=self.wm), [r.hi]
        return sql.SQL("{wm} > %s AND {wm} <= %s").format(wm=self.wm), [r.lo, r.hi]

    def split(self, conn: Any, r: Range, parts: int) -> tuple[int, list[Any]]:
        """percentile_disc over the range: the boundaries follow the column's distribution. Past SAMPLE_ABOVE rows, over
        a repeatable sample of the table's pages (about SAMPLE_ROWS rows): sorting every value took 3 s of a 10M-row
        first load, and the boundaries only balance the tasks. A range from the start (a first load) of a table the
        catalog already counts past SAMPLE_ABOVE rows is sampled first, and when the sample puts more than SAMPLE_ABOVE
        in it, its estimate stands in for the count (a scan of the range: 0.19 s of a 2M-row first load's planning);
        otherwise the range is counted exactly, and a range counted empty is not read. An incremental range is counted
        first: its count is an index range, cheaper than the sample (0.01 s against 0.04 s at 20,000 of 2M rows)."""
        sql = self.sql
        cond, params = self.range_condition(r)
        fractions = [k / parts for k in range(1, parts)]
        if fractions:
            size = self.table_size(conn) if r.lo is None else None
            known = size[1] if size is not None else 0.0  # pg_class.reltuples: -1 before the first VACUUM/ANALYZE
            sampled = r.lo is None and known > SAMPLE_ABOVE and self._sampleable(conn)
            if sampled:
                estimate, bounds = self._sample(conn, r, fractions, 100.0 * SAMPLE_ROWS / known)
                if estimate > SAMPLE_ABOVE and bounds:
                    return estimate, bounds
            rows = self.count_range(conn, r)
            if rows > SAMPLE_ABOVE and (sampled or self._sampleable(conn)):
                _, bounds = self._sample(conn, r, fractions, 100.0 * SAMPLE_ROWS / rows)
                if bounds:
                    return rows, bounds
        query = sql.SQL("SELECT count(*), percentile_disc(%s::float8[]) WITHIN GROUP (ORDER BY {wm}) FROM {t} "
                        "WHERE {cond}{where}").format(wm=self.wm, t=self.table, cond=cond, where=self.where)
        rows, quantiles = conn.execute(query, [fractions or [0.5], *params]).fetchone()
        return int(rows), inner_bounds(r, quantiles if fractions else [])

    def _sample(self, conn: Any, r: Range, fractions: list[float], percent: float) -> tuple[int, list[Any]]:
        """The range's rows estimated from a repeatable sample of `percent` of the table's pages, and the inner
        boundaries at the sample's quantiles (none when the sample holds no row of the range)."""
        cond, params = self.range_condition(r)
        percent = min(100.0, percent)
        query = self.sql.SQL("SELECT count(*), percentile_disc(%s::float8[]) WITHIN GROUP (ORDER BY {wm}) FROM {t} "
                             "TABLESAMPLE SYSTEM (%s::real) REPEATABLE (0) WHERE {cond}{where}").format(
            wm=self.wm, t=self.table, cond=cond, where=self.where)
        seen, quantiles = conn.execute(query, [fractions, percent, *params]).fetchone()
        return round(seen * 100.0 / percent), inner_bounds(r, quantiles) if seen else []

    def _sampleable(self, conn: Any) -> bool:
        """Whether TABLESAMPLE applies: a plain table or a materialized view (not a view)."""
        row = conn.execute(self.sql.SQL("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)"),
                           [self.table.as_string(conn)]).fetchone()
        return row is not None and row[0] in ("r", "m")

    def count_nulls(self, conn: Any) -> int:
        query = self.sql.SQL("SELECT count(*) FROM {} WHERE {} IS NULL{}").format(self.table, self.wm, self.where)
        return int(conn.execute(query, []).fetchone()[0])  # params given: `%%` in where is read as `%`

    def count_infinite(self, conn: Any) -> int:
        if self.kind == WatermarkKind.INTEGER:
            return 0
        query = self.sql.SQL("SELECT count(*) FROM {t} WHERE ({wm} = 'infinity' OR {wm} = '-infinity'){where}").format(
            t=self.table, wm=self.wm, where=self.where)
        return int(conn.execute(query, []).fetchone()[0])  # params given: `%%` in where is read as `%`

    def table_size(self, conn: Any) -> tuple[float, float] | None:
        """pg_table_size (heap and TOAST, no indexes) and pg_class.reltuples (-1 before the first VACUUM/ANALYZE)."""
        query = self.sql.SQL("SELECT pg_table_size(c.oid)::float8, c.reltuples::float8 FROM pg_class c "
                             "WHERE c.oid = to_regclass(%s)")
        row = conn.execute(query, [self.table.as_string(conn)]).fetchone()
        return (row[0], row[1]) if row is not None and row[0] is not None else None

    def select(self, r: Range) -> tuple[Any, list[Any]]:
        sql, t = self.sql, self.settings
        cond, params = self.range_condition(r)
        columns = sql.SQL(", ").join(sql.SQL("{c}::{t}").format(c=sql.Identifier(c), t=sql.SQL(self.casts[c]))
                                     if c in self.casts else sql.Identifier(c) for c in self.columns)
        order = sql.SQL(", ").join(sql.Identifier(c) for c in [t.watermark_column, *t.key_columns])
        return sql.SQL("SELECT {cols} FROM {t} WHERE {cond}{where} ORDER BY {order}").format(
            cols=columns, t=self.table, cond=cond, where=self.where, order=order), params

