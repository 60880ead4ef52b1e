"""What the jdbc source needs from one database (PostgreSQL, MySQL/MariaDB): the seam between its one planning loop
and one extraction loop and each database's driver, catalog and SQL.

The URL's scheme picks the dialect (`dialect_for`). A dialect connects (mapping the driver's failures to our errors),
reads a table's columns with their Avro types, writes the per-table SQL (`TableQueries`: upper bound with the lag,
the split into sub-ranges of similar row counts, the NULL count, the select), streams a select in batches, and says
what kind of failure a driver exception is (`Failure`), so the source and the extractor name it the same way for
every database.
"""

from __future__ import annotations

import importlib
import os
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from enum import Enum
from typing import Any, Protocol, final
from urllib.parse import urlsplit

from gobblin_py.builtin.sources.jdbc.bounds import Bound
from gobblin_py.builtin.sources.jdbc.columns import Column
from gobblin_py.builtin.sources.jdbc.ranges import KeyRange, Range
from gobblin_py.errors import ConfigError, SourceError, UnreachableError, scrub


class ConnectionSettings(Protocol):
    """What a dialect reads of the source's settings (`JdbcSettings` is one). An interface, so that the settings,
    which pick the dialect from the url, and the dialects import one way."""

    @property
    def url(self) -> str: ...
    @property
    def database(self) -> str: ...
    @property
    def endpoint(self) -> str: ...
    @property
    def password_env(self) -> str | None: ...
    @property
    def connect_timeout_s(self) -> int: ...
    @property
    def statement_timeout(self) -> str | int: ...
    @property
    def fetch_rows(self) -> int: ...


class TableQuerySettings(Protocol):
    """What a dialect's SQL reads of one table's settings (`TableSettings` is one)."""

    @property
    def watermark_column(self) -> str: ...
    @property
    def key_columns(self) -> list[str]: ...
    @property
    def watermark_lag(self) -> str | int | float: ...
    @property
    def watermark_zone(self) -> str | None: ...
    @property
    def where(self) -> str | None: ...

REMEDY = "Check that the database is running and source.url is right; the next run resumes from the committed watermarks."

DIALECTS: dict[str, str] = {
    "postgresql": "gobblin_py.builtin.sources.jdbc.postgres:PostgresDialect",
    "postgres": "gobblin_py.builtin.sources.jdbc.postgres:PostgresDialect",
    "mysql": "gobblin_py.builtin.sources.jdbc.mysql:MySqlDialect",
    "mariadb": "gobblin_py.builtin.sources.jdbc.mysql:MariaDbDialect",
}
"""URL scheme → dialect class, imported when first used (a job on one database never imports the other's code)."""


class Failure(Enum):
    """What a driver exception means to the source, whatever the database."""

    TIMEOUT = "timeout"  # cancelled by the statement timeout
    UNKNOWN_COLUMN = "unknown column"  # a column (or table) named in the job is not there
    CONNECTION_LOST = "connection lost"
    BAD_VALUE = "bad value"  # a value the driver cannot read
    OTHER = "other"  # any other database error (bad SQL in `where` …)


class NativeReadError(Exception):
    """A native reader failed mid-read; `failure` says how, read from the database's own words (the Arrow stream's
    error carries the server's message but not its error code)."""

    def __init__(self, failure: Failure, text: str, reason: str | None = None) -> None:
        super().__init__(text)
        self.failure = failure
        self.reason = reason or text  # the reader's own words, without a remedy


def failure_by_words(text: str, words: tuple[tuple[str, Failure], ...]) -> Failure:
    """The first failure whose words are in `text` (case-insensitive); OTHER when none is."""
    lowered = text.lower()
    return next((failure for w, failure in words if w in lowered), Failure.OTHER)


class ConnectFailure(Enum):
    """Why a connection failed, whatever the database: each is named to the user the same way (`Dialect.connect`)."""

    AUTH = "wrong user or password"
    NO_DATABASE = "no such database"
    BAD_TIMEOUT = "statement_timeout the database refuses"
    UNREACHABLE = "anything else: the database cannot be reached"


