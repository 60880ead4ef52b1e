"""Chunked incremental snapshots: a table's chunk plan as its state keeps it, and the per-key filter its stream applies.

The algorithm (DBLog's and Flink CDC's idea, with PostgreSQL's snapshot visibility in place of watermark events in
the log). A table to snapshot is split by its primary key into chunks, key ranges of about `snapshot_chunk_rows` rows
with boundaries fixed once, when the plan is made. Each run reads at most `snapshot_chunks_per_run` pending chunks,
each as a WorkUnit of its own (parallel tasks, outside the slot's MultiWorkUnit), in a short REPEATABLE READ
transaction of its own whose `pg_current_snapshot()` is committed with the chunk. A chunk task starts after the run's
end T was flushed, so its snapshot sees every transaction committing before T; its rows are `_op: read` with `_lsn`
T − 1, below every change its snapshot does not see (those commit at or after T).

Meanwhile the table's stream (its WorkUnit in the slot's task) reads every run from its own watermark, and keeps a
change of key k by k's chunk:
- chunk committed in an earlier run with snapshot S: kept iff S does not see the change's transaction (S holds the
  others: they are in the chunk's rows already);
- chunk not committed yet (pending, or read in this very run): dropped, since the chunk's read, whose snapshot is
  taken after this run's end, sees it; but in a re-snapshot (`gobblin-py snapshot --table`) of a table whose rows
  are in the output already, a delete is kept: the chunk's read, which comes after it, cannot delete the row.
An update that moves a row to another key is a delete of the old key and an update of the new one: each is judged by
its own key's chunk, so a row moving from chunk A to chunk B is removed from A's rows and put into B's exactly when
that chunk's rows lack it. A truncate is kept iff no committed chunk's snapshot sees it (a chunk read after it holds
only rows written after it); committed chunks on both sides of it cannot be made right by one record: the table
fails, naming the re-snapshot.

The first run of a table's plan that has no stream position (a table new to the output, or reset) begins with one
truncate record at (T - 1, -1), before every chunk's rows: the snapshot replaces what a consumer held of the table, as
the one-transaction snapshot does (the output then holds only the chunks read so far until the last one is).

Once every chunk is committed, the filter is kept until the stream has passed the end T of a run planned when the
server's oldest running transaction (`pg_current_snapshot()` xmin) was at or past every chunk snapshot's xmax: every
change from T on is then invisible to every chunk snapshot, so the filter keeps them all and is dropped (`done_at`).

The state (`state.chunked`, one list replaced whole at every commit): the plan's id, its key columns and their types
(an identity: another key fails closed), the boundaries, each chunk's snapshot (null: pending) and `done_at`. A chunk
task reports its snapshot as its watermark (key `chunk.<j>`, j < chunks_per_run, value `<plan>:<chunk>:<snapshot>`);
the next plan folds those into the state, which every work unit of the table carries, so whichever of them commits
keeps it. A crash loses at most the chunks of the run it hit.
"""

from __future__ import annotations

import uuid
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

from gobblin_py.builtin.sources.postgres_cdc.visibility import Snapshot
from gobblin_py.errors import SourceError

FORMAT = "chunked/1"
KEPT_NAME = "chunked"
"""The dataset state's entry (`state.chunked`) that keeps the table's chunk plan."""
RESNAPSHOT = "resnapshot"
"""The dataset state's entry `gobblin-py snapshot --table` sets: the next plan starts a fresh chunked snapshot (no
work unit carries it, so the first commit of that plan clears it)."""
CHUNK_KEY = "chunk."
"""Watermark keys `chunk.<j>`: the snapshot of the chunk a run's j-th chunk task read."""

KEY_TYPES = {20: "bigint", 21: "smallint", 23: "integer", 25: "text", 1043: "text", 2950: "uuid"}
"""Base type oid → the SQL type a key column of it is compared as: integers, text (in byte order: COLLATE "C", which
is Python's str order), uuid (bytewise, as its canonical text orders)."""


def normal(value: Any) -> Any:
    """A key value as chunk boundaries hold it (a uuid as its canonical lower-case text, which orders as its bytes)."""
    return str(value).lower() if isinstance(value, uuid.UUID) else value


