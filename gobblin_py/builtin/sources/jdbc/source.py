"""The `jdbc` source (PostgreSQL, MySQL/MariaDB): each table is a dataset, extracted incrementally by a watermark column.

A run extracts the rows whose watermark lies in `(committed, high]`, split into `partitions` sub-ranges of similar
row counts (PostgreSQL `percentile_disc`, MySQL `NTILE` over the range: boundaries follow the column's distribution,
not equal widths), one WorkUnit (Spark task) each, ordered by watermark and primary key, streamed through a
server-side (PostgreSQL) or unbuffered (MySQL) cursor. What differs per database is in its dialect (`dialect.py`);
this module's planning loop and `extractor`'s read loop serve both. A MySQL/MariaDB first load is split on the table's
integer primary key instead (`first_load_split: key`, `_plan_by_key`): each slice is a range scan of InnoDB's clustered
index, every slice bounded by one high watermark taken before any is read (`ranges.FirstLoad`).

Why `watermark_lag`: a row becomes visible when its transaction commits, not when its watermark value was taken.
A transaction that stamped `updated_at = now()` at 10:00:00 and commits at 10:00:03 is invisible to a run that
reads at 10:00:01 and then commits `high = 10:00:01`: the next run starts after 10:00:01 and never sees it. The same
holds for sequence-generated integers (ids are handed out in one order and committed in another). So a run extracts
only up to a bound `lag` behind: rows still being committed upstream are left for the next run. Choose a lag longer
than the longest write transaction.

The bound per kind (`bounds.py`): integers `max(column) − lag`; instants (`timestamptz`, MySQL `timestamp`)
`now() − lag` by the database's clock; wall clocks without a zone (`timestamp`, MySQL `datetime`)
`min(now, max(column)) − lag`, never past the data, with a lag of at least an hour unless `watermark_zone` names the
writers' zone (a writer stamping another zone's wall clock, or one repeating an hour when DST ends, would otherwise
put rows under the committed position); dates: whole days before both today and the newest day. A first load whose
newest zone-less value is an hour or more from the database's clock is reported (a notice naming the gap).

Rows whose watermark is NULL are in no range: a first load (nothing committed yet) includes them; incremental runs
never extract them, and count them in a warning (`null_watermark: report` makes it an input problem: the run exits 1).
Rows at `infinity` or `-infinity` (PostgreSQL) are in no range, the first load's included (no Avro timestamp holds
them): every run counts them the same way.

The watermark keys (one per WorkUnit, see `ranges.py`) make the sub-ranges of a run safe under both commit
policies: `full` commits them together; `successful` never lets a failed sub-range be skipped.
"""

from __future__ import annotations

import importlib
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from gobblin_py.api import Extractor, MultiWorkUnit, Source, SourceState, TaskContext, WorkUnit
from gobblin_py.api.lag import DatasetLag, unmeasured
from gobblin_py.api.names import workunit_id
from gobblin_py.api.types import SchemaKind
from gobblin_py.builtin.sources.jdbc.bounds import far_from_clock
from gobblin_py.builtin.sources.jdbc.columns import Column, avro_schema, check_mapped
from gobblin_py.builtin.sources.jdbc.dialect import Failure, TableQueries, first_line, timeout_error
from gobblin_py.builtin.sources.jdbc.ranges import (
    DONE_PREFIX,
    FIRST_PREFIX,
    HIGH,
    Committed,
    KeyRange,
    Range,
    WatermarkKind,
    committed,
    encode,
)
from gobblin_py.builtin.sources.jdbc.settings import JdbcSettings, TableSettings
from gobblin_py.builtin.sources.jdbc.split import JdbcSplit
from gobblin_py.builtin.sources.packing import worst_fit_decreasing
from gobblin_py.errors import ConfigError, SourceError, describe

log = logging.getLogger(__name__)
T = TypeVar("T")


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

    @property
    def watermark_not_null(self) -> bool:
        """Whether the catalog declares the watermark column NOT NULL (no row of the table can lack a watermark)."""
        return any(c.not_null for c in self.columns if c.name == self.settings.watermark_column)


NATIVE_SHARE = 0.95
"""Of a natively read task's work, the share outside Python's lock: 2M rows × 10 columns read by ADBC and written to
Parquet keep one core busy for 5.2 s, of which Python itself is about a quarter of a second (scripts/bench_jdbc.py)."""


