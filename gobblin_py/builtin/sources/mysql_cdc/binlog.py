"""One table's committed changes in a binlog range, read with mysql-replication (a non-blocking binlog dump).

A transaction's position is where its commit event ends (an XID event, or a `COMMIT` query for a non-transactional
table; a DDL statement is its own transaction): a range `(low, end]` holds the transactions whose commit ends in it, so
a transaction is wholly in one range. Reading starts at `low` (always a transaction's end, or the binlog's end when a
position was taken) and stops at the first event at or past `end`.

Row events name their values by the column names they carry (`binlog_row_metadata = FULL`, checked at planning):
names that differ from the planned columns mean the table changed in the range (ALTER TABLE), and the read fails
naming the columns and the position. An ALTER, RENAME or DROP of the table in the range fails the same way; a TRUNCATE
is a change of its own (`truncate`). A `DELETE` carries the whole old row (binlog_row_image FULL)."""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from gobblin_py.builtin.sources.mysql_cdc import position
from gobblin_py.builtin.sources.mysql_cdc.settings import MysqlCdcSettings
from gobblin_py.errors import SourceError

log = logging.getLogger(__name__)

DDL = re.compile(r"^\s*(?:/\*.*?\*/\s*)*(alter\s+(?:online\s+|ignore\s+)*table|truncate(?:\s+table)?|"
                 r"drop\s+table(?:\s+if\s+exists)?|rename\s+table|create\s+(?:or\s+replace\s+)?table)\s+(.*)$",
                 re.IGNORECASE | re.DOTALL)
NAME = re.compile(r"\s*((?:`[^`]+`|[\w$]+)(?:\s*\.\s*(?:`[^`]+`|[\w$]+))?)")


class Change(NamedTuple):
    """One row change of the table: `op` insert, update, delete or truncate; `before`/`after` the row images. A
    named tuple, one a changed row: a frozen dataclass's construction was ~3 % of a continuous run's samples."""

    op: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    pos: int  # the transaction's commit position
    ts: int  # when the transaction's commit event was written (seconds since the epoch)
    xid: int | None


def tables_named(query: str, default_db: str) -> tuple[str, list[str]]:
    """(the statement's kind, the `db.table`s it names first) of a DDL statement, or ("", []) for another one."""
    m = DDL.match(query)
    if not m:
        return "", []
    kind = " ".join(m.group(1).lower().split()[:2]).replace(" online", "").replace(" ignore", "")
    names = []
    rest = m.group(2)
    while (n := NAME.match(rest)) is not None:
        parts = [p.strip().strip("`") for p in re.split(r"`?\s*\.\s*`?", n.group(1))]
        names.append(".".join(parts) if len(parts) == 2 else f"{default_db}.{parts[0]}")
        rest = rest[n.end():]
        if not (kind.startswith("rename") or kind.startswith("drop") or kind.startswith("truncate")):
            break
        sep = re.match(r"\s*(,|to)\s*", rest, re.IGNORECASE)
        if sep is None:
            break
        rest = rest[sep.end():]
    return kind, names


@dataclass(frozen=True)
class Rows:
    """One table's row events of one committed transaction: each event's position, its column names and its rows
    (op, before, after); `pos` is the transaction's commit position."""

    table: str  # `database.table`
    pos: int
    ts: int
    xid: int | None
    events: list[tuple[int, list[str | None], list[tuple[str, dict[str, Any] | None, dict[str, Any] | None]]]]


@dataclass(frozen=True)
class Statement:
    """A DDL statement naming the table (`kind`: alter table, truncate, drop table, rename table, create table)."""

    table: str
    pos: int
    ts: int
    kind: str
    text: str


def read(s: MysqlCdcSettings, database: str, table: str, columns: list[str], low: int, end: int, base: str,
         width: int) -> Iterator[Change]:
    """Every change of `database.table` in transactions committing in `(low, end]`, in binlog order."""
    dataset = f"{database}.{table}"
    yield from changes(scan(s, [dataset], low, end, base, width), dataset, columns, low, end, base)


