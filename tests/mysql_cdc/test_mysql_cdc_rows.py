"""The binlog read's own parse of row events (`events.py`) and decode of row values (`rows.py`) equal mysql-replication's
on a real MariaDB, over random rows of every mapped column type (NULLs, extremes, zero dates, multi-row events,
inserts, updates, deletes, another table's events between), and fall back to the library for the types they do not
decode; the table maps parsed once per table id are dropped at a
server restart, whose new table ids name other tables; and change records made Arrow a batch at a time write the row
path's files."""

from __future__ import annotations

import dataclasses
import datetime
import random
import struct
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from mysql_cdc.mysql_cdc_jobs import PASSWORD_ENV, cdc_job, read_changes
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from gobblin_py.builtin.sources.mysql_cdc import binlog, events, position, rows
from gobblin_py.builtin.sources.mysql_cdc.settings import MysqlCdcSettings, connect

FAST = {  # the types `rows.decode` reads itself: column → its declaration, a random value
    "ti": ("tinyint", lambda r: r.randint(-128, 127)),
    "tiu": ("tinyint unsigned", lambda r: r.randint(0, 255)),
    "si": ("smallint", lambda r: r.randint(-32768, 32767)),
    "siu": ("smallint unsigned", lambda r: r.randint(0, 65535)),
    "mi": ("mediumint", lambda r: r.choice([-(1 << 23), (1 << 23) - 1, r.randint(-(1 << 23), (1 << 23) - 1)])),
    "miu": ("mediumint unsigned", lambda r: r.choice([0, (1 << 24) - 1, r.randint(0, (1 << 24) - 1)])),
    "i": ("int", lambda r: r.choice([-(1 << 31), (1 << 31) - 1, r.randint(-(1 << 31), (1 << 31) - 1)])),
    "iu": ("int unsigned", lambda r: r.choice([0, (1 << 32) - 1, r.randint(0, (1 << 32) - 1)])),
    "bi": ("bigint", lambda r: r.choice([-(1 << 63), (1 << 63) - 1, r.randint(-(1 << 63), (1 << 63) - 1)])),
    "biu": ("bigint unsigned", lambda r: r.choice([0, (1 << 64) - 1, r.randint(0, (1 << 64) - 1)])),
    "f": ("float", lambda r: r.choice([0.0, -1.5, r.uniform(-1e30, 1e30)])),
    "d": ("double", lambda r: r.choice([0.0, -2.25, r.uniform(-1e300, 1e300)])),
    "y": ("year", lambda r: r.choice([1901, 2155, r.randint(1901, 2155)])),
    "c": ("char(5)", lambda r: _text(r, 5)),
    "vc": ("varchar(20)", lambda r: _text(r, 20)),
    "vcl": ("varchar(400)", lambda r: _text(r, 400)),
    "lat": ("varchar(30) CHARACTER SET latin1", lambda r: "".join(r.choice("abé ÿ") for _ in range(r.randint(0, 30)))),
    "bn": ("binary(4)", lambda r: bytes(r.randrange(256) for _ in range(4))),
    "vb": ("varbinary(300)", lambda r: bytes(r.randrange(256) for _ in range(r.randint(0, 300)))),
    "tt": ("tinytext", lambda r: _text(r, 60)),
    "t": ("text", lambda r: _text(r, 600)),
    "mt": ("mediumtext", lambda r: _text(r, 300)),
    "lt": ("longtext", lambda r: _text(r, 300)),
    "tb": ("tinyblob", lambda r: bytes(r.randrange(256) for _ in range(r.randint(0, 200)))),
    "bl": ("blob", lambda r: bytes(r.randrange(256) for _ in range(r.randint(0, 700)))),
    "mb": ("mediumblob", lambda r: bytes(r.randrange(256) for _ in range(r.randint(0, 100)))),
    "dt": ("date", lambda r: r.choice(["0000-00-00", "1000-01-01", "9999-12-31", _day(r)])),
    "dtm": ("datetime", lambda r: r.choice(["0000-00-00 00:00:00", _moment(r, 0)])),
    "dtm1": ("datetime(1)", lambda r: _moment(r, 1)),
    "dtm3": ("datetime(3)", lambda r: _moment(r, 3)),
    "dtm4": ("datetime(4)", lambda r: _moment(r, 4)),
    "dtm6": ("datetime(6)", lambda r: r.choice(["9999-12-31 23:59:59.999999", "1000-01-01 00:00:00.000000",
                                                _moment(r, 6)])),
    "ts": ("timestamp NULL", lambda r: r.choice(["0000-00-00 00:00:00", _stamp(r, 0)])),
    "ts2": ("timestamp(2) NULL", lambda r: _stamp(r, 2)),
    "ts5": ("timestamp(5) NULL", lambda r: _stamp(r, 5)),
    "ts6": ("timestamp(6) NULL", lambda r: r.choice(["2038-01-19 03:14:07.999999", "1970-01-01 00:00:01.000001",
                                                     _stamp(r, 6)])),
    "dm": ("decimal(20,6)", lambda r: r.choice([Decimal(0), Decimal("-0.000001"), Decimal(r.randint(-10**20 + 1, 10**20 - 1)) / 1000000])),
    "dm0": ("decimal(5,0) unsigned", lambda r: r.choice([0, 99999, r.randint(0, 99999)])),
    "dm9": ("decimal(18,9)", lambda r: Decimal(r.randint(-10**18 + 1, 10**18 - 1)).scaleb(-9)),
    "dmf": ("decimal(10,10)", lambda r: r.choice([Decimal("-0.9999999999"), Decimal(r.randint(-10**10 + 1, 10**10 - 1)).scaleb(-10)])),
    "dmx": ("decimal(65,30)", lambda r: r.choice([Decimal("9" * 35 + "." + "9" * 30), Decimal("-" + "9" * 35 + "." + "9" * 30),
                                                  Decimal(0), Decimal(r.randint(-10**65 + 1, 10**65 - 1)).scaleb(-30)])),
    "dmi": ("decimal(65,0)", lambda r: r.choice([-10**65 + 1, 10**65 - 1, r.randint(-10**65 + 1, 10**65 - 1)])),
    "tm0": ("time", lambda r: r.choice(["-838:59:59", "838:59:59", "00:00:00", _time(r, 0)])),
    "tm1": ("time(1)", lambda r: r.choice(["-00:00:00.5", "-00:00:01.5", _time(r, 1)])),
    "tm": ("time(3)", lambda r: _time(r, 3)),
    "tm6": ("time(6)", lambda r: r.choice(["-838:59:59.999999", "838:59:59.999999", "-00:00:00.000001", _time(r, 6)])),
    "e": ("enum('a','b','ç')", lambda r: r.choice(["a", "b", "ç", "not one"])),  # not one (sql_mode ''): ''
    "e2": ("enum(" + ", ".join(f"'v{k}'" for k in range(300)) + ")", lambda r: f"v{r.randrange(300)}"),
    "st": ("set('x','y','z')", lambda r: r.choice(["", "x", "x,z", "x,y,z"])),
    "st10": ("set(" + ", ".join(f"'m{k}'" for k in range(10)) + ")",
             lambda r: ",".join(f"m{k}" for k in range(10) if r.random() < 0.5)),
    "bt": ("bit(1)", lambda r: r.randint(0, 1)),
    "bt10": ("bit(10)", lambda r: r.randint(0, 1023)),
    "bt64": ("bit(64)", lambda r: r.choice([0, (1 << 64) - 1, r.randint(0, (1 << 64) - 1)])),
    "j": ("json", lambda r: r.choice(['{"a": [1, 2.5, "x", null, true]}', "[]", '"s"', "12"])),  # MariaDB: longtext
}
LIBRARY = {  # the types left to mysql-replication: a table with any of them is decoded by the library
    "g": ("point", lambda r: struct.pack("<IBIdd", 0, 1, 1, r.uniform(-180, 180), r.uniform(-90, 90))),
    "vc": ("varchar(20)", lambda r: _text(r, 20)),
}