IDENTITY = "identity"
"""Kept with each commit (`state.identity`): the dialect's identity of the server and the table (`Dialect.identity`)."""


def _changed_identity(plan: TablePlan, kept: Any, now: dict[str, Any]) -> str | None:
    """Why the table read now is not the one the committed watermark was read from (another server, a table dropped
    and created again), naming both values; None when it is, or when either side kept nothing of a value."""
    if not isinstance(kept, dict):
        return None
    what = {"system": "PostgreSQL cluster (system identifier)", "oid": "table (relation oid)"}
    for key, name in what.items():
        if kept.get(key) is not None and now.get(key) is not None and kept[key] != now[key]:
            return (f"{plan.where_label}: the committed watermark was read from {name} {kept[key]}, and it is now "
                    f"{now[key]} (a table dropped and created again, or a server restored from a backup): its rows "
                    "below the committed watermark were never read, and the output may hold rows the table no longer "
                    f"has. Not read: check the output, then load the table again with `gobblin-py state reset JOB.yaml "
                    f"--dataset {plan.dataset}` (or `--to` a position), which forgets the kept identity")
    return None


class JdbcSource(Source):
    """One WorkUnit per sub-range of each table's new watermark range (and per hole a failed sub-range left)."""

    Settings = JdbcSettings
    split_type = JdbcSplit
    keeps_key_stats = True

    @classmethod
    def schema_kind(cls, settings: JdbcSettings) -> SchemaKind:
        """Each table's Avro schema is made from its columns."""
        return SchemaKind.AVRO

    def get_workunits(self, state: SourceState) -> list[WorkUnit | MultiWorkUnit]:
        s: JdbcSettings = self.settings
        state.report_listed(t.table for t in s.tables)  # a table taken out of the job is named, not "no new data"
        dialect = s.dialect
        conn = dialect.connect(s)
        units: list[WorkUnit] = []
        try:
            for i, t in enumerate(s.tables):
                units += self._for_table(s, conn, i, t, lambda plan: self._plan_table(conn, plan, state))
        finally:
            dialect.close(conn)
        return worst_fit_decreasing(units, s.max_workunits, lambda u: self.estimated_bytes(u, state))

    def warm_up(self) -> None:
        """The dialect's driver and native reader, and the extractor's module: 0.15 s a 2M-row first load's first
        tasks waited on (scripts/bench_jdbc.py)."""
        self.settings.dialect.warm_up(self.settings.reader)
        importlib.import_module("gobblin_py.builtin.sources.jdbc.extractor")

    def backlog(self, state: SourceState, timeout_s: float) -> list[DatasetLag]:
        """Per table, `max(watermark column)` − the committed position (seconds for time columns), and the rows not yet
        committed (above it, and in the holes a failed sub-range left) unless `lag_count_rows` is off or the count
        outlasts the timeout; every query cut off by a statement timeout of `timeout_s`."""
        s: JdbcSettings = self.settings.model_copy(update={
            "statement_timeout": max(1, int(timeout_s * 1000)),
            "connect_timeout_s": max(1, min(self.settings.connect_timeout_s, int(timeout_s)))})
        dialect = s.dialect
        conn = dialect.connect(s)
        out: list[DatasetLag] = []
        try:
            for i, t in enumerate(s.tables):
                try:
                    out.append(self._for_table(s, conn, i, t, lambda plan: self._table_lag(conn, s, plan, state)))
                except (ConfigError, SourceError) as exc:
                    out.append(unmeasured(t.table, str(exc), "rows"))
        finally:
            dialect.close(conn)
        return out

    def _for_table(self, s: JdbcSettings, conn: Any, i: int, t: TableSettings, body: Callable[[TablePlan], T]) -> T:
        """`body` of the i-th table's plan; a driver failure raised as the error naming the table and what to fix."""
        label = f"table {t.table} (source.tables[{i}])"
        try:
            return body(self._resolve(conn, t, label))
        except Exception as exc:
            failure = s.dialect.failure(exc)
            if failure is None:
                raise
            raise planning_error(s, t.table, label, i, failure, exc) from None

    @staticmethod
    def _table_lag(conn: Any, s: JdbcSettings, plan: TablePlan, state: SourceState) -> DatasetLag:
        t = plan.settings
        done = committed(plan.kind, state.watermarks(plan.dataset), f"dataset {plan.dataset}")
        q = s.dialect.queries(t, plan.schema_name, plan.table_name, [c.name for c in plan.columns], plan.kind, plan.where_label,
                              watermark_not_null=plan.watermark_not_null)
        newest, top = q.newest(conn), done.top
        ahead = newest is not None and (top is None or newest > top)
        rows = None
        if s.lag_count_rows:
            try:
                rows = sum(q.count_range(conn, r) for r in [*done.holes(), *([Range(top, newest)] if ahead else [])])
            except Exception as exc:
                if s.dialect.failure(exc) is not Failure.TIMEOUT:
                    raise
                log.info("%s: the rows above the committed watermark were not counted within the timeout", plan.where_label)
        gap = (newest - top if ahead else 0) if top is not None and newest is not None else None
        if plan.kind != WatermarkKind.INTEGER:  # the gap of two times (or dates) in seconds
            return DatasetLag(plan.dataset, records=rows, seconds=gap.total_seconds() if gap else None, unit="rows")
        if rows is None:  # not counted: the gap in the column's own units
            return DatasetLag(plan.dataset, records=None if gap is None else int(gap), unit=t.watermark_column)
        return DatasetLag(plan.dataset, records=rows, unit="rows")

    def estimated_bytes(self, workunit: WorkUnit, state: SourceState) -> float:
        """Estimated rows × the table's bytes per row: of its last extraction, else the catalog's (a first load),
        else 1 KiB."""
        last = [v for v in state.key_stats(workunit.dataset).values() if v.get("records")]
        if last:
            per_row = sum(v["bytes"] for v in last) / sum(v["records"] for v in last)
        else:
            per_row = JdbcSplit.of(workunit).catalog_row_bytes or 1024.0
        return JdbcSplit.of(workunit).estimated_rows * per_row

    def native_share(self, workunit: WorkUnit, converted: bool) -> float:
        """A native reader (`reader`) streams binary rows into Arrow outside Python's lock: Python only hands on each
        batch (see `NATIVE_SHARE`). Its Arrow goes to the writer as it is: a converter takes the row path."""
        s: JdbcSettings = self.settings
        return NATIVE_SHARE if not converted and s.dialect.reads_natively(s.reader, JdbcSplit.of(workunit).native) else 0.0

    def _resolve(self, conn: Any, t: TableSettings, label: str) -> TablePlan:
        """The table's canonical name and columns; an unknown table or column is a ConfigError naming it."""
        s: JdbcSettings = self.settings
        found = s.dialect.resolve_table(conn, t.table)
        if found is None:
            raise ConfigError(f"{label}: no such table or view in database {s.database} on "
                              f"{s.endpoint}; give it {s.dialect.table_hint}")
        schema_name, table_name, available = found
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
        kind = s.dialect.watermark_kind(wm)
        if kind is None:
            raise ConfigError(f"{label}: watermark_column {wm.name!r} has type {wm.declared}; it must be "
                              f"{s.dialect.watermark_types}")
        return TablePlan(t, schema_name, table_name, selected, kind, label)

    def _plan_table(self, conn: Any, plan: TablePlan, state: SourceState) -> list[WorkUnit]:
        s: JdbcSettings = self.settings
        t = plan.settings
        done = committed(plan.kind, state.watermarks(plan.dataset), f"dataset {plan.dataset}")
        identity = s.dialect.identity(conn, plan.schema_name, plan.table_name)
        started = done.high is not None or done.first is not None
        changed = _changed_identity(plan, state.kept(plan.dataset).get(IDENTITY), identity) if started else None
        if changed is not None:
            state.report_input_problem(plan.dataset, changed)
            return []
        q = s.dialect.queries(t, plan.schema_name, plan.table_name, [c.name for c in plan.columns], plan.kind,
                              plan.where_label, watermark_not_null=plan.watermark_not_null)
        bound = q.upper_bound(conn, s)
        high = bound.high
        if done.high is None:
            far = far_from_clock(t.table, t.watermark_column, bound)
            if far is not None:
                state.report_notice(plan.dataset, far)
        else:
            if bound.wall_clock and bound.newest is not None and done.top > bound.newest:
                state.report_notice(plan.dataset, f"the committed position of {t.table} ({encode(done.top)}) is past the "
                                    f"newest {t.watermark_column} ({encode(bound.newest)}): a run bounded by the clock (before "
                                    "the bound by the data), or rows deleted since; rows written below it are never "
                                    "extracted: reset the dataset to reload them")
            nulls = q.count_nulls(conn)
            if nulls:
                self._unextracted(plan, state, f"{nulls} row(s) of {t.table} have NULL in {t.watermark_column}: incremental "
                                  f"runs never extract them (only a first load does); give them a {t.watermark_column}, or "
                                  "reset the dataset to reload")
        infinite = q.count_infinite(conn)
        if infinite:
            self._unextracted(plan, state, f"{infinite} row(s) of {t.table} have infinity or -infinity in "
                              f"{t.watermark_column}: no run extracts them (no Avro timestamp holds them); give them a "
                              f"finite {t.watermark_column}")
        self._report_column_changes(plan, state)
        holes = done.holes()  # extracted even when empty: that closes them
        top = done.top
        fresh = Range(top, high) if high is not None and (top is None or high > top) else None
        schema = avro_schema(t.table, plan.columns)
        parts = t.partitions or s.partitions
        if done.high is None and not done.islands and (done.first is not None or s.first_load_split == "key"):
            by_key = self._plan_by_key(conn, plan, q, done, high, schema, parts, identity)
            if by_key is not None:
                return by_key
        slots = done.free_slots()
        subs: list[tuple[Range, str, float]] = []  # (sub-range, its key, its estimated rows)
        ranges: list[Range] = []
        planned = 0
        for r in [*holes, *([fresh] if fresh else [])]:
            rows, bounds = q.split(conn, r, parts)
            if r is fresh and rows == 0:
                continue  # nothing new: no task, the watermark stays (the next run's range starts there)
            ranges.append(r)
            planned += rows
            edges = [r.lo, *bounds, r.hi]
            for lo, hi in zip(edges, edges[1:]):
                key = HIGH if lo == done.high else f"{DONE_PREFIX}{next(slots)}"
                subs.append((Range(lo, hi), key, rows / (len(edges) - 1)))
        if not subs:
            return []
        first_load = not any(v.get("records") for v in state.key_stats(plan.dataset).values())
        per_row = catalog_row_bytes(q.table_size(conn), planned) if first_load else None
        units = [self._workunit(plan, sub, key, done, schema, rows, identity, per_row) for sub, key, rows in subs]
        log.info("%s: extracting %s in %d work unit(s)", plan.where_label,
                 ", ".join(f"({encode(r.lo)}, {encode(r.hi)}]" for r in ranges), len(units))
        return units

    def _plan_by_key(self, conn: Any, plan: TablePlan, q: TableQueries, done: Committed, high: Any, schema: dict, parts: int,
                     identity: Any) -> list[WorkUnit] | None:
        """A first load in `parts` slices of the table's integer primary key (a range scan each, no count), every row
        with a watermark up to `high` (taken before any slice is read) or none; a first load left partly published goes
        on with its own high and the slices not yet published. None: no such key (the watermark split is used)."""
        column, first = q.key_column(conn), done.first
        if first is not None:
            if column != first.column:
                raise SourceError(f"{plan.where_label}: its first load was split on {first.column}, and "
                                  f"{column or 'no single integer column'} is the table's primary key now: the slices "
                                  "not yet published cannot be read; load the table again with `gobblin-py state reset "
                                  f"JOB.yaml --dataset {plan.dataset}`")
            top, slices, slots = first.high, first.missing(), first.free_slots()
        else:
            if column is None or high is None:
                return None
            edges = [None, *q.key_split(conn, column, parts), None]
            top, slices, slots = high, [KeyRange(a, b) for a, b in zip(edges, edges[1:])], itertools.count(1)
        size = q.table_size(conn)
        rows = size[1] if size is not None else 0.0
        per_row = catalog_row_bytes(size, int(rows))
        units = [self._workunit(plan, Range(None, top), f"{FIRST_PREFIX}{next(slots)}", done, schema,
                                rows / max(parts, len(slices)), identity, per_row, keys=(column, k)) for k in slices]
        log.info("%s: first load up to %s=%s in %d slice(s) of %s", plan.where_label, plan.settings.watermark_column,
                 encode(top), len(units), column)
        return units

    def _unextracted(self, plan: TablePlan, state: SourceState, message: str) -> None:
        """Rows the plan leaves out for their watermark: a warning, or an input problem under `null_watermark: report`."""
        if self.settings.null_watermark == "report":
            state.report_input_problem(plan.dataset, message)
        else:
            log.warning("%s", message)

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

    def _workunit(self, plan: TablePlan, r: Range, key: str, done: Committed, schema: dict, rows: float,
                  identity: Any, per_row: float | None, keys: tuple[str, KeyRange] | None = None) -> WorkUnit:
        """The WorkUnit of `r` (of its slice `keys` of the primary key, a first load's), named by database, table,
        selection and range; its key's value is what it publishes. The dataset state keeps the table's identity and
        its columns (the next plan compares both)."""
        s: JdbcSettings = self.settings
        t = plan.settings
        lo, hi = encode(r.lo), encode(r.hi)
        columns = [c.name for c in plan.columns]
        column, k = keys if keys is not None else (None, KeyRange(None, None))
        sliced = "" if column is None else f".{column}.{k.lo if k.lo is not None else 'start'}-{k.hi if k.hi is not None else 'end'}"
        wu_id = workunit_id(f"{t.table}.{lo if lo is not None else 'start'}-{hi}{sliced}", "jdbc", s.endpoint, s.database,
                            plan.schema_name, plan.table_name, t.watermark_column, ",".join(columns), t.where or "",
                            str(lo), str(hi), *([] if column is None else [column, str(k.lo), str(k.hi)]))
        value = (k.first_value(column, r.hi) if column is not None else hi if key == HIGH else r.done_value(done.high))
        return WorkUnit(id=wu_id, dataset=plan.dataset, watermark_key=key, low_watermark=lo, expected_high_watermark=value,
                        props={f"state.{IDENTITY}": identity, "state.columns": columns},
                        split=JdbcSplit(table=t.table, schema_name=plan.schema_name, table_name=plan.table_name,
                                        columns=columns, casts={c.name: c.cast for c in plan.columns if c.cast},
                                        native=s.dialect.native_reads(plan.columns), kind=plan.kind,
                                        watermark_not_null=plan.watermark_not_null, lo=lo, hi=hi,
                                        avro_schema=schema, estimated_rows=rows, catalog_row_bytes=per_row,
                                        key_column=column, key_lo=k.lo, key_hi=k.hi).packed())

    def endpoints(self, workunit: WorkUnit) -> list[str]:
        """The database every task reads from: once a task gives up on it, the run's others do not try."""
        return [self.settings.endpoint]

    def get_extractor(self, workunit: WorkUnit, context: TaskContext) -> Extractor:
        from gobblin_py.builtin.sources.jdbc.extractor import JdbcExtractor

        return JdbcExtractor(self.settings, workunit, context)


def catalog_row_bytes(size: tuple[float, float] | None, planned: int) -> float | None:
    """Bytes per row from the catalog's table size and row estimate (the planned rows when it has none yet: a table
    not analyzed since its load); None when the catalog does not say."""
    if size is None or size[0] <= 0:
        return None
    table_bytes, rows = size
    return table_bytes / max(rows if rows > 0 else planned, 1)


def planning_error(s: JdbcSettings, table: str, label: str, i: int, failure: Failure, exc: BaseException) -> Exception:
    """A driver failure while planning `table`, named for the operator: an unknown column is a setting to fix."""
    text = s.dialect.message(exc)
    if failure is Failure.TIMEOUT:
        return timeout_error(s, table, "planning (the range's row count and quantiles)")
    if failure is Failure.UNKNOWN_COLUMN:
        return ConfigError(f"{label}: {text}; check watermark_column, primary_key, columns and where")
    if failure is Failure.CONNECTION_LOST:
        return SourceError(f"{label}: lost the connection to {s.endpoint} while planning: {text}")
    detail = describe(exc) if text == first_line(str(exc)) else f"{type(exc).__name__}: {text}"
    return SourceError(f"{label}: planning query failed: {detail} (check source.tables[{i}].where)")
