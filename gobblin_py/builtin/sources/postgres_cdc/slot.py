"""The replication slot: what planning reads of it, and the commit step that advances it once the data is durable.

The step runs in every table's commit, right after that table's watermark step, and advances the slot to the lowest
committed watermark of all the run's tables (read from the state files when it runs, so whichever table commits
last moves the slot to the end): never past a position some table still needs. While one of them has no committed
watermark (its snapshot in this run not committed yet, or failed), the slot stays where it is: each snapshot covers the
WAL up to its own end, so two tables snapshotted in one run end at different positions, and a slot moved to the first
committed one's would drop the other's changes between the two. PostgreSQL refuses to move a slot backwards, so the step is idempotent by `verify()`: the slot's
`confirmed_flush_lsn` is at or past that lowest watermark. A slot that no longer exists has nothing to release: the
step is done, and the next run's planning names the loss.

Finding that lowest watermark reads every table's file, and the step runs once a table: a run of n tables read n²
files (2,500 at 50 tables, most of its commit time). Inside a lease epoch a table's committed position never moves
back (a run commits its end, at or past its low, `PostgresCdcSource.commit_steps` refuses anything else; a `state
reset` takes the lease at a new epoch), so any value once read is a lower bound of the table's position for the rest
of the epoch. The steps of a process keep those bounds (`_Floors`) and read again only the table holding the lowest
bound, until the lowest is one just read: about two files a step. Without a lease (no epoch) every file is read.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from gobblin_py.api.commit_step import CommitStep, writing_epoch
from gobblin_py.builtin.sources.postgres_cdc.settings import connect, lsn_int, lsn_text
from gobblin_py.errors import CommitError, GobblinError
from gobblin_py.fs.records import read_record, record_files

log = logging.getLogger(__name__)

_seen: dict[tuple[str, str], int] = {}  # (url, slot) → the highest confirmed_flush_lsn this process saw it at
_idle: dict[tuple[str, str | None, int], list[Any]] = {}  # (url, password_env, timeout) → connections steps left idle
_seen_lock = threading.Lock()

WATERMARK_KEY = "lsn"
"""The one watermark key of a table's dataset: every transaction committing before this LSN is in."""


def slot_row(conn: Any, slot: str) -> dict[str, Any] | None:
    """The slot's row of pg_replication_slots as a dict (`conflicting` exists from PostgreSQL 16); None: no such slot."""
    row = conn.execute("SELECT to_jsonb(s) FROM pg_replication_slots s WHERE slot_name = %s", (slot,)).fetchone()
    return row[0] if row is not None else None


def committed_lsn(state_dir: str, dataset: str) -> int | None:
    """The committed watermark of `dataset`, read as the state store writes it (`state.store.WatermarkFile`: the
    record `watermarks/<dataset, percent-quoted>.json` under the job's state location, a checked JSON body, in a local
    directory or on an object store); None: none yet."""
    found = read_record(record_files(state_dir), "watermarks/" + urllib.parse.quote(dataset, safe="") + ".json",
                        CommitError, "watermark file", "the slot is not advanced until it is readable")
    if found is None:
        return None
    value = (found[0].get("watermarks") or {}).get(WATERMARK_KEY)
    return int(value) if value is not None else None


class _Floors:
    """Per (state location, slot, lease epoch): for each table, a position its committed watermark has been read at in
    that epoch, so a lower bound of where it is now (see the module's docstring). Only the newest epoch of a slot is
    kept."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by: dict[tuple[str, str], tuple[int, dict[str, int]]] = {}

    def get(self, state_dir: str, slot: str, epoch: int) -> dict[str, int]:
        with self._lock:
            held = self._by.get((state_dir, slot))
            return dict(held[1]) if held is not None and held[0] == epoch else {}

    def raise_to(self, state_dir: str, slot: str, epoch: int, read: dict[str, int]) -> None:
        with self._lock:
            held = self._by.get((state_dir, slot))
            if held is None or held[0] < epoch:
                held = self._by[(state_dir, slot)] = (epoch, {})
            if held[0] == epoch:
                for table, mark in read.items():
                    held[1][table] = max(held[1].get(table, mark), mark)

    def forget(self, state_dir: str, slot: str) -> None:
        with self._lock:
            self._by.pop((state_dir, slot), None)


_floors = _Floors()


class PositionMovedBack(CommitError):
    """A table's committed position read lower than one read before in the same lease epoch."""