def _text(r: random.Random, most: int) -> str:
    return "".join(r.choice("az Zé€😀\n'\"\\") for _ in range(r.randint(0, most)))


def _time(r: random.Random, fsp: int, most: int = 838) -> str:
    sign = r.choice(["", "-"])
    return f"{sign}{r.randint(0, most)}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}" + (
        f".{r.randint(0, 10**fsp - 1):0{fsp}d}" if fsp else "")


def _day(r: random.Random) -> str:
    return (datetime.date(1000, 1, 1) + datetime.timedelta(days=r.randint(0, 3_280_000))).isoformat()


def _moment(r: random.Random, fsp: int) -> str:
    at = datetime.datetime(1000, 1, 1) + datetime.timedelta(seconds=r.randint(0, 284_000_000_000))
    return at.isoformat(" ") + (f".{r.randint(0, 10**fsp - 1):0{fsp}d}" if fsp else "")


def _stamp(r: random.Random, fsp: int) -> str:
    at = datetime.datetime(1970, 1, 1, 0, 0, 1) + datetime.timedelta(seconds=r.randint(0, 2_147_000_000))
    return at.isoformat(" ") + (f".{r.randint(0, 10**fsp - 1):0{fsp}d}" if fsp else "")


def _fill(maria: Any, db: str, table: str, columns: dict[str, Any], r: random.Random) -> None:
    """Random rows (a column NULL one time in five), then multi-row updates and deletes, in transactions."""
    maria.execute(db, f"CREATE TABLE {table} (id int PRIMARY KEY, "
                      + ", ".join(f"{c} {decl}" for c, (decl, _) in columns.items()) + ")")
    names = ", ".join(columns)

    def row() -> list[Any]:
        return [None if r.random() < 0.2 else make(r) for _, make in columns.values()]

    with maria.connect(db, autocommit=False) as conn, conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = '', time_zone = '+00:00'")  # zero dates allowed, timestamps as written
        key = 0
        for _ in range(12):
            batch = []
            for _ in range(r.randint(1, 8)):
                key += 1
                batch.append([key, *row()])
            cur.execute(f"INSERT INTO {table} (id, {names}) VALUES "
                        + ", ".join("(" + ", ".join(["%s"] * (len(columns) + 1)) + ")" for _ in batch),
                        [v for b in batch for v in b])
            values = row()
            cur.execute(f"UPDATE {table} SET " + ", ".join(f"{c} = %s" for c in columns) + " WHERE id %% 3 = %s",
                        [*values, r.randint(0, 2)])
            cur.execute(f"DELETE FROM {table} WHERE id %% 7 = %s", (r.randint(0, 6),))
            conn.commit()


