"""MySQL 8 and MariaDB 10.2+ for the jdbc source, through PyMySQL: connect (session in UTC, the statement timeout),
information_schema columns, the SQL (`NTILE(n) OVER (ORDER BY wm)` and the maximum of each tile for the split, as
there is no percentile_disc; a first load's slices of the integer primary key, from its MIN and MAX), and rows streamed through an unbuffered cursor (`SSCursor`), `fetch_rows` at a time; or, as the native reader for a
table of plainly typed columns, ConnectorX's binary-protocol reader straight into Arrow in Rust."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable, Iterator, Mapping
from datetime import timedelta
from typing import Any
from urllib.parse import quote as url_quote
from urllib.parse import unquote, urlsplit

from gobblin_py.builtin.schemas.mysql_columns import CONVERT, native_reads
from gobblin_py.builtin.sources.jdbc.bounds import Bound, as_utc, time_bound
from gobblin_py.builtin.sources.jdbc.columns import Column
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
from gobblin_py.builtin.sources.jdbc.mysql_columns import read_columns, watermark_kind
from gobblin_py.builtin.sources.jdbc.ranges import KeyRange, Range, WatermarkKind
from gobblin_py.errors import ConfigError

ACCESS_DENIED = 1045
UNKNOWN_DATABASE = 1049
UNKNOWN_COLUMN = 1054
UNKNOWN_TABLE = 1146
TIMEOUTS = {1969, 3024}  # MariaDB max_statement_time, MySQL max_execution_time exceeded
INTERRUPTED = 1317
CLIENT_ERRORS = range(2000, 3000)  # CR_*: the connection (refused, gone away, lost)

DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$")
TIMEOUT_UNITS = {"": 0.001, "us": 1e-6, "ms": 0.001, "s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
"""statement_timeout's units, PostgreSQL's: a bare number is milliseconds."""
LAG_UNITS = {"": 1.0, "s": 1.0, "sec": 1.0, "second": 1.0, "seconds": 1.0, "min": 60.0, "minute": 60.0,
             "minutes": 60.0, "h": 3600.0, "hour": 3600.0, "hours": 3600.0, "d": 86400.0, "day": 86400.0,
             "days": 86400.0}
"""watermark_lag's units: a bare number is seconds."""


def seconds(value: str | int | float, units: Mapping[str, float]) -> float | None:
    """A duration in seconds (`300`, `30s`, `5 minutes`); None when it is not one."""
    if isinstance(value, (int, float)):
        return float(value) * (units[""])
    m = DURATION.match(str(value).lower())
    if not m or m.group(2) not in units:
        return None
    return float(m.group(1)) * units[m.group(2)]


def quote(name: str) -> str:
    """A MySQL identifier in backquotes."""
    return "`" + name.replace("`", "``") + "`"


SAMPLE_ABOVE = 1_000_000
"""A range of more rows than this is split at the tiles of a sample (`split`)."""
SAMPLE_ROWS = 100_000
"""About how many of the range's rows the sample holds."""