@dataclass
class SlotAdvanceStep(CommitStep):
    """Advance `slot` to the lowest committed watermark of `datasets` (see the module's docstring)."""

    type_name: ClassVar[str] = "postgres_cdc_slot_advance"

    url: str
    password_env: str | None
    slot: str
    state_dir: str
    datasets: list[str]
    dataset: str
    connect_timeout_s: int = 10
    busy_wait_s: float = 30.0

    def paths(self) -> list[str]:
        return [self.state_dir]  # the url is the database's, not a path this step writes

    def describe(self) -> str:
        return f"advance replication slot {self.slot} to the lowest committed position of its {len(self.datasets)} table(s)"

    def target(self, known: int = -1) -> int | None:
        """The lowest committed watermark over the tables; None (stay) while any of them has none.

        `known`: where the slot is known to be already. Once a table's watermark is at or below it, the lowest is too,
        so nothing is left to move: that watermark is returned without reading further. Inside a lease epoch only the
        table holding the lowest bound is read again (`_Floors`); a position found lower than a bound drops the bounds
        and every file is read."""
        if not self.datasets:
            return None
        epoch = writing_epoch()
        if epoch is None:
            return self._scan(known)
        try:
            return self._bounded(known, epoch)
        except PositionMovedBack as exc:
            log.warning("%s; every table's position is read again", exc)
            _floors.forget(self.state_dir, self.slot)
            return self._scan(known)

    def _scan(self, known: int) -> int | None:
        """Every table's file read, starting after this step's own (those whose commit has not run yet come first)."""
        at = self.datasets.index(self.dataset) + 1 if self.dataset in self.datasets else 0
        lowest: int | None = None
        for d in [*self.datasets[at:], *self.datasets[:at]]:
            mark = committed_lsn(self.state_dir, d)
            if mark is None:
                return None
            if mark <= known:
                return mark
            lowest = mark if lowest is None else min(lowest, mark)
        return lowest

    def _bounded(self, known: int, epoch: int) -> int | None:
        """The lowest, reading a table only while it holds the lowest bound and was not read by this call."""
        bounds = _floors.get(self.state_dir, self.slot, epoch)
        read: dict[str, int] = {}
        try:
            while True:
                unread = [d for d in self.datasets if d not in bounds]
                d = unread[0] if unread else min(self.datasets, key=lambda t: (read.get(t, bounds[t]), t not in read))
                if d in read:
                    return read[d]  # read now, and every other table is at or above its bound, which is at or above it
                mark = committed_lsn(self.state_dir, d)
                if mark is None:
                    return None
                if d in bounds and mark < bounds[d]:
                    raise PositionMovedBack(f"table {d}'s committed position {lsn_text(mark)} is below "
                                            f"{lsn_text(bounds[d])}, read earlier in lease epoch {epoch}")
                read[d] = bounds[d] = mark
                if mark <= known:
                    return mark
        finally:
            _floors.raise_to(self.state_dir, self.slot, epoch, read)

    def _known(self) -> int:
        """The highest position this process saw the slot at (-1: none)."""
        with _seen_lock:
            return _seen.get((self.url, self.slot), -1)

    def _connect(self) -> Any:
        try:
            return connect(self.url, self.password_env, self.connect_timeout_s, "5min")
        except GobblinError as exc:
            raise CommitError(f"{self.describe()}: {exc}; the next run advances it") from None

    @contextlib.contextmanager
    def _session(self) -> Iterator[Any]:
        """A connection to the slot's database: one a step of this process left idle (checked alive first), else a new
        one; kept for the next step when the work ended cleanly, else closed. The steps of a run's tables commit one
        after another on a few threads, and the run after a snapshot moves the slot at every table (each snapshot
        ended at its own position): a connection each would be two connections a table. Idle ones stay open for the
        process's life (a continuous run reuses them at each checkpoint), at most one per commit thread."""
        key = (self.url, self.password_env, self.connect_timeout_s)
        with _seen_lock:
            idle = _idle.get(key)
            conn = idle.pop() if idle else None
        if conn is not None and not _alive(conn):
            conn.close()
            conn = None
        if conn is None:
            conn = self._connect()
        clean = False
        try:
            yield conn
            clean = True
        finally:
            if clean and _idle_between_statements(conn):
                with _seen_lock:
                    _idle.setdefault(key, []).append(conn)
            else:
                conn.close()

    def _saw(self, position: int) -> None:
        """A slot never moves back (PostgreSQL refuses it; one dropped and made again starts at the WAL's end), so once
        seen at a position it is there or past it: the other tables' steps of the run need not connect to know it
        (50 tables: two connections, not 100). A server restored to an older slot at worst keeps WAL longer."""
        key = (self.url, self.slot)
        with _seen_lock:
            _seen[key] = max(_seen.get(key, position), position)

    def verify(self) -> bool:
        known = self._known()
        target = self.target(known)
        if target is None or known >= target:
            return True
        with self._session() as conn:
            row = slot_row(conn, self.slot)
        if row is None:
            log.warning("replication slot %s no longer exists: nothing to advance (the next run names what is lost)",
                        self.slot)
            return True
        if row.get("confirmed_flush_lsn") is None:
            return False
        self._saw(lsn_int(row["confirmed_flush_lsn"]))
        return lsn_int(row["confirmed_flush_lsn"]) >= target

    def execute(self) -> None:
        import psycopg

        known = self._known()
        target = self.target(known)
        if target is None or known >= target:
            return  # nothing to move: a table has no position yet, or the slot is known at or past the lowest
        deadline = time.monotonic() + self.busy_wait_s
        with self._session() as conn:
            while True:
                row = slot_row(conn, self.slot)
                if row is None or lsn_int(row["confirmed_flush_lsn"]) >= target:
                    return  # gone (planning names it), or already there (a replay, or another table's commit)
                try:
                    moved = conn.execute("SELECT end_lsn::text FROM pg_replication_slot_advance(%s, %s::pg_lsn)",
                                         (self.slot, lsn_text(target))).fetchone()[0]
                    self._saw(lsn_int(moved))
                    return
                except psycopg.errors.ObjectInUse:  # another commit (or a reader) holds the slot for a moment
                    if time.monotonic() > deadline:
                        raise CommitError(f"{self.describe()}: the slot stayed in use by another session for "
                                          f"{self.busy_wait_s:.0f}s; the next run advances it") from None
                    time.sleep(0.2)
                except psycopg.Error as exc:  # moved past the target meanwhile (a backward advance is refused)?
                    row = slot_row(conn, self.slot)
                    if row is None or lsn_int(row["confirmed_flush_lsn"]) >= target:
                        return
                    raise CommitError(f"{self.describe()} to {lsn_text(target)}: {str(exc).strip()}") from None


def _alive(conn: Any) -> bool:
    """Whether an idle connection still answers (the server may have ended it meanwhile: a restart, a timeout)."""
    import psycopg

    try:
        conn.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False


def _idle_between_statements(conn: Any) -> bool:
    """Open, in autocommit, no transaction in progress: as `connect` made it."""
    from psycopg.pq import TransactionStatus

    return not conn.closed and conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE
