"""The binlog's events, with the common ones parsed here from the packet's bytes (issue 45).

Why: mysql-replication wraps every packet in objects (the packet wrapper, the event header, a table map event that
only finds its table id known, a RowsEvent's setup) before `rows.py` decodes a value: most of a binlog read's time once
the values are decoded here. `BinlogReader` is mysql-replication's reader with one change: each packet is first looked
at here, and
- a row event (WRITE/UPDATE/DELETE_ROWS, v1 or v2 without extra data) of a table whose map the library holds, with
  every column present and every column one `rows.py` decodes, is parsed here into `ParsedRows`;
- a table map for a table id already mapped (the library ignores it: `freeze_schema`), and an event of a type the
  library would drop unparsed (not asked for), are passed over, moving the reader's position as the library does;
- everything else — rotate, format description, GTID, query, XID, new table maps, a row event of an unknown table,
  any packet this module cannot read — goes to the library untouched (the packet is handed back to its reader), as
  does an error while reading the connection;
- each table's ENUM and SET labels are taken again from its table map's bytes, decoded with the column's charset
  (`rows.relabel`), before any row of it is decoded, here or by the library.
The reader's position (`log_file`, `log_pos`) is moved exactly as the library moves it, so nothing here changes what
a read commits. `tests/mysql_cdc/test_mysql_cdc_rows.py` requires the read to give the library's events and values
over random DML of every decoded type (multi-row events, update images, other tables between).
Depends on mysql-replication 1.0.x's reader internals (pinned in pyproject.toml).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pymysql
from pymysql.protocol import MysqlPacket
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.binlogstream import MYSQL_EXPECTED_ERROR_CODES
from pymysqlreplication.constants import BINLOG
from pymysqlreplication.event import NotImplementedEvent
from pymysqlreplication.packet import BinLogPacketWrapper
from pymysqlreplication.row_event import DeleteRowsEvent, RowsEvent, UpdateRowsEvent, WriteRowsEvent

from gobblin_py.builtin.sources.mysql_cdc import rows
from gobblin_py.builtin.sources.mysql_cdc.tls import PreferredTls
from gobblin_py.errors import SourceError

_ROWS: dict[int, tuple[type, int]] = {  # event type → (the library's event class, its post-header length)
    BINLOG.WRITE_ROWS_EVENT_V1: (WriteRowsEvent, 8), BINLOG.UPDATE_ROWS_EVENT_V1: (UpdateRowsEvent, 8),
    BINLOG.DELETE_ROWS_EVENT_V1: (DeleteRowsEvent, 8), BINLOG.WRITE_ROWS_EVENT_V2: (WriteRowsEvent, 10),
    BINLOG.UPDATE_ROWS_EVENT_V2: (UpdateRowsEvent, 10), BINLOG.DELETE_ROWS_EVENT_V2: (DeleteRowsEvent, 10),
}
_EVENT_CLASSES: dict[int, type] = BinLogPacketWrapper._BinLogPacketWrapper__event_map  # type: ignore[attr-defined]
_SKIP = object()  # a packet passed over (the position moved)
COMPRESSED = {40: "TRANSACTION_PAYLOAD (MySQL binlog_transaction_compression)",
              **{k: "compressed (MariaDB log_bin_compress)" for k in range(165, 172)}}
"""Compressed events, which mysql-replication passes over as unknown ones: a read meeting one fails, naming it, and
commits nothing (the planning check refuses the settings that write them, `server.COMPRESSION`)."""


def compressed_error(kind: int, where: str, tables: list[str]) -> str:
    """What a read of `tables` that met a compressed event says: which event, and a reset of each table it may hold
    changes of (a compressed event's table is not known without reading it)."""
    resets = "; ".join(f"`gobblin-py state reset JOB.yaml --dataset {t} --yes`" for t in tables)
    return (f"the binlog holds a {COMPRESSED[kind]} event ending at {where}, which this source cannot read, so the "
            f"changes of table(s) {', '.join(tables)} after it are not committed. Turn compression off (SET GLOBAL "
            f"log_bin_compress = OFF; MySQL: binlog_transaction_compression = OFF), then reset each table (its next "
            f"run snapshots it again): {resets}")


@dataclass(slots=True)
class ParsedRows:
    """A row event parsed here: its kind (the library's class), table, the table map's columns and the rows'
    (before, after) images."""

    kind: type
    schema: str
    table: str
    columns: list[Any]
    images: list[tuple[dict[str, Any] | None, dict[str, Any] | None]]


class _Connection(PreferredTls):
    """The reader's connection, able to hand a packet read here back to the library's reader; it keeps the table map
    packets the library reads (`keep`), for `rows.relabel` (`BinlogReader` reads its own with `read_own`)."""

    held: Any = None
    maps: dict[int, bytes]

    def _read_packet(self, packet_type: Any = MysqlPacket) -> Any:
        if self.held is not None:
            packet, self.held = self.held, None
            return packet
        packet = super()._read_packet(packet_type)
        self.keep(packet.get_all_data())
        return packet

    def read_own(self) -> Any:
        """The next packet, for `BinlogReader` (which keeps the table maps it reads itself)."""
        if self.held is not None:
            packet, self.held = self.held, None
            return packet
        return super()._read_packet()

    def keep(self, data: bytes) -> None:
        """Keep `data` when it is a table map packet: the last one of each table id."""
        if len(data) > 28 and data[0] == 0 and data[5] == BINLOG.TABLE_MAP_EVENT:
            if not hasattr(self, "maps"):
                self.maps = {}
            self.maps[int.from_bytes(data[20:26], "little")] = data


class BinlogReader(BinLogStreamReader):
    """mysql-replication's binlog reader, with the common events parsed here (see the module); `wanted` names the
    tables ("schema.table") whose row events are read, the others' passed over."""

    def __init__(self, wanted: set[str], **kwargs: Any) -> None:
        if kwargs.get("end_log_pos") or kwargs.get("skip_to_timestamp") or kwargs.get("verify_checksum"):
            raise ValueError("BinlogReader: end_log_pos, skip_to_timestamp and verify_checksum are the library's")
        super().__init__(pymysql_wrapper=_Connection, **kwargs)
        self._wanted = wanted
        self._labelled: dict[int, list[Any]] = {}  # table id → the columns `rows.relabel` gave their labels

    def fetchone(self) -> Any:
        me = "_BinLogStreamReader__"
        while getattr(self, me + "connected_stream") and getattr(self, me + "connected_ctl"):
            conn = self._stream_connection
            try:
                packet = conn.read_own()
            except pymysql.OperationalError as error:
                if error.args[0] not in MYSQL_EXPECTED_ERROR_CODES:
                    raise
                conn.close()  # as the library: connect again at the position reached
                setattr(self, me + "connected_stream", False)
                break
            got = self._parse(packet)
            if got is _SKIP:
                continue
            if got is not None:
                return got
            conn.held = packet
            break
        event = super().fetchone()
        if isinstance(event, RowsEvent):  # decoded by the library, or by `rows.decode`, after this
            self._labels(event.table_id, event.columns)
        return event

    def _labels(self, table_id: int, columns: list[Any]) -> None:
        """Give a table's ENUM and SET columns the labels of its table map, decoded with their charsets
        (`rows.relabel`), once per table map the library keeps, before any of its rows is decoded."""
        if self._labelled.get(table_id) is columns:
            return
        me = "_BinLogStreamReader__"
        raw = getattr(self._stream_connection, "maps", {}).get(table_id)
        lengths = getattr(self, me + "post_header_lengths")
        post = lengths[BINLOG.TABLE_MAP_EVENT - 1] if lengths and len(lengths) > BINLOG.TABLE_MAP_EVENT - 1 else 8
        if raw is not None and post == 8:
            end = 20 + int.from_bytes(raw[10:14], "little") - 19 - (4 if getattr(self, me + "use_checksum") else 0)
            rows.relabel(columns, raw, min(end, len(raw)))
        self._labelled[table_id] = columns

    def _parse(self, packet: Any) -> Any:
        """The packet's ParsedRows, _SKIP for one passed over, or None for the library to read."""
        data = packet.get_all_data()
        if len(data) < 26 or data[0] != 0:
            return None
        kind = data[5]
        log_pos = int.from_bytes(data[14:18], "little")
        if kind in COMPRESSED:
            raise SourceError(compressed_error(kind, f"{self.log_file}:{log_pos}", sorted(self._wanted)))
        me = "_BinLogStreamReader__"
        if kind == BINLOG.TABLE_MAP_EVENT:
            self._stream_connection.keep(data)
            if not (getattr(self, me + "freeze_schema") and int.from_bytes(data[20:26], "little") in self.table_map):
                return None
            got: Any = _SKIP
        elif kind in _ROWS:
            got = self._rows(data, kind)
            if got is None:
                return None
        elif (_EVENT_CLASSES.get(kind, NotImplementedEvent) not in getattr(self, me + "allowed_events_in_packet")
              and kind not in (BINLOG.ROTATE_EVENT, BINLOG.FORMAT_DESCRIPTION_EVENT)):
            got = _SKIP
        else:
            return None
        if log_pos:
            self.log_pos = log_pos
        return got

    def _rows(self, data: bytes, kind: int) -> Any:
        """A row event's ParsedRows, _SKIP for another table's, or None for the library to read."""
        cls, known = _ROWS[kind]
        table_id = int.from_bytes(data[20:26], "little")
        table = self.table_map.get(table_id)
        if table is None:
            return None
        if f"{table.schema}.{table.table}" not in self._wanted:
            return _SKIP
        me = "_BinLogStreamReader__"
        lengths = getattr(self, me + "post_header_lengths")
        declared = lengths[kind - 1] if lengths and kind - 1 < len(lengths) else known
        if declared < known or (known == 10 and int.from_bytes(data[28:30], "little") != 2):
            return None  # a short post-header, or v2 extra data (partition, ndb): the library's
        end = 20 + int.from_bytes(data[10:14], "little") - 19 - (4 if getattr(self, me + "use_checksum") else 0)
        at = 20 + declared
        columns = table.columns
        self._labels(table_id, columns)
        n = len(columns)
        if end > len(data) or at >= end or data[at] != n or n >= 251:
            return None
        at += 1
        width = (n + 7) // 8
        if not rows.full(data[at:at + width], n):
            return None
        at += width
        if cls is UpdateRowsEvent:
            if not rows.full(data[at:at + width], n):
                return None
            at += width
        plan = rows.plan_of(columns)
        if plan is None:
            return None
        try:
            images = rows.images(data, at, end, plan, cls)
        except Exception:  # noqa: BLE001 - whatever is not read here, the library reads (or reports)
            return None
        return ParsedRows(cls, table.schema, table.table, columns, images)
