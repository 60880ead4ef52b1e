"""The `jdbc` source's settings: the tables, the url (no password: `password_env`) and the extraction limits; shared
by the planner (`source.py`), the reader (`extractor.py`) and the dialects, so none of them imports another's module."""

from __future__ import annotations

from typing import Literal
from urllib.parse import unquote, urlsplit

from pydantic import Field, field_validator, model_validator

from gobblin_py.api import Settings
from gobblin_py.api.secrets import check_credentials
from gobblin_py.builtin.extras import require
from gobblin_py.builtin.sources.jdbc.dialect import DIALECTS, Dialect, dialect_for


class TableSettings(Settings):
    table: str = Field(description="PostgreSQL: schema-qualified (public.orders); MySQL: orders or database.orders")
    watermark_column: str = Field(description="timestamp, timestamptz, datetime, date or an integer type")
    primary_key: str | list[str] = Field(description="a column or a list: the order of rows within one watermark value")
    columns: list[str] | None = Field(
        default=None, description="the columns to extract (default: every column); the watermark and key columns are always included")
    where: str | None = Field(default=None, description="an SQL condition ANDed to every query")
    watermark_lag: str | int | float = Field(
        default=0, description=(
            "how far each run stays behind: time columns, seconds or an interval ('5 minutes'); integers, a number. "
            "Longer than the longest write transaction (and any writer's clock running behind the database's). "
            "The bound: integers max(column) - lag; timestamptz (MySQL timestamp, an instant) now() - lag; timestamp "
            "(MySQL datetime, no zone) min(now, max(column)) - lag, never past the data, so a writer stamping a wall "
            "clock behind the database's puts no row under the committed position, and at least 1 hour without "
            "watermark_zone (a wall clock repeats an hour when DST ends); date: whole days before both today and the "
            "newest day"))
    watermark_zone: str | None = Field(
        default=None, description=(
            "timestamp/datetime/date columns: the IANA zone whose wall clock the writers stamp (UTC, "
            "America/New_York): the clock compared is that zone's, and instead of the 1-hour minimum lag a bound "
            "never falls inside an hour the zone repeats"))
    partitions: int | None = Field(default=None, ge=1, description="default: source.partitions")

    @field_validator("table")
    @classmethod
    def _directory_name(cls, value: str) -> str:
        """The table's name is its dataset's directory name: nothing that leaves the directory it is joined under."""
        if any(c in value for c in "/\\\x00") or value.strip() in ("", ".", ".."):
            raise ValueError(f"a table name becomes its dataset's directory: no '/', '\\' or NUL, and not '.' or '..'; "
                             f"got {value!r}")
        return value

    @field_validator("watermark_zone")
    @classmethod
    def _zone(cls, value: str | None) -> str | None:
        """An IANA zone name the tz database knows."""
        if value is None:
            return None
        from zoneinfo import ZoneInfo

        try:
            ZoneInfo(value)
        except (KeyError, ValueError, OSError):  # ZoneInfoNotFoundError is a KeyError
            raise ValueError(f"{value!r} is not a time zone: give an IANA name (UTC, America/New_York)") from None
        return value

    @property
    def key_columns(self) -> list[str]:
        return [self.primary_key] if isinstance(self.primary_key, str) else list(self.primary_key)


class JdbcSettings(Settings):
    url: str = Field(description="postgresql://user@host:5432/database or mysql://user@host:3306/database "
                                 "(mariadb:// too; no password: see password_env)")
    password_env: str | None = Field(default=None, description="the environment variable holding the password")
    tables: list[TableSettings] = Field(min_length=1, description="the tables to extract, one dataset each")
    partitions: int = Field(default=4, ge=1, description="sub-ranges (tasks) per table and run")
    max_workunits: int = Field(default=64, ge=1, description="sub-ranges are packed into at most this many tasks")
    fetch_rows: int = Field(default=10_000, ge=1, description="rows per round trip of the server-side cursor (per batch "
                                                               "of the native reader)")
    reader: Literal["auto", "native", "rows"] = Field(
        default="auto", description="how a task reads its rows: native reads them straight into Arrow in the database "
                                    "client's native code (PostgreSQL: the ADBC driver's binary COPY, the jdbc extra) "
                                    "when the task writes columnar (MySQL/MariaDB: ConnectorX, for tables of plain types); "
                                    "rows reads them as Python rows (psycopg, pymysql); auto is native, and where "
                                    "ConnectorX cannot read a value (a MySQL zero date) reads the rest of the sub-range "
                                    "as rows from the row after the last one taken; native fails the task there")
    first_load_split: Literal["key", "watermark"] = Field(
        default="key", description="how a first load is split into tasks: key (MySQL/MariaDB) slices it by the table's "
                                   "primary key when that is one integer column, the job's primary_key (InnoDB keeps "
                                   "the rows in its order: each slice is a range scan of its own rows, found without a "
                                   "count), up to a high watermark taken before any slice is read; watermark splits it "
                                   "on the watermark column as incremental runs are (PostgreSQL always)")
    statement_timeout: str | int = Field(default="15min", description="timeout of every query: 300ms, 30s, 15min (0: none)")
    connect_timeout_s: int = Field(default=10, ge=1, description="seconds to wait for a connection to the database")
    lag_count_rows: bool = Field(
        default=True, description="a lag measurement (Prometheus gauges, status) counts the rows above the committed "
        "watermark (count(*), cut off after the measurement's timeout: then only max(watermark column) − committed is "
        "given); false: never counted, for tables where that count is too dear")
    null_watermark: Literal["warn", "report"] = Field(
        default="warn", description="rows whose watermark is NULL (after the first load) or ±infinity (never "
                                    "extracted): warn logs their count, report makes it an input problem (exit 1)")

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in DIALECTS:
            raise ValueError(f"{parts.scheme or value!r}: give postgresql://, mysql:// or mariadb://user@host:port/database")
        if not parts.hostname or not parts.path.strip("/"):
            raise ValueError(f"give {parts.scheme}://user@host:port/database")
        return value

    @model_validator(mode="after")
    def _environment(self) -> JdbcSettings:
        dialect = self.dialect
        require(dialect.driver, dialect.install.split(":")[0], "jdbc")
        check_credentials(self.url, self.password_env)  # here, where the error does not echo the value
        if self.reader == "native" and not dialect.native_reader_installed():
            raise ValueError(f"reader native: {dialect.native_install}")
        names = [t.table for t in self.tables]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"table(s) {', '.join(repeated)} listed more than once (each table is one dataset)")
        return self

    @property
    def dialect(self) -> Dialect:
        """The database's dialect, from the url's scheme."""
        return dialect_for(self.url)

    @property
    def endpoint(self) -> str:
        parts = urlsplit(self.url)
        return f"{self.dialect.name} {parts.hostname}:{parts.port or self.dialect.default_port}"

    @property
    def database(self) -> str:
        return unquote(urlsplit(self.url).path.strip("/"))
