"""Reading the slot: a peek of its changes up to an end, and the run's one decode routed to every table (issue 45).

A run's tables without a snapshot all read the same WAL range, so the first of them to read decodes the slot once,
from the lowest of their watermarks to the run's end, and spools each table's messages (its Relation messages, its
changes, a truncate naming it, each after its transaction's Begin) to a file of its own under the run's local staging
directory; every table then reads its own spool and keeps, as before, only the transactions committing in its own
[L, T). Routing reads no more of a message than its relation id: the parse stays in the table's extractor.

The spools (`builtin/sources/spool.py`, shared with mysql_cdc): whole once a `complete` marker is written, decoded
again by the next reader otherwise, each deleted once read whole, memory bounded. The routed tables are the work units
of the slot's one MultiWorkUnit, so their readers run in the decoding process: a decode of up to `FLUSH_BYTES` is
handed to them in memory, with no spool file (`in_process`; why that keeps every guarantee: `spool.py`). Crash points
`postgres_cdc.decode_midway` (at the N-th transaction routed) and `postgres_cdc.spool_read` (after the N-th table's
spool) let a test kill the run there. Nothing here moves the slot: a crash anywhere replays the range in the next run,
which has a run id, hence a spool directory, of its own.
"""

from __future__ import annotations

import dataclasses
import logging
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gobblin_py import crashpoints
from gobblin_py.api import WorkUnit
from gobblin_py.builtin.sources.postgres_cdc import pgoutput
from gobblin_py.builtin.sources.postgres_cdc.settings import PostgresCdcSettings, lsn_int, lsn_text
from gobblin_py.builtin.sources.postgres_cdc.split import CdcSplit
from gobblin_py.builtin.sources.spool import TableSpools
from gobblin_py.errors import SourceError, describe

log = logging.getLogger(__name__)

_RELATION = struct.Struct("!I")


def route(units: list[WorkUnit], end: int) -> list[WorkUnit]:
    """The units whose changes one decode of the slot serves (those without a snapshot, ending at the run's end) told
    so, with the lowest of their watermarks: the first of them to read decodes [lowest, end) once for all. Each is
    weighed (`wal_bytes`, what the run's executor is chosen by) at its share of that range: the WAL is read once."""
    splits = [CdcSplit.of(u) for u in units]
    routed = sorted(p.table for p in splits if not p.snapshot and p.end == end)
    if len(routed) < 2:
        return units
    low = min(p.low for p in splits if p.table in routed)
    share = max(0, end - low) // len(routed)
    return [dataclasses.replace(u, split=p.model_copy(update={"routed": routed, "decode_low": low,
                                                              "wal_bytes": share}).packed())
            if p.table in routed else u for u, p in zip(units, splits)]


def peek(conn: Any, s: PostgresCdcSettings, end: int, cursor: str) -> Iterator[bytes]:
    """The slot's changes up to `end` (peeked: the slot does not move), waiting while another session holds it."""
    import psycopg

    deadline = time.monotonic() + s.busy_wait_s
    while True:
        conn.autocommit = False
        try:
            flushed = lsn_int(conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0])
            if flushed < end:
                raise SourceError(f"{s.endpoint}: the flushed WAL ({lsn_text(flushed)}) is behind this run's end "
                                  f"({lsn_text(end)}), planned on the same server: was it replaced (a failover "
                                  "to a standby that lacks it)? Nothing of this run is committed")
            with conn.cursor(name=cursor) as cur:
                cur.itersize = 5000
                cur.execute("SELECT data FROM pg_logical_slot_peek_binary_changes(%s, %s::pg_lsn, NULL, "
                            "'proto_version', '1', 'publication_names', %s)", (s.slot, lsn_text(end), s.publication))
                for (data,) in cur:
                    yield bytes(data)
            conn.rollback()
            return
        except psycopg.errors.ObjectInUse:
            conn.rollback()
            if time.monotonic() > deadline:
                raise SourceError(f"replication slot {s.slot!r} stayed in use by another session for "
                                  f"{s.busy_wait_s:.0f}s (another job or consumer reading it?); one job alone may "
                                  "read a slot") from None
            time.sleep(0.2)
        except psycopg.errors.UndefinedObject as exc:
            if "publication" in str(exc):  # decoding reached a change made while the publication did not exist
                raise SourceError(f"publication {s.publication!r} did not exist for part of the range the slot "
                                  f"{s.slot!r} holds (dropped and created again, or renamed): PostgreSQL cannot "
                                  f"decode it ({describe(exc)}). Nothing of this run is committed. Drop the slot "
                                  "and snapshot every table again: `gobblin-py state reset JOB.yaml --dataset "
                                  "schema.table --yes` for each") from None
            raise SourceError(f"replication slot {s.slot!r} was dropped during the run; nothing of this run is "
                              "committed, and the next run names what is lost") from None
        finally:  # also when the reader stops early (a change it refuses): the read's transaction ends here
            if not conn.closed:
                conn.rollback()
                conn.autocommit = True