@dataclass
class ChunkPlan:
    """A table's chunked snapshot as its state keeps it (see the module's docstring)."""

    plan: str
    key: list[list[Any]]  # [[column, base type oid], …]: the chunking key, an identity checked every plan
    bounds: list[list[Any]]  # chunk i holds keys in [bounds[i-1], bounds[i]) (open at both ends)
    done: list[str | None] = field(default_factory=list)  # per chunk: its snapshot once committed
    done_at: int | None = None  # every chunk committed: the filter is dropped once the stream passes this LSN
    again: bool = False  # a re-snapshot of a table already captured: deletes of pending chunks are kept

    def __post_init__(self) -> None:
        if not self.done:
            self.done = [None] * (len(self.bounds) + 1)

    @property
    def columns(self) -> list[str]:
        return [c for c, _ in self.key]

    def pending(self) -> list[int]:
        return [i for i, snap in enumerate(self.done) if snap is None]

    def range(self, i: int) -> tuple[list[Any] | None, list[Any] | None]:
        """Chunk i's key range [low, high); None: open."""
        return (self.bounds[i - 1] if i > 0 else None, self.bounds[i] if i < len(self.bounds) else None)

    def kept(self) -> list[Any]:
        """As the state keeps it: a list, replaced whole at each commit (a dict would be merged key by key)."""
        return [FORMAT, {"plan": self.plan, "key": self.key, "bounds": self.bounds, "done": self.done,
                         "done_at": self.done_at, "again": self.again}]

    @classmethod
    def of_kept(cls, value: Any, dataset: str) -> ChunkPlan | None:
        """The plan a state kept (None: none); SourceError naming the table when it is not one this build reads."""
        if value is None:
            return None
        if not (isinstance(value, list) and len(value) == 2 and value[0] == FORMAT and isinstance(value[1], dict)):
            raise SourceError(f"table {dataset}: its state's chunk plan (state.{KEPT_NAME}) is not a {FORMAT} plan; "
                              f"snapshot it again: `gobblin-py state reset JOB.yaml --dataset {dataset} --yes`")
        body = value[1]
        return cls(body["plan"], body["key"], body["bounds"], list(body["done"]), body.get("done_at"),
                   bool(body.get("again")))

    def absorb(self, watermarks: dict[str, Any]) -> None:
        """Marks done the chunks whose snapshot a chunk task committed as its watermark (`chunk.<j>`) for this plan."""
        for key, value in watermarks.items():
            if not key.startswith(CHUNK_KEY) or not isinstance(value, str):
                continue
            plan, _, rest = value.partition(":")
            index, _, snap = rest.partition(":")
            if plan == self.plan and index.isdigit() and int(index) < len(self.done):
                self.done[int(index)] = snap

    def stream_filter(self) -> dict[str, Any]:
        """What the stream's split carries: the key, the bounds and the committed chunks' snapshots."""
        return {"key": self.columns, "bounds": self.bounds, "done": self.done, "again": self.again}


class ChunkFilter:
    """Whether the stream keeps a change, by its key's chunk (see the module's docstring)."""

    def __init__(self, table: str, carried: dict[str, Any]) -> None:
        self.table = table
        self.columns: list[str] = list(carried["key"])
        self.bounds = [tuple(b) for b in carried["bounds"]]
        self.done = [Snapshot(s) if s is not None else None for s in carried["done"]]
        self.again = bool(carried.get("again"))

    def skips(self, xid: int) -> bool:
        """Whether the stream keeps none of transaction `xid`'s changes, so it need not decode them (a reset table's
        changes of an older shape, which every chunk holds or will hold, are then no error): every committed chunk
        sees it, and no pending chunk's delete is kept (a re-snapshot's). Its truncate is dropped too: a plan's first
        run, the one run with no chunk committed, begins with a truncate of its own (or is a re-snapshot)."""
        if self.again and None in self.done:
            return False
        return all(snap is None or snap.sees(xid) for snap in self.done)

    def keeps(self, record: dict[str, Any], xid: int, where: str) -> bool:
        if record["_op"] == "truncate":
            return self._keeps_truncate(xid, where)
        chunk = self.done[bisect_right(self.bounds, tuple(normal(record[c]) for c in self.columns))]
        if chunk is None:  # the chunk's read holds the row as it is then; a re-snapshot's output may hold it already
            return self.again and record["_op"] == "delete"
        return not chunk.sees(xid)

    def _keeps_truncate(self, xid: int, where: str) -> bool:
        seen = {snap.sees(xid) for snap in self.done if snap is not None}
        if seen == {True, False}:
            raise SourceError(f"table {self.table} was truncated ({where}) while its chunked snapshot was being read: "
                              "chunks read before the truncate and after it are both committed, and no change record "
                              "can make both right. Nothing of this run is committed for it. Snapshot it again: "
                              f"`gobblin-py state reset JOB.yaml --dataset {self.table} --yes`, then run")
        return seen != {True}


def key_expressions(key: list[list[Any]]) -> list[Any]:
    """Each key column as chunk ranges compare it (text in byte order, COLLATE "C": Python's str order)."""
    from psycopg import sql

    return [sql.SQL('{} COLLATE "C"').format(sql.Identifier(c)) if KEY_TYPES[t] == "text" else sql.Identifier(c)
            for c, t in key]


def range_condition(key: list[list[Any]], low: list[Any] | None, high: list[Any] | None) -> Any:
    """The SQL condition `(key) >= (low) AND (key) < (high)` by row-value comparison, the bounds as typed literals."""
    from psycopg import sql

    row = sql.SQL("({})").format(sql.SQL(", ").join(key_expressions(key)))

    def literal(values: list[Any]) -> Any:
        return sql.SQL("({})").format(sql.SQL(", ").join(
            sql.SQL("{}::{}").format(sql.Literal(v), sql.SQL(KEY_TYPES[t])) for v, (_, t) in zip(values, key)))

    parts = ([sql.SQL("{} >= {}").format(row, literal(low))] if low is not None else []) + \
            ([sql.SQL("{} < {}").format(row, literal(high))] if high is not None else [])
    return sql.SQL(" AND ").join(parts) if parts else sql.SQL("true")