class TableQueries(ABC):
    """The SQL of one table and selection, identifiers quoted, every value a bound parameter."""

    @abstractmethod
    def upper_bound(self, conn: Any, s: ConnectionSettings) -> Bound:
        """This run's upper bound: max − lag (integers); time columns by `bounds.time_bound`'s rule per kind."""

    @abstractmethod
    def newest(self, conn: Any) -> Any:
        """max(watermark column) under `where` (±infinity left out); None for an empty table."""

    @abstractmethod
    def count_range(self, conn: Any, r: Range) -> int:
        """The rows (under `where`) of range `r` (`(lo, hi]`; from the start, rows without a watermark included)."""

    @abstractmethod
    def split(self, conn: Any, r: Range, parts: int) -> tuple[int, list[Any]]:
        """The range's row count and the inner boundaries of `parts` sub-ranges of similar row counts; a boundary
        is a value of the column, so one value never spans two sub-ranges."""

    @abstractmethod
    def count_nulls(self, conn: Any) -> int:
        """Rows (under `where`) whose watermark is NULL."""

    def count_infinite(self, conn: Any) -> int:
        """Rows (under `where`) whose watermark is ±infinity: in no range (the database has no such value: none)."""
        return 0

    def table_size(self, conn: Any) -> tuple[float, float] | None:
        """(bytes, rows) of the whole table as the database's catalog keeps them (no scan; rows ≤ 0: not counted yet),
        for a first load's estimate; None when the catalog does not say."""
        return None

    @abstractmethod
    def select(self, r: Range) -> tuple[Any, list[Any]]:
        """The extraction query of one sub-range `(lo, hi]`, ordered by watermark and primary key."""

    def key_column(self, conn: Any) -> str | None:
        """The table's primary key when a first load can be read in slices of it: one integer column, the job's
        `primary_key`, the table's clustered index (InnoDB); None where it cannot (the split is then the watermark's)."""
        return None

    def key_split(self, conn: Any, column: str, parts: int) -> list[int]:
        """Up to `parts - 1` inner boundaries of `column`'s values (strictly increasing), found without a scan."""
        raise NotImplementedError

    def select_keys(self, r: Range, keys: KeyRange) -> tuple[Any, list[Any]]:
        """The extraction query of one slice of a first load: the rows of watermark range `r` whose key lies in `keys`,
        a range scan of the clustered index in key order."""
        raise NotImplementedError

    def select_after(self, conn: Any, r: Range, last: list[Any]) -> tuple[Any, list[Any]] | None:
        """The rows of sub-range `r` that `select` gives after `last` (the watermark and primary key values of a row
        it gave), in its order: where a native read stopped, the row path goes on. None where that cannot be shown
        to be exactly the rest (no unique key among those columns, a NULL key): the read then fails as it stopped."""
        return None


class Dialect(ABC):
    """One database's driver, catalog and SQL, as the jdbc source uses them."""

    name: str  # how messages name the database: "PostgreSQL"
    default_port: int
    driver: str  # the module to import
    install: str  # what to install when it is missing
    table_hint: str  # how to name a table: "schema-qualified (public.orders)"
    watermark_types: str  # what a watermark column may be, for the error that refuses another

    def require_driver(self) -> Any:
        """The driver module; a ConfigError saying what to install when it is missing."""
        try:
            return importlib.import_module(self.driver)
        except ImportError:
            raise ConfigError(self.install) from None

    @final
    def connect(self, s: ConnectionSettings, in_task: bool = False) -> Any:
        """A connection with the run's statement timeout; a failure named: unreachable → SourceError (in a task
        UnreachableError), wrong user or password, unknown database, a timeout the database refuses → ConfigError.
        The password is read from `password_env` here and cut out of every message."""
        driver = self.require_driver()
        password = read_password(s)
        try:
            conn = self.open(driver, s, password)
        except driver.Error as exc:
            text = scrub(self.message(exc), password)
            where = f"{s.endpoint}, database {s.database}"
            why = self.connect_failure(exc, text)
            if why is ConnectFailure.AUTH:
                raise auth_error(s, where) from None
            if why is ConnectFailure.NO_DATABASE:
                raise ConfigError(f"{where}: database {s.database!r} does not exist; check source.url") from None
            if why is ConnectFailure.BAD_TIMEOUT:
                raise ConfigError(f"source.statement_timeout {s.statement_timeout!r} is not a valid {self.name} duration "
                                  "(e.g. 30s, 15min, 0 for none)") from None
            raise unreachable(s, text, in_task) from None
        self.prepare(conn, s)
        return conn

    @abstractmethod
    def open(self, driver: Any, s: ConnectionSettings, password: str | None) -> Any:
        """Hook: connect with the driver module `driver` (autocommit, the statement timeout where the driver takes it)."""

    @abstractmethod
    def connect_failure(self, exc: Exception, text: str) -> ConnectFailure:
        """Hook: what the driver's connection error `exc` (message `text`, password cut out) means."""

    def prepare(self, conn: Any, s: ConnectionSettings) -> None:
        """Hook: set up a new connection's session (e.g. a timeout the driver cannot take at connect)."""

    @abstractmethod
    def resolve_table(self, conn: Any, table: str) -> tuple[str, str, list[Column]] | None:
        """(schema or database, table name, every column with its Avro type) of `table`; None when there is none."""

    def identity(self, conn: Any, schema_name: str, table_name: str) -> dict[str, Any]:
        """Hook: what identifies the server and the table beyond their names (JSON values), kept with each commit: a
        server restored from a backup or a table dropped and created again holds rows the committed watermark says
        were read. Default: nothing (unchecked)."""
        return {}

    @abstractmethod
    def watermark_kind(self, column: Column) -> str | None:
        """The `WatermarkKind` of a column, None when it cannot be a watermark."""

    @abstractmethod
    def queries(self, t: TableQuerySettings, schema_name: str, table_name: str, columns: list[str], kind: str, label: str,
                casts: Mapping[str, str] | None = None, watermark_not_null: bool = False) -> TableQueries:
        """The SQL of one table and selection; `watermark_not_null`: the catalog declares the watermark column NOT NULL
        (a range from the start then needs no `IS NULL` arm, which keeps it off the column's index)."""

    @abstractmethod
    def stream(self, conn: Any, query: Any, params: list[Any], fetch_rows: int, name: str,
               columns: list[str], casts: Mapping[str, str]) -> Iterator[list[tuple[Any, ...]]]:
        """The rows of `query`, a round trip of a streaming cursor (`fetch_rows` rows) at a time: never the whole
        result in memory."""

    native_install = "this database has no native reader here: give reader auto or rows"
    """What to install for `reader: native` (a ConfigError when it is missing)."""

    def native_reader_installed(self) -> bool:
        """Whether this database's native Arrow reader can be imported here (`reader: auto` then uses it)."""
        return False

    native_modules: tuple[str, ...] = ()
    """What the native reader imports when a task first reads (`warm_up` imports it ahead)."""

    @final
    def warm_up(self, reader: str) -> None:
        """The driver, and the native reader unless `reader: rows`, imported: what a task's first read imports."""
        self.require_driver()
        if reader != "rows" and self.native_reader_installed():
            for module in self.native_modules:
                importlib.import_module(module)

    @final
    def reads_natively(self, reader: str, workunit_native: bool) -> bool:
        """Whether a task reads natively: `reader` (source.reader) asks for it, the reader is installed, and its
        WorkUnit's columns are ones it gives exactly (`workunit_native`, from `native_reads`)."""
        return reader in ("native", "auto") and workunit_native and self.native_reader_installed()

    def native_reads(self, columns: list[Column]) -> bool:
        """Whether the native reader gives these columns' values exactly (else the table is read as rows)."""
        return True

    def read_arrow(self, conn: Any, s: ConnectionSettings, query: Any, params: list[Any]) -> Iterator[Any]:
        """Hook: the rows of `query` read straight into Arrow by the database's native reader, as `pyarrow.RecordBatch`es
        of the reader's own types and sizes (`rebatch` cuts them); called only where `native_reader_installed`.
        `conn` is the task's driver connection (to render the query), the reader opens its own."""
        raise NotImplementedError(f"{self.name} has no native reader")

    @abstractmethod
    def failure(self, exc: BaseException) -> Failure | None:
        """What a driver exception means; None when `exc` is not the driver's."""

    def message(self, exc: BaseException) -> str:
        """A driver exception's message on one line, as errors quote it."""
        return first_line(str(exc))

    @abstractmethod
    def close(self, conn: Any) -> None:
        """End the connection (rolling back whatever a read left open)."""