class RoutedDecode:
    """The run's one decode of the slot over [low, end) for `tables`, spooled per table under `root` (`spool.py`)."""

    def __init__(self, root: Path, s: PostgresCdcSettings, tables: list[str], low: int, end: int) -> None:
        self.settings, self.low, self.end = s, low, end
        self.spools = TableSpools(root, "postgres_cdc", [s.endpoint, s.database, s.slot, s.publication, str(low),
                                                         str(end)], tables, in_process=True)
        self.tables, self.dir = self.spools.tables, self.spools.dir

    def messages(self, conn: Any, table: str) -> Iterator[bytes]:
        """`table`'s messages of the range, decoding the slot first when no whole spool is there."""
        yield from self.spools.read(table, lambda: self._decode(conn), "postgres_cdc.spool_read")

    def _decode(self, conn: Any) -> None:
        """Every message of the slot up to `end` whose transaction commits in [low, end), to its table's spool."""
        spools = self.spools
        spools.start()
        by_oid: dict[int, list[bytes] | None] = {}  # relation id → its table's spool (None: a table not routed)
        begin, keep, touched = b"", False, set()
        count = 0
        for data in peek(conn, self.settings, self.end, f"gobblin_cdc_{self.dir.name[-32:]}"):
            kind = data[:1]
            if kind == b"B":
                keep, begin, touched = self.low <= pgoutput.final_lsn(data) < self.end, data, set()
                if keep:
                    crashpoints.crash_point("postgres_cdc.decode_midway")  # a test's kill mid decode (N-th transaction)
                continue
            if kind == b"R":  # whatever its transaction: the table's later changes are read by it
                rel = pgoutput.decode(data)
                assert isinstance(rel, pgoutput.Relation)
                spool = by_oid[rel.oid] = spools.buffers.get(rel.table)
                if spool is not None:
                    spools.append(spool, data)
                continue
            if kind == b"C" or not keep:
                continue
            if kind in (b"I", b"U", b"D"):
                (oid,) = _RELATION.unpack_from(data, 1)
                if oid not in by_oid:
                    raise SourceError(f"relation {oid}: a change with no Relation message before it, in the "
                                      f"transaction committed at {lsn_text(int.from_bytes(begin[1:9], 'big'))}")
                targets = [by_oid[oid]]
                count += 1
            elif kind == b"T":
                truncated = pgoutput.decode(data)
                assert isinstance(truncated, pgoutput.Truncate)
                targets = list({id(by_oid.get(o)): by_oid.get(o) for o in truncated.relations}.values())
                count += 1
            else:  # Origin, Type: nothing of a table's
                continue
            for spool in targets:
                if spool is None:
                    continue
                if id(spool) not in touched:
                    touched.add(id(spool))
                    spools.append(spool, begin)
                spools.append(spool, data)
        spools.finish()
        log.info("slot %s decoded once for %d table(s): %d change(s) in [%s, %s)", self.settings.slot,
                 len(self.tables), count, lsn_text(self.low), lsn_text(self.end))