def test_own_decode_equals_the_library_for_every_mapped_type(binlog_maria: Any, mdb: str) -> None:
    maria = binlog_maria
    s = MysqlCdcSettings(url=maria.url(mdb, "mysql"), password_env=PASSWORD_ENV, tables=[f"{mdb}.fast"])
    conn = connect(s)
    low = position.current(conn)
    for seed in range(3):
        r = random.Random(seed)
        _fill(maria, mdb, f"fast{seed}", FAST, r)
        _fill(maria, mdb, f"other{seed}", {"v": ("int", lambda r: r.randint(0, 9))}, r)  # not read: passed over
        _fill(maria, mdb, f"lib{seed}", LIBRARY, r)
    end = position.current(conn).value()
    tables = [f"{mdb}.{k}{seed}" for k in ("fast", "lib") for seed in range(3)]
    ours = list(binlog.scan(s, tables, low.value(), end, low.base, low.width, fast=True))
    theirs = list(binlog.scan(s, tables, low.value(), end, low.base, low.width, fast=False))
    # ENUM and SET values deliberately differ from the library's (labels in the column's charset, a SET as the
    # snapshot's text, '' for an empty one): compared below with what the snapshot reads; the rest equal the library's
    assert _without(ours, LABELLED) == _without(theirs, LABELLED), _first_difference(ours, theirs)
    seen = _values(_without(ours, LABELLED))
    assert seen == _values(_without(theirs, LABELLED))  # equal values of the same types (1 == 1.0 == True would pass)
    _labels_agree(ours, theirs)
    for seed in range(3):
        with maria.connect(mdb) as c, c.cursor() as cur:
            cur.execute(f"SELECT id, {', '.join(LABELLED)} FROM fast{seed}")
            snapshot = {row[0]: dict(zip(LABELLED, row[1:])) for row in cur.fetchall()}
        assert _replayed(ours, f"{mdb}.fast{seed}") == snapshot, f"fast{seed}"
    assert len({t for t, _ in seen}) >= 8 and len(seen) > 5_000
    # the fast tables' events were parsed and decoded here, the others' by the library
    # (the library reads on from a packet handed to it until an event it returns: a row event after a new table map)
    used = _decoded_here(s, low, end, tables)
    assert {t for (t, here), n in used.items() if here} == {f"fast{seed}" for seed in range(3)}
    assert {t for (t, here), n in used.items() if not here} >= {f"lib{seed}" for seed in range(3)}
    for seed in range(3):
        assert used[f"fast{seed}", True] > 5 * used[f"fast{seed}", False], used