def changes(parts: Iterable[Rows | Statement], dataset: str, columns: list[str], low: int, end: int,
            base: str) -> Iterator[Change]:
    """The changes of `dataset` in `parts` (what `scan` gave for it) whose transaction commits in `(low, end]`: each
    row event's columns checked against the planned ones, a DDL statement naming the table a truncate or a failure."""
    for part in parts:
        if part.table != dataset or not low < part.pos <= end:
            continue
        if isinstance(part, Statement):
            if part.kind.startswith("truncate"):
                yield Change("truncate", None, None, part.pos, part.ts, None)
            elif not part.kind.startswith("create"):
                raise SourceError(
                    f"table {dataset} changed in the binlog range read: `{' '.join(part.text.split())[:200]}` "
                    f"at {position.text(part.pos, base)}. Nothing of this run is committed for it; its "
                    "changes after the statement have other columns (or another table). Snapshot it "
                    "again: `gobblin-py state reset JOB.yaml --dataset "
                    f"{dataset} --yes`, then run")
            continue
        for at, names, rows in part.events:
            _check_columns(dataset, names, columns, at, base)
            for op, before, after in rows:
                yield Change(op, before, after, part.pos, part.ts, part.xid)


def scan(s: MysqlCdcSettings, tables: list[str], low: int, end: int, base: str, width: int,
         committed: Callable[[], None] | None = None, fast: bool = True) -> Iterator[Rows | Statement]:
    """One read of the binlog from `low` (a transaction's end) to the first transaction's end at or past `end`: each
    of `tables`' (`database.table`) row events, grouped by table and transaction, given at its commit, and each DDL
    statement naming one of them; routed by the (schema, table) of the row event's table map, each event's rows decoded
    once. `committed` is called at each commit that carries rows of `tables`.

    A table map is parsed once per table id (`freeze_schema`), not before every row event, which about halved the
    read's time: the server gives a table a new id whenever its definition is loaded again (an ALTER, a flush), so an id
    names one definition while the server runs. Ids start again after a restart, which always begins a new binlog
    file, so the parsed maps are dropped at every RotateEvent (the library drops them only at a timestamped one, which
    a restart does not write). The rows' values are decoded by `rows.decode` where it is proven equal to the library
    (`fast`), and the common events are parsed from the packets by `events.BinlogReader` (`fast`; False leaves every
    event and row to the library, as the equality test compares). With `fast`, the library's rows are made what
    `rows.decode` gives (ENUM and SET labels in the column's charset, a SET as the snapshot's text: `rows.relabel`,
    `rows.library_image`)."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import NotImplementedEvent, QueryEvent, RotateEvent, XidEvent
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    from gobblin_py.builtin.sources.mysql_cdc.events import COMPRESSED, BinlogReader, ParsedRows, compressed_error
    from gobblin_py.builtin.sources.mysql_cdc.rows import decode as rows_decode
    from gobblin_py.builtin.sources.mysql_cdc.rows import library_image

    def lib(image: dict[str, Any], nones: dict[str, str], columns: list[Any]) -> dict[str, Any]:
        return library_image(image, nones, columns) if fast else image

    if end <= low:
        return
    wanted = set(tables)
    start = position.of_value(low, base, width)
    args = s.connection_args()
    options = dict(connection_settings=args, server_id=s.server_id + random.randrange(1 << 20), blocking=False,
                   resume_stream=True, log_file=start.file, log_pos=start.offset,
                   # unknown events too: the library would pass over a compressed row event as one, losing its changes
                   only_events=[RotateEvent, XidEvent, QueryEvent, WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent,
                                NotImplementedEvent], filter_non_implemented_events=False,
                   only_schemas=sorted({t.split(".")[0] for t in tables}),
                   only_tables=sorted({t.split(".")[1] for t in tables}), enable_logging=False, freeze_schema=True)
    stream = BinlogReader(wanted, **options) if fast else BinLogStreamReader(**options)
    log.info("binlog of %s read from %s to %s for %d table(s)", s.endpoint, position.text(low, base),
             position.text(end, base), len(wanted))
    held: dict[str, list[tuple[int, list[str | None], list[Any]]]] = {}
    here = low
    file, number = "", 0
    try:
        for event in stream:
            if stream.log_file != file:  # parsed once per file, not per event
                file, number = stream.log_file, position.parse(stream.log_file, 0).number << 32
            here = number | int(stream.log_pos)
            if isinstance(event, RotateEvent):
                stream.table_map.clear()  # a new file: its table ids may name other tables (see `scan`)
                if here > end and not held:
                    break
                continue
            if isinstance(event, NotImplementedEvent):
                if event.event_type in COMPRESSED:
                    raise SourceError(compressed_error(event.event_type, position.text(here, base), sorted(wanted)))
                continue
            parsed = type(event) is ParsedRows
            if parsed or isinstance(event, (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)):
                dataset = f"{event.schema}.{event.table}"
                if dataset not in wanted:
                    continue
                images = event.images if parsed else rows_decode(event) if fast else None
                if images is not None:
                    kind = event.kind if parsed else type(event)
                    op = "insert" if kind is WriteRowsEvent else "update" if kind is UpdateRowsEvent else "delete"
                    rows = [(op, before, after) for before, after in images]
                elif isinstance(event, WriteRowsEvent):
                    rows = [("insert", None, lib(row["values"], row["none_sources"], event.columns))
                            for row in event.rows]
                elif isinstance(event, UpdateRowsEvent):
                    rows = [("update", lib(row["before_values"], row["before_none_sources"], event.columns),
                             lib(row["after_values"], row["after_none_sources"], event.columns)) for row in event.rows]
                else:
                    rows = [("delete", lib(row["values"], row["none_sources"], event.columns), None)
                            for row in event.rows]
                held.setdefault(dataset, []).append((here, [c.name for c in event.columns], rows))
                continue
            commit = isinstance(event, XidEvent)
            xid = int(event.xid) if commit else None
            if isinstance(event, QueryEvent):
                text = event.query.decode("utf-8", "replace") if isinstance(event.query, bytes) else str(event.query)
                default = event.schema.decode() if isinstance(event.schema, bytes) else str(event.schema or "")
                if text.strip().upper() == "COMMIT":
                    commit = True
                elif text.strip().upper() != "BEGIN":
                    kind, names = tables_named(text, default)
                    for name in names:
                        if name in wanted and low < here <= end:
                            yield Statement(name, here, int(event.timestamp), kind, text)
            if commit:
                if held and low < here <= end:
                    if committed is not None:
                        committed()
                    for dataset, events in held.items():
                        yield Rows(dataset, here, int(event.timestamp), xid, events)
                held = {}
            if here >= end and not held:
                break
        else:  # the end of the binlog: where the reader stands, past the events it left out (a new file's header)
            here = max(here, (position.parse(stream.log_file, 0).number << 32) | int(stream.log_pos or 0))
            if here < end:
                raise SourceError(f"the binlog of {s.endpoint} ended at {position.text(here, base)} before the planned "
                                  f"end {position.text(end, base)} (reset or purged while the run read it); nothing of "
                                  "this run is committed: run again")
    finally:
        stream.close()


def _check_columns(dataset: str, have: list[str | None], planned: list[str], at: int, base: str) -> None:
    if have == planned:
        return
    if any(n is None or str(n).startswith("UNKNOWN_COL") for n in have):
        raise SourceError(f"table {dataset}: a row event at {position.text(at, base)} carries no column names "
                          "(written while binlog_row_metadata was not FULL): its values cannot be named safely. "
                          f"Snapshot the table again: `gobblin-py state reset JOB.yaml --dataset {dataset} --yes`")
    added = [n for n in have if n not in planned]
    dropped = [n for n in planned if n not in have]
    what = "; ".join(x for x in (f"added {', '.join(map(str, added))}" if added else "",
                                 f"dropped {', '.join(dropped)}" if dropped else "",
                                 "columns reordered" if not added and not dropped else "") if x)
    raise SourceError(f"table {dataset} changed (ALTER TABLE: {what}) before the change at {position.text(at, base)}: "
                      "its rows no longer have the planned columns. Nothing of this run is committed for it. Snapshot "
                      f"it again: `gobblin-py state reset JOB.yaml --dataset {dataset} --yes`, then run")
