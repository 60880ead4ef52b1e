"""The server checks run before anything reads, and the identity each table's commit records.

Refused with the setting and its fix: no binlog (`log_bin`), `binlog_format` not ROW, `binlog_row_image` not FULL
(updates and deletes would not carry whole rows, so an upsert table could not be kept), `binlog_row_metadata` not FULL
(without it the binlog's row events carry no column names, and the reader would name their values by the table's
columns as they are when it reads: a column added or dropped between a change and its read would shift every value
into the wrong column), and compressed binlog events on (MariaDB's `log_bin_compress`, MySQL's
`binlog_transaction_compression`): mysql-replication passes over a compressed row event as an unknown one, so its
changes would be lost without a word (the reader also fails on one, `events.COMPRESSED`, should it be turned on later).

Identity (`state.server`): the server's `@@server_uuid` (MySQL; MariaDB has none), `@@server_id`, and the binlog's
base name. A position means something only in the binlog history it was taken from: another server (a failover to a
replica, a restore) numbers its files and offsets on its own, so a mismatch fails closed, naming both and the fix.
On MariaDB each streamed table's commit also records the GTID position its binlog position stands for
(`BINLOG_GTID_POS(file, offset)`, `state.gtid`), and the next run asks the server again: another server with the
same server_id and binlog name (a promoted replica, a restore) numbers its files and offsets otherwise, so the same
file:offset stands for another point of its history there. The history itself is checked against the committed position: its file must still be there (not purged: `PURGE
BINARY LOGS`, `expire_logs_days`, `binlog_expire_logs_seconds`) and hold the offset (a `RESET MASTER` starts the
numbering again), and the binlog's end must not be before it.
"""

from __future__ import annotations

from typing import Any

from gobblin_py.builtin.sources.mysql_cdc import position
from gobblin_py.builtin.sources.mysql_cdc.settings import query
from gobblin_py.errors import ConfigError, SourceError

REQUIRED = {"binlog_format": "ROW", "binlog_row_image": "FULL", "binlog_row_metadata": "FULL"}
COMPRESSION = ("log_bin_compress", "binlog_transaction_compression")
"""MariaDB's and MySQL's compressed binlog events, which must be off."""
NO_BOUNDARY = "(no event starts there)"
"""What `gtid_at` gives for a position inside an event or past the binlog: never a committed position of this binlog."""

WHY = {"binlog_format": "row events are the only ones this source reads (a statement cannot be replayed by key)",
       "binlog_row_image": "updates and deletes must carry the whole row, or an upsert table would lose columns",
       "binlog_row_metadata": "row events must carry their column names, or a column added or dropped between a change "
                              "and its read would shift values into the wrong columns",
       "log_bin_compress": "compressed row events are not read by the binlog reader (their changes would be lost)",
       "binlog_transaction_compression": "compressed transactions are not read by the binlog reader (their changes "
                                         "would be lost)"}


def variables(conn: Any) -> dict[str, str]:
    """The server variables the checks read (lower-case names)."""
    rows = query(conn, "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('log_bin', 'binlog_format', 'binlog_row_image', "
                       "'binlog_row_metadata', 'server_id', 'server_uuid', 'log_bin_basename', 'version', "
                       "'log_bin_compress', 'binlog_transaction_compression')")
    return {str(k).lower(): str(v) for k, v in rows}


def check_settings(found: dict[str, str], endpoint: str) -> None:
    """log_bin on and the binlog settings this source needs; a ConfigError naming each wrong one and its fix."""
    if found.get("log_bin", "").upper() not in ("ON", "1"):
        raise ConfigError(f"{endpoint}: the binlog is off (log_bin): set log-bin=mysql-bin (and server_id) in the "
                          "server's configuration and restart it")
    wrong = [(k, found.get(k, "(not set: the server is too old)"), v) for k, v in REQUIRED.items()
             if found.get(k, "").upper() != v]
    wrong += [(k, found[k], "OFF") for k in COMPRESSION if found.get(k, "OFF").upper() not in ("OFF", "0")]
    if wrong:
        raise ConfigError(f"{endpoint}: " + "; ".join(f"{k} is {have}, and this source needs {want}: {WHY[k]}. "
                                                      f"SET GLOBAL {k} = '{want}' (and in the configuration file)"
                                                      for k, have, want in wrong)
                          + ". If changes were written meanwhile in another format, they were not captured: reset "
                            "the tables committed before (`gobblin-py state reset JOB.yaml --dataset db.table --yes`)")