LABELLED = ("e", "e2", "st", "st10")
"""The ENUM and SET columns of FAST, read here in the column's charset (the library: as UTF-8)."""


def _random_column(r: random.Random, i: int) -> tuple[tuple[Any, ...], Any]:
    """A random plan entry of any kind `rows` decodes, and a maker of a random value's bytes for it (mostly valid,
    sometimes not: an enum index past its labels, text that is not in the codec, a string longer than the event)."""
    name, pick = f"c{i}", r.randrange(14)
    if pick < 2:
        st = struct.Struct(r.choice(["<b", "<B", "<h", "<H", "<i", "<I", "<q", "<Q", "<f", "<d"]))
        return (name, st, st.size), lambda: bytes(r.randrange(256) for _ in range(st.size))
    if pick < 5:
        size = r.choice([1, 1, 2, 3, 4])
        encoding, known = r.choice([("utf-8", True), ("latin-1", True), ("cp1252", True), ("utf-16", True),
                                    ("no-such-codec", False)])

        def text() -> bytes:
            most = 30 if size == 1 or r.random() < 0.8 else 600  # past 255 bytes too, where the size allows
            raw = (_text(r, most).encode(encoding, "replace") if known and r.random() < 0.98
                   else bytes(r.randrange(256) for _ in range(r.randint(0, most))))
            n = len(raw) + (r.random() < 0.005)  # now and then a length past the bytes
            return n.to_bytes(size, "little") + raw
        return (name, rows._STRING, (size, encoding, known)), text
    fsp = r.randint(0, 6)
    fraction = rows._FSP_BYTES[fsp]

    def part() -> bytes:  # a fraction of a second: random bytes, or an edge (0, 1, 10, -1)
        if r.random() < 0.5:
            return bytes(r.randrange(256) for _ in range(fraction))
        return r.choice([0, 1, 10, -1]).to_bytes(fraction, "big", signed=True) if fraction else b""
    if pick == 5:
        return (name, rows._DATETIME2, fsp), lambda: bytes(r.randrange(256) for _ in range(5)) + part()
    if pick == 6:
        return (name, rows._TIMESTAMP2, fsp), lambda: r.choice([0, 1, r.randint(0, 2**31 - 1)]).to_bytes(4, "big") + part()
    if pick == 7:
        return (name, rows._TIME2, fsp), lambda: bytes(r.randrange(256) for _ in range(3)) + part()
    if pick == 8:
        precision = r.randint(1, 65)
        layout = rows._decimal_layout(precision, r.randint(0, min(precision, 30)))
        return (name, rows._DECIMAL, layout), lambda: bytes(r.randrange(256) for _ in range(layout[-1]))
    if pick == 9:
        unsigned = r.random() < 0.5
        return (name, rows._INT24, unsigned), lambda: bytes(r.randrange(256) for _ in range(3))
    if pick == 10:
        kind = r.choice([rows._DATE, rows._YEAR])
        return (name, kind, None), lambda: bytes(r.randrange(256) for _ in range(3 if kind == rows._DATE else 1))
    labels = ["", "a", "ç", "€", "b,c"][:r.randint(2, 5)]
    if pick == 11:
        size = r.choice([1, 2])
        return (name, rows._ENUM, (size, labels)), lambda: (len(labels) if r.random() < 0.02 else r.randrange(len(labels))).to_bytes(
            size, "little")
    if pick == 12:
        size = r.randint(1, 8)
        return (name, rows._SET, (size, labels[1:])), lambda: bytes(r.randrange(256) for _ in range(size))
    size = r.randint(1, 8)
    bits = r.randint(max(1, 8 * size - 7), 8 * size)
    return (name, rows._BIT, (size, (1 << bits) - 1, f"0{bits}b")), lambda: bytes(r.randrange(256) for _ in range(size))