class MySqlDialect(Dialect):
    """MySQL 8+ (PyMySQL)."""

    name = "MySQL"
    default_port = 3306
    driver = "pymysql"
    install = "the jdbc source needs PyMySQL for MySQL/MariaDB: pip install 'gobblin-py[jdbc]'"
    table_hint = "as orders (in the url's database) or database.orders"
    watermark_types = "a datetime, timestamp, date or integer column"

    def open(self, driver: Any, s: ConnectionSettings, password: str | None) -> Any:
        _timeout_s(s)  # a bad one is refused before connecting
        parts = urlsplit(s.url)
        return driver.connect(host=parts.hostname, port=parts.port or self.default_port,
                              user=unquote(parts.username or ""), password=password or "", database=s.database,
                              connect_timeout=s.connect_timeout_s, autocommit=True, charset="utf8mb4",
                              init_command="SET time_zone = '+00:00'", program_name="gobblin-py")

    def connect_failure(self, exc: Exception, text: str) -> ConnectFailure:
        code = exc.args[0] if exc.args else None
        return {ACCESS_DENIED: ConnectFailure.AUTH, UNKNOWN_DATABASE: ConnectFailure.NO_DATABASE}.get(code, ConnectFailure.UNREACHABLE)

    def prepare(self, conn: Any, s: ConnectionSettings) -> None:
        timeout = _timeout_s(s)
        with conn.cursor() as cur:
            if "mariadb" in conn.get_server_info().lower():
                cur.execute("SET SESSION max_statement_time = %s", (timeout,))
            else:
                cur.execute("SET SESSION max_execution_time = %s", (int(timeout * 1000),))

    def resolve_table(self, conn: Any, table: str) -> tuple[str, str, list[Column]] | None:
        schema, _, name = table.rpartition(".")
        with conn.cursor() as cur:
            cur.execute("SELECT table_schema, table_name FROM information_schema.tables "
                        "WHERE table_schema = COALESCE(%s, DATABASE()) AND table_name = %s", (schema or None, name))
            row = cur.fetchone()
        if row is None:
            return None
        schema_name, table_name = (v.decode() if isinstance(v, bytes) else v for v in row)
        return schema_name, table_name, read_columns(conn, schema_name, table_name)

    def watermark_kind(self, column: Column) -> str | None:
        return watermark_kind(column)

    def queries(self, t: TableQuerySettings, schema_name: str, table_name: str, columns: list[str], kind: str, label: str,
                casts: Mapping[str, str] | None = None, watermark_not_null: bool = False) -> TableQueries:
        # MySQL's optimizer drops `col IS NULL` of a NOT NULL column itself: the range condition stays as it is
        return MySqlQueries(t, schema_name, table_name, columns, kind, label)

    def stream(self, conn: Any, query: Any, params: list[Any], fetch_rows: int, name: str,
               columns: list[str], casts: Mapping[str, str]) -> Iterator[list[tuple[Any, ...]]]:
        import pymysql.cursors

        convert = [CONVERT.get(casts.get(c, "")) for c in columns]
        converted = [i for i, f in enumerate(convert) if f is not None]
        cur = conn.cursor(pymysql.cursors.SSCursor)
        cur.execute("SET SESSION net_write_timeout = 3600")  # the server waits this long for a task busy writing
        cur.execute(query, params)
        while True:
            batch = cur.fetchmany(fetch_rows)
            if not batch:
                break
            if converted:
                batch = [_converted(row, converted, convert) for row in batch]
            yield batch
        cur.close()  # only once the result is read: closing an unread unbuffered result would read it to the end

    native_install = "reader native needs ConnectorX for MySQL/MariaDB: pip install 'gobblin-py[jdbc]'"

    native_modules = ("connectorx",)

    def native_reader_installed(self) -> bool:
        return importlib.util.find_spec("connectorx") is not None

    def native_reads(self, columns: list[Column]) -> bool:
        """Only columns ConnectorX reads exactly as PyMySQL does: no TIME, BIT, SET, unsigned BIGINT or JSON (converted
        here, or read otherwise), no `timestamp` (its zone is the session's), no decimal beyond ConnectorX's (38,10)."""
        return native_reads(columns)

    def read_arrow(self, conn: Any, s: ConnectionSettings, query: Any, params: list[Any]) -> Iterator[Any]:
        import connectorx

        text = conn.cursor().mogrify(query, params)  # PyMySQL's own quoting: ConnectorX takes no parameters
        parts = urlsplit(s.url)
        password = read_password(s) or ""
        url = (f"mysql://{url_quote(unquote(parts.username or ''), safe='')}:{url_quote(password, safe='')}@"
               f"{parts.hostname}:{parts.port or self.default_port}/{url_quote(s.database, safe='')}")
        timeout = _timeout_s(s)
        limit = (f"SET SESSION max_statement_time = {timeout}" if "mariadb" in conn.get_server_info().lower()
                 else f"SET SESSION max_execution_time = {int(timeout * 1000)}")
        try:
            reader = connectorx.read_sql(url, text, return_type="arrow_stream", batch_size=s.fetch_rows,
                                         pre_execution_query=["SET time_zone = '+00:00'", limit])
            for batch in reader:
                yield batch
        except (KeyboardInterrupt, SystemExit, GeneratorExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - ConnectorX's errors, and its Rust panics (not Exceptions)
            message = scrub(first_line(str(exc)), password)
            if "couldn't convert the value" in message.lower():  # a zero date, a value Arrow has no type for
                raise NativeReadError(Failure.BAD_VALUE, f"{message}; the native reader cannot read it: give "
                                      "source.reader: auto or rows, which send such a row to the error file",
                                      message) from None
            raise NativeReadError(failure_by_words(message, NATIVE_FAILURES), message) from None

    def failure(self, exc: BaseException) -> Failure | None:
        import pymysql.err

        if not isinstance(exc, pymysql.err.Error):
            return None
        code = exc.args[0] if exc.args else None
        if code in TIMEOUTS or code == INTERRUPTED:
            return Failure.TIMEOUT
        if code in (UNKNOWN_COLUMN, UNKNOWN_TABLE):
            return Failure.UNKNOWN_COLUMN
        if isinstance(exc, pymysql.err.InterfaceError) or code in CLIENT_ERRORS:
            return Failure.CONNECTION_LOST
        if isinstance(exc, pymysql.err.DataError):
            return Failure.BAD_VALUE
        return Failure.OTHER

    def message(self, exc: BaseException) -> str:
        args = getattr(exc, "args", ())
        if len(args) >= 2 and isinstance(args[0], int):
            return f"{first_line(str(args[1]))} (error {args[0]})"
        return first_line(str(exc)) or type(exc).__name__

    def close(self, conn: Any) -> None:
        import pymysql.err

        try:
            if conn.open:
                conn.close()
        except (pymysql.err.Error, OSError):
            pass  # the connection is lost: nothing left to end


INTEGER_TYPES = {"tinyint", "smallint", "mediumint", "int", "bigint"}
"""The key types a first load is sliced by (`key_split`)."""

NATIVE_FAILURES = (("max_statement_time", Failure.TIMEOUT), ("max_execution_time", Failure.TIMEOUT),
                   ("interrupted", Failure.TIMEOUT), ("unknown column", Failure.UNKNOWN_COLUMN),
                   ("doesn't exist", Failure.UNKNOWN_COLUMN), ("lost connection", Failure.CONNECTION_LOST),
                   ("gone away", Failure.CONNECTION_LOST), ("connection", Failure.CONNECTION_LOST),
                   ("broken pipe", Failure.CONNECTION_LOST), ("io error", Failure.CONNECTION_LOST))
"""The server's and ConnectorX's words for each failure."""


class MariaDbDialect(MySqlDialect):
    """MariaDB 10.2+ (window functions): the MySQL dialect, named as the server is."""

    name = "MariaDB"


class MySqlQueries(TableQueries):
    """The SQL of one MySQL table: backquoted identifiers, `%s` parameters."""

    def __init__(self, t: TableQuerySettings, schema_name: str, table_name: str, columns: list[str], kind: str,
                 label: str) -> None:
        self.settings, self.columns, self.kind, self.label = t, columns, kind, label
        self.schema_name, self.table_name = schema_name, table_name
        self.table = f"{quote(schema_name)}.{quote(table_name)}"
        self.wm = quote(t.watermark_column)
        self.where = f" AND ({t.where.replace('%', '%%')})" if t.where else ""  # a literal % is no placeholder

    def _one(self, conn: Any, query: str, params: list[Any]) -> Any:
        with conn.cursor() as cur:
            cur.execute(query, params)
            return cur.fetchone()

    def upper_bound(self, conn: Any, s: ConnectionSettings) -> Bound:
        t, kind, lag = self.settings, self.kind, self.settings.watermark_lag
        if kind == WatermarkKind.INTEGER:
            if not isinstance(lag, int):
                raise ConfigError(f"{self.label}: watermark_lag {lag!r} must be a whole number for the "
                                  f"integer column {t.watermark_column}")
            if t.watermark_zone is not None:
                raise ConfigError(f"{self.label}: watermark_zone is for time columns; {t.watermark_column} is an integer "
                                  "(remove watermark_zone)")
            top = self.newest(conn)
            return Bound(None if top is None else int(top) - lag)
        lag_s = seconds(lag, LAG_UNITS)
        if lag_s is None:
            raise ConfigError(f"{self.label}: watermark_lag {lag!r} is not a duration: give seconds (300) or "
                              "'5 minutes' (seconds, minutes, hours, days)")
        data_type = self._one(conn, "SELECT data_type FROM information_schema.columns WHERE table_schema = %s AND "
                              "table_name = %s AND column_name = %s",
                              [self.schema_name, self.table_name, t.watermark_column])[0]
        data_type = data_type.decode() if isinstance(data_type, bytes) else str(data_type)
        # timestamp: an instant, read in UTC (the session's zone); datetime and date: a wall clock without a zone, the
        # server's being its global zone's (NULL when that zone is named and the zone tables are not loaded)
        now_utc, server_wall, newest = self._one(
            conn, f"SELECT UTC_TIMESTAMP(6), CONVERT_TZ(UTC_TIMESTAMP(6), '+00:00', @@global.time_zone), "
                  f"(SELECT MAX({self.wm}) FROM {self.table} WHERE TRUE{self.where})", [])
        return time_bound(kind, data_type.lower() == "timestamp", as_utc(now_utc), server_wall, newest,
                          timedelta(seconds=lag_s), t.watermark_zone, self.label, t.watermark_column)

    def newest(self, conn: Any) -> Any:
        return self._one(conn, f"SELECT MAX({self.wm}) FROM {self.table} WHERE TRUE{self.where}", [])[0]

    def count_range(self, conn: Any, r: Range) -> int:
        cond, params = self.range_condition(r)
        return int(self._one(conn, f"SELECT COUNT(*) FROM {self.table} WHERE {cond}{self.where}", params)[0])

    def range_condition(self, r: Range) -> tuple[str, list[Any]]:
        """`(lo, hi]` of the watermark column; a range from the start also holds the rows without a watermark."""
        if r.lo is None:
            return f"({self.wm} <= %s OR {self.wm} IS NULL)", [r.hi]
        return f"{self.wm} > %s AND {self.wm} <= %s", [r.lo, r.hi]

    def split(self, conn: Any, r: Range, parts: int) -> tuple[int, list[Any]]:
        """NTILE over the range ordered by the watermark (NULLs first: they belong to the first sub-range); the
        maximum of each tile but the last is a boundary, so each sub-range holds about one tile's rows. Past
        SAMPLE_ABOVE rows, NTILE over a repeatable sample of about SAMPLE_ROWS of them (`RAND(0)`): ordering every
        value took 3.9 s of a 2M-row first load, the sample 0.4 s, and the boundaries only balance the tasks. The
        count is always exact (a range counted empty is not read)."""
        cond, params = self.range_condition(r)
        sample = ""
        if parts > 1:
            rows = self.count_range(conn, r)
            if rows > SAMPLE_ABOVE:
                sample = f" AND RAND(0) < {SAMPLE_ROWS / rows:.6f}"
        query = (f"SELECT COUNT(*), MAX(wm) FROM (SELECT {self.wm} AS wm, NTILE(%s) OVER (ORDER BY {self.wm}) AS tile "
                 f"FROM {self.table} WHERE {cond}{self.where}{sample}) AS tiles GROUP BY tile ORDER BY tile")
        with conn.cursor() as cur:
            cur.execute(query, [parts, *params])
            tiles = cur.fetchall()
        bounds = inner_bounds(r, [top for _, top in tiles[:-1]])
        if sample:
            return rows, bounds
        return sum(int(n) for n, _ in tiles), bounds

    def table_size(self, conn: Any) -> tuple[float, float] | None:
        """information_schema's data_length and table_rows (InnoDB's estimates, from its statistics)."""
        row = self._one(conn, "SELECT data_length, table_rows FROM information_schema.tables WHERE table_schema = %s "
                              "AND table_name = %s", [self.schema_name, self.table_name])
        return (float(row[0]), float(row[1] or 0)) if row is not None and row[0] is not None else None

    def count_nulls(self, conn: Any) -> int:
        return int(self._one(conn, f"SELECT COUNT(*) FROM {self.table} WHERE {self.wm} IS NULL{self.where}", [])[0])

    def select(self, r: Range) -> tuple[Any, list[Any]]:
        t = self.settings
        cond, params = self.range_condition(r)
        columns = ", ".join(quote(c) for c in self.columns)
        order = ", ".join(quote(c) for c in [t.watermark_column, *t.key_columns])
        return f"SELECT {columns} FROM {self.table} WHERE {cond}{self.where} ORDER BY {order}", params

    def key_column(self, conn: Any) -> str | None:
        """The job's `primary_key` when it is the table's whole PRIMARY KEY and an integer column (InnoDB clusters the
        rows by it, so a slice of it is a range scan of its own rows)."""
        keys = self.settings.key_columns
        with conn.cursor() as cur:
            cur.execute("SELECT s.column_name, c.data_type FROM information_schema.statistics s JOIN "
                        "information_schema.columns c ON c.table_schema = s.table_schema AND c.table_name = s.table_name "
                        "AND c.column_name = s.column_name WHERE s.table_schema = %s AND s.table_name = %s AND "
                        "s.index_name = 'PRIMARY'", [self.schema_name, self.table_name])
            rows = [tuple(v.decode() if isinstance(v, bytes) else v for v in row) for row in cur.fetchall()]
        if len(keys) != 1 or len(rows) != 1 or rows[0][0] != keys[0] or str(rows[0][1]).lower() not in INTEGER_TYPES:
            return None
        return keys[0]

    def key_split(self, conn: Any, column: str, parts: int) -> list[int]:
        """Equal widths between the key's least and greatest values (the ends of the clustered index: two lookups, no
        scan, no count): an auto-increment key's slices then hold about as many rows each."""
        lo, hi = self._one(conn, f"SELECT MIN({quote(column)}), MAX({quote(column)}) FROM {self.table}", [])
        if lo is None or parts < 2:
            return []
        lo, hi = int(lo), int(hi)
        bounds: list[int] = []
        for i in range(1, parts):
            b = lo + (hi - lo) * i // parts
            if b > lo and b < hi and (not bounds or b > bounds[-1]):
                bounds.append(b)
        return bounds

    def select_keys(self, r: Range, keys: KeyRange) -> tuple[Any, list[Any]]:
        """A slice of a first load: `key > lo AND key <= hi` on the PRIMARY index (a range scan of its own rows, in key
        order), the watermark range's condition checked on each row."""
        cond, params = self.range_condition(r)
        key = quote(self.settings.key_columns[0])
        on_key = [(f"{key} > %s", keys.lo), (f"{key} <= %s", keys.hi)]
        where = " AND ".join([c for c, v in on_key if v is not None] + [cond])
        columns = ", ".join(quote(c) for c in self.columns)
        return (f"SELECT {columns} FROM {self.table} FORCE INDEX (PRIMARY) WHERE {where}{self.where} ORDER BY {key}",
                [*(v for _, v in on_key if v is not None), *params])

    def select_after(self, conn: Any, r: Range, last: list[Any]) -> tuple[Any, list[Any]] | None:
        """`select`'s rows after `last` by a row comparison in its order (NULL watermarks sort first, as they are
        read first); only where a unique index's columns are all among the watermark and key columns, so no other
        row sorts equal to `last`, and `last`'s keys are not NULL."""
        t = self.settings
        keys = [quote(c) for c in t.key_columns]
        if any(v is None for v in last[1:]) or not self._unique_among([t.watermark_column, *t.key_columns], conn):
            return None
        query, params = self.select(r)
        marks = ", ".join(["%s"] * len(keys))
        if last[0] is None:  # among the NULL watermarks: the rest of them by key, then every other row of the range
            after, values = f"(({self.wm} IS NULL AND ({', '.join(keys)}) > ({marks})) OR {self.wm} IS NOT NULL)", last[1:]
        else:
            after, values = f"({self.wm}, {', '.join(keys)}) > (%s, {marks})", last
        head, order = query.rsplit(" ORDER BY ", 1)
        return f"{head} AND {after} ORDER BY {order}", [*params, *values]

    def _unique_among(self, columns: list[str], conn: Any) -> bool:
        """Whether a unique index (or the primary key) of the table has only columns among `columns`."""
        marks = ", ".join(["%s"] * len(columns))
        row = self._one(conn, "SELECT index_name FROM information_schema.statistics WHERE table_schema = %s AND "
                              f"table_name = %s AND non_unique = 0 GROUP BY index_name HAVING SUM(column_name NOT IN "
                              f"({marks})) = 0 LIMIT 1", [self.schema_name, self.table_name, *columns])
        return row is not None


def _converted(row: tuple[Any, ...], columns: list[int], convert: list[Callable[[Any], Any] | None]) -> tuple[Any, ...]:
    """`row` with the values of `columns` (not None) through their conversion."""
    values = list(row)
    for i in columns:
        if values[i] is not None:
            values[i] = convert[i](values[i])  # type: ignore[misc]
    return tuple(values)


def _timeout_s(s: ConnectionSettings) -> float:
    """`statement_timeout` in seconds (MySQL and MariaDB take it as a session variable); a ConfigError naming it."""
    timeout = seconds(s.statement_timeout, TIMEOUT_UNITS)
    if timeout is None:
        raise ConfigError(f"source.statement_timeout {s.statement_timeout!r} is not a duration (e.g. 300ms, 30s, "
                          "15min, 0 for none)")
    return timeout