def identity(found: dict[str, str], base: str) -> dict[str, Any]:
    """What a committed position is a position of (`state.server`)."""
    out: dict[str, Any] = {"server_id": int(found.get("server_id", 0)), "binlog": base}
    if found.get("server_uuid"):
        out["server_uuid"] = found["server_uuid"]
    return out


def check_identity(dataset: str, kept: Any, now: dict[str, Any], endpoint: str, hint: str) -> None:
    """The table's committed position was taken from this server's binlog; else a SourceError naming both."""
    if not isinstance(kept, dict):
        return
    changed = [f"{k} {kept[k]!r} → {now.get(k)!r}" for k in ("server_uuid", "server_id", "binlog")
               if k in kept and kept[k] != now.get(k)]
    if changed:
        raise SourceError(f"table {dataset} was committed from another server or binlog than {endpoint} has now "
                          f"({'; '.join(changed)}): a failover, a restore or a changed log-bin name. Its committed "
                          "binlog position means nothing in this binlog, so changes could be missed or read twice. "
                          f"Snapshot it again from this server: {hint}")


def check_history(conn: Any, dataset: str, committed: int, end: position.Position, endpoint: str, hint: str) -> None:
    """The binlog still holds everything after the committed position: its file is there and long enough, and the
    binlog's end is not before it; else a SourceError naming the range that is gone."""
    logs = position.binary_logs(conn)
    at = position.of_value(committed, end.base, end.width)
    numbers = {position.parse(f, 0).number: size for f, size in logs}
    if committed > end.value():
        raise SourceError(f"table {dataset}: its committed position {at} is past the end of the binlog on {endpoint} "
                          f"({end}): the binlog was reset (RESET MASTER) or this is another server. The changes from "
                          f"{at} on cannot be read. Snapshot it again: {hint}")
    if at.number not in numbers:
        first = logs[0][0] if logs else "(none)"
        raise SourceError(f"table {dataset}: the binlog on {endpoint} no longer holds its committed position {at}: the "
                          f"oldest file left is {first} (purged: PURGE BINARY LOGS, expire_logs_days or "
                          "binlog_expire_logs_seconds). The changes after it are gone. Snapshot it again: "
                          f"{hint}; and keep binlogs longer than the time between runs")
    if numbers[at.number] < at.offset:
        raise SourceError(f"table {dataset}: binlog file {at.file} on {endpoint} is only {numbers[at.number]} bytes, "
                          f"shorter than the committed position {at}: the binlog was reset or replaced. Snapshot it "
                          f"again: {hint}")


def gtid_at(conn: Any, at: position.Position) -> str | None:
    """The GTID position a binlog position stands for on this server (MariaDB's `BINLOG_GTID_POS`); NO_BOUNDARY where
    no event starts there; None on MySQL (no such function)."""
    import pymysql

    try:
        rows = query(conn, "SELECT BINLOG_GTID_POS(%s, %s)", (at.file, at.offset))
    except pymysql.err.Error:
        return None
    if not rows:
        return None
    return str(rows[0][0]) if rows[0][0] is not None else NO_BOUNDARY


def check_gtid(conn: Any, dataset: str, kept: Any, committed: int, end: position.Position, endpoint: str,
               hint: str) -> None:
    """The committed position stands for the GTID position recorded with it; else a SourceError naming both."""
    if not isinstance(kept, dict) or kept.get("position") != committed or not kept.get("gtid"):
        return
    at = position.of_value(committed, end.base, end.width)
    now = gtid_at(conn, at)
    if now is not None and now != kept["gtid"]:
        raise SourceError(f"table {dataset}: binlog position {at} on {endpoint} stands for GTID position {now!r}, and "
                          f"it stood for {kept['gtid']!r} when it was committed: this is another server's binlog (a "
                          "promoted replica or a restore with the same server_id and log-bin name). Its changes after "
                          f"GTID {kept['gtid']} cannot be found by position. Snapshot it again: {hint}")
