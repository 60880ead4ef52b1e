"""Reads one sub-range `(lo, hi]` of a table through a server-side cursor, `fetch_rows` rows per round trip, ordered
by watermark and primary key: never the whole range in memory."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from gobblin_py.api import Extractor, TaskContext, WorkUnit
from gobblin_py.api.types import Record, Schema, WatermarkValue
from gobblin_py.builtin.jdbc_ranges import Range, decode
from gobblin_py.builtin.jdbc_source import REMEDY, JdbcSettings, Queries, connect, first_line, timeout_error
from gobblin_py.errors import ConfigError, SourceError, UnreachableError

log = logging.getLogger(__name__)


class JdbcExtractor(Extractor):
    """Yields the rows of one planned sub-range as dicts of Python values the Avro writer encodes."""

    def __init__(self, settings: JdbcSettings, workunit: WorkUnit, context: TaskContext) -> None:
        self.settings = settings
        self.workunit = workunit
        self.context = context
        p = workunit.props
        self.table = p["table"]
        [self.table_settings] = [t for t in settings.tables if t.table == self.table]
        self.range = Range(decode(p["kind"], p["lo"], self.table), decode(p["kind"], p["hi"], self.table))
        self.queries = Queries(self.table_settings, p["schema_name"], p["table_name"], p["columns"], p["kind"], self.table,
                               p.get("casts"))
        self.conn: Any = None
        self.last: Record | None = None
        self.rows = 0

    def get_schema(self) -> Schema:
        return self.workunit.props["avro_schema"]

    def actual_high_watermark(self) -> WatermarkValue:
        return self.workunit.expected_high_watermark  # only a task that read its whole range is ever committed

    def location(self) -> str:
        t = self.table_settings
        if self.last is None:
            return f"{self.table} ({self.workunit.props['lo']}, {self.workunit.props['hi']}]"
        keys = ", ".join(f"{k}={self.last.get(k)!r}" for k in t.key_columns)
        return f"{self.table} row {self.rows} ({t.watermark_column}={self.last.get(t.watermark_column)!s}, {keys})"

    def read_records(self) -> Iterator[Record]:
        import psycopg

        s = self.settings
        self.conn = conn = connect(s, in_task=True)
        conn.autocommit = False  # a server-side cursor lives in a transaction
        query, params = self.queries.select(self.range)
        names = self.workunit.props["columns"]
        try:
            # binary rows: psycopg's C loaders take ints, timestamps and numerics without parsing text (as COPY BINARY)
            with conn.cursor(name=f"gobblin_{self.workunit.id[-32:]}", binary=True) as cur:
                cur.itersize = s.fetch_rows
                cur.execute(query, params)
                while True:
                    batch = cur.fetchmany(s.fetch_rows)
                    if not batch:
                        break
                    for row in batch:
                        record = dict(zip(names, row))
                        self.last = record
                        self.rows += 1
                        yield record
        except psycopg.errors.QueryCanceled:
            raise timeout_error(s, self.table, f"reading ({self.workunit.props['lo']}, {self.workunit.props['hi']}]") from None
        except (psycopg.errors.UndefinedColumn, psycopg.errors.UndefinedTable) as exc:
            raise ConfigError(f"table {self.table}: {first_line(str(exc))} (changed since planning?); the next run plans "
                              "from the table as it is then") from None
        except psycopg.OperationalError as exc:
            raise UnreachableError(f"lost the connection to {s.endpoint} reading {self.location()}: {first_line(str(exc))}",
                                   s.endpoint, REMEDY) from None
        except psycopg.DataError as exc:
            raise SourceError(f"{self.location()}: a value cannot be read ({first_line(str(exc))}); leave the column out "
                              "with source.tables[].columns or filter the row with where") from None

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.rollback()
                self.conn.close()
            except Exception:  # noqa: BLE001 - closing after a lost connection must not hide the read's error
                log.debug("closing the connection to %s failed", self.settings.endpoint, exc_info=True)
            self.conn = None
