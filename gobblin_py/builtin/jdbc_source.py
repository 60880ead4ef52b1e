"""The `jdbc` source (PostgreSQL): each table is a dataset, extracted incrementally by a watermark column.

A run extracts the rows whose watermark lies in `(committed, high]`, split into `partitions` sub-ranges of similar
row counts (`percentile_disc` over the range: boundaries follow the column's distribution, not equal widths), one
WorkUnit (Spark task) each, ordered by watermark and primary key, streamed through a server-side cursor.

Why `watermark_lag`: a row becomes visible when its transaction commits, not when its watermark value was taken.
A transaction that stamped `updated_at = now()` at 10:00:00 and commits at 10:00:03 is invisible to a run that
reads at 10:00:01 and then commits `high = 10:00:01`: the next run starts after 10:00:01 and never sees it. The same
holds for sequence-generated integers (ids are handed out in one order and committed in another). So a run extracts
only up to `now() − lag` (time columns; the database's clock) or `max(column) − lag` (integers): rows still being
committed upstream are left for the next run. Choose a lag longer than the longest write transaction. A date column
extracts only whole days: up to `(now() − lag)::date − 1`.

Rows whose watermark is NULL are in no range: a first load (nothing committed yet) includes them; incremental runs
never extract them, and count them in a warning (`null_watermark: report` makes it an input problem: the run exits 1).

The watermark keys (one per WorkUnit, see `jdbc_ranges`) make the sub-ranges of a run safe under both commit
policies: `full` commits them together; `successful` never lets a failed sub-range be skipped.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from pydantic import Field, field_validator, model_validator

from gobblin_py.api import Extractor, MultiWorkUnit, Settings, Source, SourceState, TaskContext, WorkUnit
from gobblin_py.builtin.jdbc_ranges import (DONE_PREFIX, HIGH, Committed, Range, WatermarkKind, committed, encode)
from gobblin_py.builtin.jdbc_schema import WATERMARK_KINDS, Column, avro_schema, check_mapped, read_columns
from gobblin_py.builtin.output_names import workunit_id
from gobblin_py.builtin.packing import worst_fit_decreasing
from gobblin_py.errors import ConfigError, SourceError, UnreachableError, describe
from gobblin_py.builtin.extras import require

log = logging.getLogger(__name__)

INSTALL = "the jdbc source needs psycopg 3: pip install 'gobblin-py[jdbc]'"


class TableSettings(Settings):
    table: str = Field(description="schema-qualified: public.orders")
    watermark_column: str = Field(description="timestamp, timestamptz, date or an integer type")
    primary_key: str | list[str]
    columns: list[str] | None = Field(default=None, description="default: every column")
    where: str | None = Field(default=None, description="an SQL condition ANDed to every query")
    watermark_lag: str | int | float = Field(
        default=0, description="time columns: seconds or a PostgreSQL interval ('5 minutes'); integers: a number")
    partitions: int | None = Field(default=None, ge=1, description="default: source.partitions")

    @property
    def key_columns(self) -> list[str]:
        return [self.primary_key] if isinstance(self.primary_key, str) else list(self.primary_key)


class JdbcSettings(Settings):
    url: str = Field(description="postgresql://user@host:5432/database (no password: see password_env)")
    password_env: str | None = Field(default=None, description="the environment variable holding the password")
    tables: list[TableSettings] = Field(min_length=1)
    partitions: int = Field(default=4, ge=1, description="sub-ranges (tasks) per table and run")
    max_workunits: int = Field(default=64, ge=1, description="sub-ranges are packed into at most this many tasks")
    fetch_rows: int = Field(default=10_000, ge=1, description="rows per round trip of the server-side cursor")
    statement_timeout: str | int = Field(default="15min", description="PostgreSQL statement_timeout of every query (0: none)")
    connect_timeout_s: int = Field(default=10, ge=1)
    null_watermark: Literal["warn", "report"] = "warn"

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("postgresql", "postgres"):
            raise ValueError(f"{parts.scheme or value!r}: only postgresql://user@host:port/database is supported")
        if not parts.hostname or not parts.path.strip("/"):
            raise ValueError("give postgresql://user@host:port/database")
        return value

    @model_validator(mode="after")
    def _environment(self) -> JdbcSettings:
        require("psycopg", "the jdbc source needs psycopg 3", "jdbc")
        if urlsplit(self.url).password is not None:  # checked here, where the error does not echo the value
            raise ValueError("url holds a password: remove it from the url and name the variable holding it in password_env")
        if self.password_env is not None and self.password_env not in os.environ:
            raise ValueError(f"password_env: environment variable {self.password_env} is not set")
        names = [t.table for t in self.tables]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"table(s) {', '.join(repeated)} listed more than once (each table is one dataset)")
        return self

    @property
    def endpoint(self) -> str:
        parts = urlsplit(self.url)
        return f"PostgreSQL {parts.hostname}:{parts.port or 5432}"

    @property
    def database(self) -> str:
        return unquote(urlsplit(self.url).path.strip("/"))


REMEDY = "Check that the database is running and source.url is right; the next run resumes from the committed watermarks."


def connect(s: JdbcSettings, in_task: bool = False) -> Any:
    """A connection with the run's statement_timeout; the failure named (unreachable, authentication, database)."""
    try:
        import psycopg
    except ImportError:
        raise ConfigError(INSTALL) from None
    password = os.environ.get(s.password_env) if s.password_env else None
    if s.password_env and password is None:
        raise ConfigError(f"source.password_env: environment variable {s.password_env} is not set here (on a cluster, "
                          f"pass it to the executors: spark.conf: {{spark.executorEnv.{s.password_env}: ...}})")
    try:
        return psycopg.connect(s.url, password=password, connect_timeout=s.connect_timeout_s, autocommit=True,
                               application_name="gobblin-py", options=f"-c statement_timeout={s.statement_timeout}")
    except psycopg.Error as exc:
        text = scrub(str(exc), password)
        where = f"{s.endpoint}, database {s.database}"
        if "password authentication failed" in text or getattr(exc, "sqlstate", None) in ("28P01", "28000"):
            user = urlsplit(s.url).username
            raise ConfigError(f"{where}: authentication failed for user {user!r}; check the user in source.url and "
                              f"the password in ${s.password_env or '(no password_env given)'}") from None
        if "does not exist" in text and "database" in text:
            raise ConfigError(f"{where}: database {s.database!r} does not exist; check source.url") from None
        if "statement_timeout" in text:
            raise ConfigError(f"source.statement_timeout {s.statement_timeout!r} is not a valid PostgreSQL duration "
                              "(e.g. 30s, 15min, 0 for none)") from None
        message = f"cannot connect to {where}: {first_line(text)}"
        if in_task:
            raise UnreachableError(message, s.endpoint, REMEDY) from None
        raise SourceError(f"{message}. {REMEDY}") from None