def _outcome(plan: rows.Plan, data: bytes, kind: type) -> str:
    """What `rows.images` gives for `data` (its repr: the values, their types, NaNs too), or that it raised: any error
    leaves the event to mysql-replication (`rows.decode`, `events.py`), whichever its type (an IndexError here where
    the value-by-value decode reads a short slice as 0 and fails at the event's end)."""
    try:
        return repr(rows.images(data, 0, len(data), plan, kind))
    except Exception:  # noqa: BLE001 - an error is an outcome both decodes must share
        return "raised"


@pytest.mark.parametrize("seed", range(4))
def test_the_compiled_decode_equals_the_value_by_value_decode_over_random_images(seed: int) -> None:
    """`rows._compile`'s straight-line code for a table map (what the read uses) gives `rows._image`'s values, of the
    same types, and ends where it does, or fails as it does, for random plans of every decoded kind (fixed-size
    numbers signed and unsigned, strings of 1-4 length bytes in known and unknown codecs, temporal types of every
    fsp, decimals of every layout, time, int24, date, year, enum and set with non-ASCII labels, bit(1-64)), NULLs,
    multi-row and update events, and bytes that do not parse; the real server's rows are compared with the library
    by `test_own_decode_equals_the_library_for_every_mapped_type`."""
    import functools

    r = random.Random(seed)
    outcomes: Counter[bool] = Counter()
    for _ in range(150):
        made = [_random_column(r, i) for i in range(r.randint(1, 20))]
        plan = [column for column, _ in made]
        compiled, reference = rows.Plan.compiled(plan), rows.Plan(plan, functools.partial(rows._image, plan=plan))
        for _ in range(8):
            kind = r.choice([WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent])
            data = b""
            for _ in range(r.randint(1, 6) * (2 if kind is UpdateRowsEvent else 1)):
                nulls = [r.random() < 0.2 for _ in plan]
                data += sum(1 << i for i, null in enumerate(nulls) if null).to_bytes((len(plan) + 7) // 8, "little")
                data += b"".join(make() for (_, make), null in zip(made, nulls) if not null)
            if r.random() < 0.05:
                data = data[:r.randrange(len(data))]  # cut short: both must refuse it
            ours = _outcome(compiled, data, kind)
            assert ours == _outcome(reference, data, kind), (plan, data.hex())
            outcomes[ours.startswith("raised")] += 1
    assert outcomes[False] > 200 and outcomes[True] > 20, outcomes  # values compared, and failures too


def _without(parts: list[Any], columns: tuple[str, ...]) -> list[Any]:
    """`parts` with `columns` left out of every row image."""
    def cut(image: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if image is None else {c: v for c, v in image.items() if c not in columns}

    return [dataclasses.replace(p, events=[(at, names, [(op, cut(b), cut(a)) for op, b, a in rs])
                                           for at, names, rs in p.events]) if isinstance(p, binlog.Rows) else p
            for p in parts]


def _labels_agree(ours: list[Any], theirs: list[Any]) -> None:
    """Where the library read a label (ASCII ones: it makes '' of a latin1 'ç'), ours is the same; its NULL or empty
    SET (both None) is ours None or ''."""
    pairs = [(c, x, y) for a, b in zip(ours, theirs) if isinstance(a, binlog.Rows)
             for (_, _, ra), (_, _, rb) in zip(a.events, b.events) for p, q in zip(ra, rb)
             for ia, ib in zip(p[1:], q[1:]) if ia for c in LABELLED if c in ia for x, y in [(ia[c], ib[c])]]
    assert len(pairs) > 1000
    for c, x, y in pairs:
        if isinstance(y, set):
            assert isinstance(x, str) and set(x.split(",")) == y, (c, x, y)
        elif y is None:
            assert x is None or (c.startswith("st") and x == ""), (c, x, y)
        else:
            assert x == y or (y == "" and not x.isascii()), (c, x, y)


def _replayed(parts: list[Any], table: str) -> dict[Any, dict[str, Any]]:
    """The LABELLED values of each row of `table` after its changes in `parts`: what a snapshot reads now."""
    out: dict[Any, dict[str, Any]] = {}
    for p in parts:
        if isinstance(p, binlog.Rows) and p.table == table:
            for _, _, rs in p.events:
                for _, before, after in rs:
                    if before is not None:
                        out.pop(before["id"], None)
                    if after is not None:
                        out[after["id"]] = {c: after[c] for c in LABELLED}
    return out


def _values(parts: list[Any]) -> list[tuple[type, Any]]:
    """Every value of every row image, with its type, in order."""
    return [(type(v), v) for p in parts if isinstance(p, binlog.Rows) for _, _, rs in p.events for _, b, a in rs
            for image in (b, a) if image for v in image.values()]


def _first_difference(ours: list[Any], theirs: list[Any]) -> str:
    """The first value that differs: table, column, ours, the library's."""
    for a, b in zip(ours, theirs):
        if isinstance(a, binlog.Rows) and isinstance(b, binlog.Rows):
            for (_, _, ra), (_, _, rb) in zip(a.events, b.events):
                for x, y in zip(ra, rb):
                    for ia, ib in zip(x[1:], y[1:]):
                        for c in ia or {}:
                            if type(ia[c]) is not type((ib or {}).get(c)) or ia[c] != (ib or {}).get(c):
                                return f"{a.table}.{c}: ours {ia[c]!r}, the library's {(ib or {}).get(c)!r}"
        if a != b:
            return f"{a!r} != {b!r}"[:500]
    return f"{len(ours)} parts against {len(theirs)}"


def _decoded_here(s: MysqlCdcSettings, low: position.Position, end: int, tables: list[str]) -> Counter[tuple[str, bool]]:
    """How many row events in (low, end] of each (table, whether `events.BinlogReader` parsed it)."""
    from pymysqlreplication.event import RotateEvent, XidEvent

    stream = events.BinlogReader(set(tables), connection_settings=s.connection_args(), server_id=s.server_id + 7,
                                 blocking=False, resume_stream=True, log_file=low.file, log_pos=low.offset,
                                 freeze_schema=True, only_events=[RotateEvent, XidEvent, WriteRowsEvent,
                                                                  UpdateRowsEvent, DeleteRowsEvent])
    out: Counter[tuple[str, bool]] = Counter()
    try:
        for event in stream:
            if ((position.parse(stream.log_file, 0).number << 32) | int(stream.log_pos)) > end:
                break
            if isinstance(event, (events.ParsedRows, WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)):
                out[event.table, type(event) is events.ParsedRows] += 1
    finally:
        stream.close()
    return out


def test_table_ids_after_a_restart_name_other_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    """A table's id before a restart is another table's after it; a read over the restart keeps only the table's own
    rows (table maps parsed once per id are dropped at the new file; mysql-replication keeps them over a restart)."""
    pytest.importorskip("pymysqlreplication")
    from jdbc_mysql.mariadb_server import PASSWORD, LocalMariaDB

    monkeypatch.setenv(PASSWORD_ENV, PASSWORD)
    with LocalMariaDB(binlog=True) as maria:
        db = maria.create_database("ids")
        maria.execute(db, "CREATE TABLE a (id int PRIMARY KEY, v varchar(10))")
        s = MysqlCdcSettings(url=maria.url(db, "mysql"), password_env=PASSWORD_ENV, tables=[f"{db}.a"])
        conn = connect(s)
        low = position.current(conn)
        conn.close()
        maria.execute(db, "INSERT INTO a VALUES (1, 'before')")
        for k in range(40):
            maria.execute(db, f"CREATE TABLE c{k} (id int PRIMARY KEY, v varchar(10))")
        maria.restart()
        for k in range(40):  # opened in this order after the restart: one of them gets the id `a` had
            maria.execute(db, f"INSERT INTO c{k} VALUES ({100 + k}, 'other')")
        maria.execute(db, "INSERT INTO a VALUES (2, 'after')")
        conn = connect(s)
        end = position.current(conn)
        conn.close()
        assert end.number > low.number
        got = [(c.op, c.after) for c in binlog.read(s, db, "a", ["id", "v"], low.value(), end.value(), low.base,
                                                     low.width)]
        assert got == [("insert", {"id": 1, "v": "before"}), ("insert", {"id": 2, "v": "after"})]


def test_the_columnar_path_writes_the_row_paths_files(tmp_path: Path, binlog_maria: Any, mdb: str) -> None:
    """Change records of every mapped type made Arrow a thousand at a time (`to_arrow`) give byte for byte the files of
    the row path (`job.columnar: false`), snapshot and changes, and neither refuses a change (empty binary values
    included)."""
    from support.jobs import write_job

    from gobblin_py.config import load_job
    from gobblin_py.runtime.executors.in_process import InProcessExecutor
    from gobblin_py.runtime.runner import JobRunner

    maria = binlog_maria
    r = random.Random(7)
    # every mapped type but those whose batches take the row path anyway: decimals (bigint unsigned among them), which
    # the Avro writer's Arrow encoder lacks, time and bit(n) values, which pyarrow refuses as they come, and json
    types = {c: t for c, t in {**FAST, **LIBRARY}.items() if c not in (
        "biu", "dm", "dm0", "dm9", "dmf", "dmx", "dmi", "j", "tm0", "tm1", "tm", "tm6", "bt10", "bt64", "e2", "st10", "g")}
    _fill(maria, mdb, "t", types, r)
    folders = {columnar: tmp_path / ("columnar" if columnar else "rows") for columnar in (True, False)}
    results: dict[bool, list[Any]] = {True: [], False: []}

    def run(columnar: bool) -> None:
        job = cdc_job(folders[columnar], maria, mdb, ["t"])
        job["job"]["columnar"] = columnar
        result = JobRunner(load_job(write_job(folders[columnar], job)), InProcessExecutor()).run()
        assert result.succeeded, result.error
        results[columnar].append(result)

    for columnar in folders:
        folders[columnar].mkdir()
        run(columnar)  # the snapshot
    _fill(maria, mdb, "t2", {"v": ("int", lambda r: 1)}, r)  # another table's changes between (not read)
    with maria.connect(mdb) as conn, conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = '', time_zone = '+00:00'")
        names = ", ".join(types)
        for k in range(1500):  # more than a batch of changes, NULLs among them
            cur.execute(f"INSERT INTO t (id, {names}) VALUES ({10_000 + k}, " + ", ".join(["%s"] * len(types)) + ")",
                        [None if r.random() < 0.2 else make(r) for _, make in types.values()])
        cur.execute("UPDATE t SET vc = 'u' WHERE id % 2 = 0")
        cur.execute("DELETE FROM t WHERE id % 5 = 0")
    for columnar in folders:
        run(columnar)  # the changes
    outputs = {c: {str(p.relative_to(f / "output")): p.read_bytes() for p in sorted((f / "output").rglob("*.avro"))}
               for c, f in folders.items()}
    # no change refused: an empty binary value is b"" (mysql-replication gives "", which the writers refuse); the
    # snapshot's zero dates come from PyMySQL as text and are refused alike on both paths
    assert not [str(e) for f in folders.values() for e in (f / "output").rglob("*.binlog.*.errors.jsonl")
                if e.stat().st_size]
    if outputs[True] != outputs[False]:  # name the first value that differs
        dataset = f"{mdb}.t"
        for a, b in zip(read_changes(folders[True] / "output", dataset), read_changes(folders[False] / "output", dataset)):
            assert a == b, {k: (a[k], b[k]) for k in a if a[k] != b[k]}
    assert len(outputs[True]) >= 2 and outputs[True] == outputs[False]  # same names, same bytes
    assert sum(t.records_columnar for t in results[True][-1].tasks) > 1500
    assert all(t.records_columnar == 0 for res in results[False] for t in res.tasks)


def test_own_decode_writes_the_librarys_files(tmp_path: Path, binlog_maria: Any, mdb: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A job whose changes `rows.decode` reads (every type it decodes) writes byte for byte the files of the same job
    with every row left to mysql-replication: change files, and error files (a value a writer refuses is refused
    alike)."""
    from mysql_cdc.mysql_cdc_jobs import run

    maria = binlog_maria
    r = random.Random(11)
    # times within a day, no bit(n > 1): the Avro writer refuses others (time-micros; bit(n) is a long in the schema but
    # a text of bits from the binlog, on both paths), which would leave few records to compare
    types = {c: t for c, t in FAST.items() if c not in ("bt10", "bt64")}
    for c, decl, fsp in (("tm0", "time", 0), ("tm1", "time(1)", 1), ("tm", "time(3)", 3), ("tm6", "time(6)", 6)):
        types[c] = (decl, lambda r, fsp=fsp: _time(r, fsp, most=23).lstrip("-"))
    _fill(maria, mdb, "t", types, r)
    folders = {own: tmp_path / ("own" if own else "library") for own in (True, False)}

    def run_job(own: bool) -> None:
        folders[own].mkdir(exist_ok=True)
        with monkeypatch.context() as m:
            if not own:
                m.setattr(rows, "decode", lambda event: None)  # the library decodes every row event
            result = run(folders[own], cdc_job(folders[own], maria, mdb, ["t"]))
        assert result.succeeded, result.error

    for own in folders:
        run_job(own)  # the snapshot
    with maria.connect(mdb) as conn, conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = '', time_zone = '+00:00'")
        names = ", ".join(types)
        for k in range(400):
            cur.execute(f"INSERT INTO t (id, {names}) VALUES ({10_000 + k}, " + ", ".join(["%s"] * len(types)) + ")",
                        [None if r.random() < 0.2 else make(r) for _, make in types.values()])
        cur.execute("UPDATE t SET dmx = -dmx, tm6 = NULL, st = 'y' WHERE id % 2 = 0")
        cur.execute("DELETE FROM t WHERE id % 5 = 0")
    for own in folders:
        run_job(own)  # the changes
    outputs = {own: {str(p.relative_to(f / "output")): p.read_bytes()  # the table's files (not the job's claim)
                     for p in sorted((f / "output" / f"{mdb}.t").rglob("*")) if p.is_file()}
               for own, f in folders.items()}
    changes = read_changes(folders[True] / "output", f"{mdb}.t")
    assert sum(c["_op"] == "update" for c in changes) > 100 and sum(c["_op"] == "delete" for c in changes) > 50
    if outputs[True] != outputs[False]:  # name the first value that differs
        for a, b in zip(changes, read_changes(folders[False] / "output", f"{mdb}.t")):
            assert a == b, {k: (a[k], b[k]) for k in a if a[k] != b[k]}
    assert sorted(outputs[True]) == sorted(outputs[False])
    assert outputs[True] == outputs[False]
    refused = sum(len(p.read_text().splitlines()) for p in (folders[True] / "output").rglob("*.binlog.*.errors.jsonl"))
    assert refused < len(changes) // 10, f"{refused} changes refused: too few values compared"