def dialect_for(url: str) -> Dialect:
    """The dialect of a source URL's scheme; a ConfigError listing the schemes there are."""
    scheme = urlsplit(url).scheme
    target = DIALECTS.get(scheme)
    if target is None:
        raise ConfigError(f"source.url: scheme {scheme!r} is not supported; give one of {', '.join(DIALECTS)}")
    module, cls = target.split(":")
    return getattr(importlib.import_module(module), cls)()


def first_line(text: str) -> str:
    """The first line of a driver's message, without psycopg's "connection failed: " prefix."""
    return " ".join(text.strip().splitlines()[:1]).removeprefix("connection failed: ")


def timeout_error(s: ConnectionSettings, table: str, what: str) -> SourceError:
    """The error of a query cancelled by `statement_timeout`, naming the table, the step and the setting."""
    return SourceError(f"table {table}: {what} was cancelled after statement_timeout {s.statement_timeout}; raise "
                       "source.statement_timeout, or index the watermark column")


def read_password(s: ConnectionSettings) -> str | None:
    """The password from `password_env` (None without one); a ConfigError when the variable is not set here."""
    if not s.password_env:
        return None
    password = os.environ.get(s.password_env)
    if password is None:
        raise ConfigError("source.password_env: the environment variable it names is not set here (on a cluster, pass "
                          "it to the executors: spark.conf: {spark.executorEnv.<the variable>: ...}); its value is not "
                          "repeated: it must be the variable's name, not the password")
    return password


def auth_error(s: ConnectionSettings, where: str) -> ConfigError:
    """Wrong user or password: names the user and the variable, never the password."""
    user = urlsplit(s.url).username
    return ConfigError(f"{where}: authentication failed for user {user!r}; check the user in source.url and "
                       f"the password in ${s.password_env or '(no password_env given)'}")


def inner_bounds(r: Range, candidates: list[Any] | None) -> list[Any]:
    """The candidate boundaries strictly inside `r`, strictly increasing (a repeated or NULL one is dropped)."""
    bounds: list[Any] = []
    for b in candidates or []:
        if b is not None and (r.lo is None or b > r.lo) and b < r.hi and (not bounds or b > bounds[-1]):
            bounds.append(b)
    return bounds


def unreachable(s: ConnectionSettings, text: str, in_task: bool) -> Exception:
    """Cannot connect: SourceError while planning (the run fails, exit 1); in a task an UnreachableError, so the
    run's other tasks give up on the database at once."""
    message = f"cannot connect to {s.endpoint}, database {s.database}: {text}"
    return UnreachableError(message, s.endpoint, REMEDY) if in_task else SourceError(f"{message}. {REMEDY}")


