"""A decoder of `pgoutput`'s binary messages, protocol version 1 (PostgreSQL's "Logical Replication Message Formats"):
Begin, Commit, Origin, Relation, Type, Insert, Update, Delete, Truncate. Values stay as the text the server sent
(`Tuple`): the extractor parses them by type OID with psycopg's own loaders. Anything else (a version-2 stream
message, a byte sequence cut short) is a `DecodeError` naming the message: never skipped.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

PG_EPOCH_US = 946_684_800_000_000
"""2000-01-01 in microseconds since 1970-01-01: PostgreSQL's timestamps count from it."""

UNCHANGED = object()
"""A TOASTed value the update did not change ('u'): pgoutput does not send it."""


class DecodeError(Exception):
    """A message this decoder cannot read."""


@dataclass(frozen=True)
class Begin:
    final_lsn: int  # the commit record's LSN
    commit_us: int  # microseconds since 1970-01-01 UTC
    xid: int


@dataclass(frozen=True)
class Commit:
    commit_lsn: int
    end_lsn: int
    commit_us: int


@dataclass(frozen=True)
class RelationColumn:
    name: str
    key: bool
    type_oid: int
    typmod: int


@dataclass(frozen=True)
class Relation:
    oid: int
    namespace: str
    name: str
    replica_identity: str  # d default, n nothing, f full, i index
    columns: tuple[RelationColumn, ...]

    @property
    def table(self) -> str:
        return f"{self.namespace or 'pg_catalog'}.{self.name}"


Tuple = tuple  # one value per column: None (null), UNCHANGED, or the value's text as bytes


@dataclass(frozen=True)
class Insert:
    relation: int
    new: Tuple


@dataclass(frozen=True)
class Update:
    relation: int
    old: Tuple | None  # the key ('K') or the whole old row ('O', REPLICA IDENTITY FULL); None: neither was sent
    new: Tuple
    old_kind: str | None


@dataclass(frozen=True)
class Delete:
    relation: int
    old: Tuple
    old_kind: str  # 'K' key columns only, 'O' the whole old row


@dataclass(frozen=True)
class Truncate:
    relations: tuple[int, ...]
    cascade: bool
    restart_identity: bool


@dataclass(frozen=True)
class Other:
    """A message with no change in it (Origin, Type): read and left."""

    kind: str


Message = Begin | Commit | Relation | Insert | Update | Delete | Truncate | Other


_STRUCTS: dict[str, struct.Struct] = {}
_INT32 = struct.Struct("!i")


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> tuple:
        packer = _STRUCTS.get(fmt)
        if packer is None:
            packer = _STRUCTS[fmt] = struct.Struct(fmt)
        if self.pos + packer.size > len(self.data):
            raise DecodeError(f"message cut short at byte {self.pos} (needs {packer.size} more)")
        values = packer.unpack_from(self.data, self.pos)
        self.pos += packer.size
        return values

    def byte(self) -> str:
        if self.pos >= len(self.data):
            raise DecodeError(f"message cut short at byte {self.pos} (needs 1 more)")
        self.pos += 1
        return chr(self.data[self.pos - 1])

    def string(self) -> str:
        end = self.data.find(b"\x00", self.pos)
        if end < 0:
            raise DecodeError(f"unterminated string at byte {self.pos}")
        text = self.data[self.pos:end].decode("utf-8")
        self.pos = end + 1
        return text

    def tuple(self) -> Tuple:
        """One tuple, read in one loop over the bytes (the per-change cost of decoding: no call per column)."""
        (n,) = self.take("!h")
        data, pos, size = self.data, self.pos, len(self.data)
        values: list[object] = []
        append, length_at = values.append, _INT32.unpack_from
        for _ in range(n):
            if pos >= size:
                raise DecodeError(f"message cut short at byte {pos} (needs 1 more)")
            kind = data[pos]
            pos += 1
            if kind == 110:  # n
                append(None)
            elif kind == 117:  # u
                append(UNCHANGED)
            elif kind in (116, 98):  # t, b
                if pos + 4 > size:
                    raise DecodeError(f"message cut short at byte {pos} (needs 4 more)")
                (length,) = length_at(data, pos)
                pos += 4
                if pos + length > size:
                    raise DecodeError(f"value cut short at byte {pos} (needs {length})")
                append(data[pos:pos + length])
                pos += length
            else:
                raise DecodeError(f"unknown column kind {chr(kind)!r} in a tuple")
        self.pos = pos
        return tuple(values)


_BEGIN = struct.Struct("!qqI")


def _begin(data: bytes) -> tuple[int, int, int]:
    """A Begin message's final LSN, commit time (microseconds since 2000) and transaction id."""
    if len(data) < 1 + _BEGIN.size:
        raise DecodeError(f"Begin message cut short at {len(data)} bytes (needs {1 + _BEGIN.size})")
    return _BEGIN.unpack_from(data, 1)


def final_lsn(begin: bytes) -> int:
    """The final LSN of the transaction a Begin message opens, without building the message (the routed decode
    asks it of every transaction)."""
    return int(_begin(begin)[0])


def decode(data: bytes) -> Message:
    """One pgoutput message."""
    if data[:1] == b"B":  # a routed table reads one a transaction: no reader for it
        lsn, ts, xid = _begin(data)
        return Begin(lsn, ts + PG_EPOCH_US, xid)
    r = _Reader(data)
    kind = r.byte()
    if kind == "C":
        _flags, lsn, end, ts = r.take("!Bqqq")
        return Commit(lsn, end, ts + PG_EPOCH_US)
    if kind == "R":
        (oid,) = r.take("!I")
        namespace, name = r.string(), r.string()
        identity = r.byte()
        (n,) = r.take("!h")
        columns = []
        for _ in range(n):
            (flags,) = r.take("!B")
            col = r.string()
            type_oid, typmod = r.take("!Ii")
            columns.append(RelationColumn(col, bool(flags & 1), type_oid, typmod))
        return Relation(oid, namespace, name, identity, tuple(columns))
    if kind == "I":
        (oid,) = r.take("!I")
        if r.byte() != "N":
            raise DecodeError("insert without its new tuple")
        return Insert(oid, r.tuple())
    if kind == "U":
        (oid,) = r.take("!I")
        marker = r.byte()
        old, old_kind = None, None
        if marker in ("K", "O"):
            old, old_kind = r.tuple(), marker
            marker = r.byte()
        if marker != "N":
            raise DecodeError(f"update with {marker!r} where its new tuple belongs")
        return Update(oid, old, r.tuple(), old_kind)
    if kind == "D":
        (oid,) = r.take("!I")
        marker = r.byte()
        if marker not in ("K", "O"):
            raise DecodeError(f"delete with {marker!r} where its old key or row belongs")
        return Delete(oid, r.tuple(), marker)
    if kind == "T":
        n, options = r.take("!iB")
        return Truncate(tuple(r.take("!I")[0] for _ in range(n)), bool(options & 1), bool(options & 2))
    if kind in ("O", "Y"):
        return Other(kind)
    raise DecodeError(f"message type {kind!r} is not one of protocol version 1's")