def scrub(text: str, password: str | None) -> str:
    """`text` with the password cut out, whatever a library put in it."""
    return text.replace(password, "***") if password else text


def first_line(text: str) -> str:
    return " ".join(text.strip().splitlines()[:1]).removeprefix("connection failed: ")


def timeout_error(s: JdbcSettings, table: str, what: str) -> SourceError:
    return SourceError(f"table {table}: {what} was cancelled after statement_timeout {s.statement_timeout}; raise "
                       "source.statement_timeout, or index the watermark column")


@dataclass(frozen=True)
class TablePlan:
    """A table as planning resolved it: canonical name, selected columns, watermark kind."""

    settings: TableSettings
    schema_name: str
    table_name: str
    columns: list[Column]
    kind: str
    where_label: str  # how messages name it: "table public.orders (source.tables[0])"

    @property
    def dataset(self) -> str:
        return self.settings.table


class JdbcSource(Source):
    """One WorkUnit per sub-range of each table's new watermark range (and per hole a failed sub-range left)."""

    Settings = JdbcSettings
    keeps_key_stats = True

    def get_workunits(self, state: SourceState) -> list[WorkUnit | MultiWorkUnit]:
        import psycopg

        s: JdbcSettings = self.settings
        conn = connect(s)
        units: list[WorkUnit] = []
        try:
            for i, t in enumerate(s.tables):
                label = f"table {t.table} (source.tables[{i}])"
                try:
                    plan = self._resolve(conn, t, label)
                    units += self._plan_table(conn, plan, state)
                except psycopg.errors.QueryCanceled:
                    raise timeout_error(s, t.table, "planning (the range's row count and quantiles)") from None
                except psycopg.errors.UndefinedColumn as exc:
                    raise ConfigError(f"{label}: {first_line(str(exc))}; check watermark_column, primary_key, "
                                      "columns and where") from None
                except psycopg.OperationalError as exc:
                    raise SourceError(f"{label}: lost the connection to {s.endpoint} while planning: {first_line(str(exc))}") from None
                except psycopg.Error as exc:
                    raise SourceError(f"{label}: planning query failed: {describe(exc)} (check source.tables[{i}].where)") from None
        finally:
            conn.close()
        stats = {u.dataset: state.key_stats(u.dataset) for u in units}
        return worst_fit_decreasing(units, s.max_workunits, lambda u: estimated_bytes(u, stats))

    def _resolve(self, conn: Any, t: TableSettings, label: str) -> TablePlan:
        """The table's canonical name and columns; an unknown table or column is a ConfigError naming it."""
        row = conn.execute("SELECT c.oid, n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                           "WHERE c.oid = to_regclass(%s)", (t.table,)).fetchone()
        if row is None:
            raise ConfigError(f"{label}: no such table or view in database {self.settings.database} on "
                              f"{self.settings.endpoint}; give it schema-qualified (public.orders)")
        oid, schema_name, table_name = row
        available = read_columns(conn, oid)
        by_name = {c.name: c for c in available}

        def column(name: str, what: str) -> Column:
            if name in by_name:
                return by_name[name]
            raise ConfigError(f"{label}: {what} {name!r} is not a column of the table (columns: "
                              f"{', '.join(by_name)})")

        wm = column(t.watermark_column, "watermark_column")
        keys = [column(k, "primary_key column") for k in t.key_columns]
        selected = [column(c, "columns entry") for c in t.columns] if t.columns is not None else available
        for needed in (wm, *keys):
            if needed not in selected:
                selected = [*selected, needed]
        check_mapped(t.table, selected)
        kind = WATERMARK_KINDS.get(wm.type_name)
        if kind is None or wm.declared.endswith("[]"):
            raise ConfigError(f"{label}: watermark_column {wm.name!r} has type {wm.declared}; it must be a timestamp, "
                              "timestamptz, date or integer column")
        return TablePlan(t, schema_name, table_name, selected, kind, label)

    def _plan_table(self, conn: Any, plan: TablePlan, state: SourceState) -> list[WorkUnit]:
        s: JdbcSettings = self.settings
        t = plan.settings
        done = committed(plan.kind, state.watermarks(plan.dataset), f"dataset {plan.dataset}")
        q = Queries(t, plan.schema_name, plan.table_name, [c.name for c in plan.columns], plan.kind, plan.where_label)
        high = q.upper_bound(conn, s)
        if done.high is not None:
            nulls = conn.execute(q.count_nulls()).fetchone()[0]
            if nulls:
                message = (f"{nulls} row(s) of {t.table} have NULL in {t.watermark_column}: incremental runs never extract "
                           f"them (only a first load does); give them a {t.watermark_column}, or reset the dataset to reload")
                if s.null_watermark == "report":
                    state.report_input_problem(plan.dataset, message)
                else:
                    log.warning("%s", message)
        self._report_column_changes(plan, state)
        holes = done.holes()  # extracted even when empty: that closes them
        top = done.top
        fresh = Range(top, high) if high is not None and (top is None or high > top) else None
        schema = avro_schema(t.table, plan.columns)
        parts = t.partitions or s.partitions
        slots = done.free_slots()
        units: list[WorkUnit] = []
        ranges: list[Range] = []
        for r in [*holes, *([fresh] if fresh else [])]:
            rows, bounds = q.split(conn, r, parts)
            if r is fresh and rows == 0:
                continue  # nothing new: no task, the watermark stays (the next run's range starts there)
            ranges.append(r)
            edges = [r.lo, *bounds, r.hi]
            for lo, hi in zip(edges, edges[1:]):
                sub = Range(lo, hi)
                key = HIGH if lo == done.high else f"{DONE_PREFIX}{next(slots)}"
                units.append(self._workunit(plan, sub, key, done, schema, rows / (len(edges) - 1)))
        if not units:
            return []
        log.info("%s: extracting %s in %d work unit(s)", plan.where_label,
                 ", ".join(f"({encode(r.lo)}, {encode(r.hi)}]" for r in ranges), len(units))
        return units

    @staticmethod
    def _report_column_changes(plan: TablePlan, state: SourceState) -> None:
        """Columns added to or dropped from the selection since the last committed run (the table changed upstream):
        a notice. An added column is read from now on, null in the files written before (its type is nullable)."""
        before = state.kept(plan.dataset).get("columns")
        if not isinstance(before, list):
            return
        now = [c.name for c in plan.columns]
        added, dropped = [c for c in now if c not in before], [c for c in before if c not in now]
        if added:
            state.report_notice(plan.dataset, f"column(s) {', '.join(added)} added to {plan.settings.table} since the last "
                                              "run: read from now on (null in the files written before)")
        if dropped:
            state.report_notice(plan.dataset, f"column(s) {', '.join(dropped)} no longer in {plan.settings.table} (or "
                                              "its columns setting): not in the files from now on")

    def _workunit(self, plan: TablePlan, r: Range, key: str, done: Committed, schema: dict, rows: float) -> WorkUnit:
        """The WorkUnit of `r`, named by database, table, selection and range; its key's value is what it publishes."""
        s: JdbcSettings = self.settings
        t = plan.settings
        lo, hi = encode(r.lo), encode(r.hi)
        columns = [c.name for c in plan.columns]
        wu_id = workunit_id(f"{t.table}.{lo if lo is not None else 'start'}-{hi}", "jdbc", s.endpoint, s.database,
                            plan.schema_name, plan.table_name, t.watermark_column, ",".join(columns), t.where or "",
                            str(lo), str(hi))
        value = hi if key == HIGH else r.done_value(done.high)
        return WorkUnit(id=wu_id, dataset=plan.dataset, watermark_key=key, low_watermark=lo, expected_high_watermark=value,
                        props={"schema_name": plan.schema_name, "table_name": plan.table_name, "table": t.table,
                               "columns": columns, "casts": {c.name: c.cast for c in plan.columns if c.cast},
                               "watermark_column": t.watermark_column, "kind": plan.kind, "primary_key": t.key_columns,
                               "where": t.where, "lo": lo, "hi": hi, "avro_schema": schema, "estimated_rows": rows,
                               "state.columns": columns})  # kept at the commit: the next plan reports a change

    def endpoints(self, workunit: WorkUnit) -> list[str]:
        """The database every task reads from: once a task gives up on it, the run's others do not try."""
        return [self.settings.endpoint]

    def get_extractor(self, workunit: WorkUnit, context: TaskContext) -> Extractor:
        from gobblin_py.builtin.jdbc_extractor import JdbcExtractor

        return JdbcExtractor(self.settings, workunit, context)


class Queries:
    """The SQL of one table, identifiers quoted; every value is a bound parameter."""

    def __init__(self, t: TableSettings, schema_name: str, table_name: str, columns: list[str], kind: str, label: str,
                 casts: Mapping[str, str] | None = None) -> None:
        from psycopg import sql

        self.sql = sql
        self.settings, self.columns, self.kind, self.label = t, columns, kind, label
        self.casts = dict(casts or {})  # column → `text` or `text[]`: selected as their exact text, in any row format
        self.table = sql.Identifier(schema_name, table_name)
        self.wm = sql.Identifier(t.watermark_column)
        where = t.where.replace("%", "%%") if t.where else None  # a literal % (LIKE 'a%') is no placeholder
        self.where = sql.SQL(" AND ({})").format(sql.SQL(where)) if where else sql.SQL("")

    def upper_bound(self, conn: Any, s: JdbcSettings) -> Any:
        """This run's upper bound: now − lag (time columns, the database's clock), max − lag (integers)."""
        sql, t, kind = self.sql, self.settings, self.kind
        lag = t.watermark_lag
        if kind == WatermarkKind.INTEGER:
            if not isinstance(lag, int):
                raise ConfigError(f"{self.label}: watermark_lag {lag!r} must be a whole number for the "
                                  f"integer column {t.watermark_column}")
            query = sql.SQL("SELECT max({}) - %s FROM {} WHERE TRUE{}").format(self.wm, self.table, self.where)
            return conn.execute(query, (lag,)).fetchone()[0]
        interval = f"{lag} seconds" if isinstance(lag, (int, float)) else lag
        now = {WatermarkKind.TIMESTAMPTZ: "now()", WatermarkKind.TIMESTAMP: "localtimestamp",
               WatermarkKind.DATE: "localtimestamp"}[kind]
        expr = f"({now} - %s::interval)" + ("::date - 1" if kind == WatermarkKind.DATE else "")
        import psycopg

        try:
            return conn.execute(f"SELECT {expr}", (interval,)).fetchone()[0]
        except psycopg.errors.DataError:
            raise ConfigError(f"{self.label}: watermark_lag {lag!r} is not a duration: give seconds (300) or "
                              "a PostgreSQL interval ('5 minutes')") from None

    def range_condition(self, r: Range) -> tuple[Any, list[Any]]:
        """`(lo, hi]` of the watermark column; a range from the start also holds the rows without a watermark."""
        sql = self.sql
        if r.lo is None:
            return sql.SQL("({wm} <= %s OR {wm} IS NULL)").format(wm=self.wm), [r.hi]
        return sql.SQL("{wm} > %s AND {wm} <= %s").format(wm=self.wm), [r.lo, r.hi]

    def split(self, conn: Any, r: Range, parts: int) -> tuple[int, list[Any]]:
        """The range's row count and the inner boundaries of `parts` sub-ranges of similar row counts
        (percentile_disc over the range: a boundary is a value of the column, so one value never spans two)."""
        sql = self.sql
        cond, params = self.range_condition(r)
        fractions = [k / parts for k in range(1, parts)]
        query = sql.SQL("SELECT count(*), percentile_disc(%s::float8[]) WITHIN GROUP (ORDER BY {wm}) FROM {t} "
                        "WHERE {cond}{where}").format(wm=self.wm, t=self.table, cond=cond, where=self.where)
        rows, quantiles = conn.execute(query, [fractions or [0.5], *params]).fetchone()
        bounds: list[Any] = []
        for b in (quantiles or []) if fractions else []:
            if b is not None and (r.lo is None or b > r.lo) and b < r.hi and (not bounds or b > bounds[-1]):
                bounds.append(b)
        return int(rows), bounds

    def count_nulls(self) -> Any:
        return self.sql.SQL("SELECT count(*) FROM {} WHERE {} IS NULL{}").format(self.table, self.wm, self.where)

    def select(self, r: Range) -> tuple[Any, list[Any]]:
        """The extraction query of one sub-range, ordered by watermark and primary key."""
        sql, t = self.sql, self.settings
        cond, params = self.range_condition(r)
        columns = sql.SQL(", ").join(sql.SQL("{c}::{t}").format(c=sql.Identifier(c), t=sql.SQL(self.casts[c]))
                                     if c in self.casts else sql.Identifier(c) for c in self.columns)
        order = sql.SQL(", ").join(sql.Identifier(c) for c in [t.watermark_column, *t.key_columns])
        return sql.SQL("SELECT {cols} FROM {t} WHERE {cond}{where} ORDER BY {order}").format(
            cols=columns, t=self.table, cond=cond, where=self.where, order=order), params


def estimated_bytes(wu: WorkUnit, stats: dict[str, dict[str, dict[str, float]]]) -> float:
    """Estimated rows × the table's bytes per row of its last extraction (1 KiB when unknown)."""
    last = [v for v in stats.get(wu.dataset, {}).values() if v.get("records")]
    per_row = sum(v["bytes"] for v in last) / sum(v["records"] for v in last) if last else 1024.0
    return float(wu.props.get("estimated_rows", 0)) * per_row
