"""Binlog positions as one ordered integer, and where the server's binlog stands.

A position is `file:offset` (`mysql-bin.000012:4711`); it is kept as `(file number << 32) | offset`, so positions of
one server order by value across files (the number is the file name's numeric extension; an offset fits 32 bits, as
in the server's own events). The file's base name is kept with the server's identity (`server.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gobblin_py.errors import SourceError


@dataclass(frozen=True, order=True)
class Position:
    """A binlog position `file:offset`, ordered as the server wrote them (file number, then offset)."""

    number: int  # the binlog file's numeric extension
    offset: int
    base: str = ""  # the file name before the extension (`mysql-bin`)
    width: int = 6  # the extension's digits

    @property
    def file(self) -> str:
        return f"{self.base}.{self.number:0{self.width}d}"

    def value(self) -> int:
        return (self.number << 32) | self.offset

    def __str__(self) -> str:
        return f"{self.file}:{self.offset}"


def parse(file: str, offset: int) -> Position:
    """`mysql-bin.000012`, 4711 as a Position; a SourceError for a file name without a numeric extension."""
    base, _, ext = file.rpartition(".")
    if not base or not ext.isdigit():
        raise SourceError(f"binlog file {file!r} has no numeric extension: this source cannot order its positions")
    return Position(int(ext), int(offset), base, len(ext))


def of_value(value: int, base: str, width: int = 6) -> Position:
    """The Position an integer kept as a watermark stands for."""
    return Position(value >> 32, value & 0xFFFFFFFF, base, width)


def text(value: int, base: str = "") -> str:
    """A kept position for messages: `mysql-bin.000012:4711` (or `#12:4711` without the base name)."""
    p = of_value(value, base)
    return str(p) if base else f"#{p.number}:{p.offset}"


def current(conn: Any) -> Position:
    """The end of the binlog now (`SHOW MASTER STATUS`, `SHOW BINARY LOG STATUS` on MySQL 8.4+): every transaction
    committed to it so far ends at or before it."""
    import pymysql

    from gobblin_py.builtin.sources.mysql_cdc.settings import query

    try:
        rows = query(conn, "SHOW MASTER STATUS")
    except pymysql.err.ProgrammingError:
        rows = query(conn, "SHOW BINARY LOG STATUS")
    if not rows:
        raise SourceError("the server writes no binlog (SHOW MASTER STATUS is empty): set log_bin (log-bin=mysql-bin "
                          "in its configuration) and restart it")
    return parse(rows[0][0], int(rows[0][1]))


def binary_logs(conn: Any) -> list[tuple[str, int]]:
    """The binlog files the server still has (`SHOW BINARY LOGS`), oldest first, with their sizes."""
    from gobblin_py.builtin.sources.mysql_cdc.settings import query

    return [(r[0], int(r[1])) for r in query(conn, "SHOW BINARY LOGS")]
