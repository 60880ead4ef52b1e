"""The chunked snapshot (`snapshot.read_chunks`) with changes written between its chunks: each chunk as of its own high
position, and the binlog after it keeps exactly the changes of each key after its chunk, so the whole equals the
table once (a key moved from a chunk read to one not yet read, and back, included)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gobblin_py.builtin.sources.mysql_cdc import binlog, position
from gobblin_py.builtin.sources.mysql_cdc.settings import MysqlCdcSettings, connect
from gobblin_py.builtin.sources.mysql_cdc.snapshot import Chunks, read_chunks

from mysql_cdc.mysql_cdc_jobs import PASSWORD_ENV


def test_changes_between_chunks_are_applied_once(binlog_maria: Any, mdb: str) -> None:
    maria = binlog_maria
    maria.execute(mdb, "CREATE TABLE t (id int PRIMARY KEY, v text)", "INSERT INTO t SELECT seq, 'v' FROM seq_1_to_30")
    s = MysqlCdcSettings(url=maria.url(mdb, "mysql"), password_env=PASSWORD_ENV, tables=[f"{mdb}.t"],
                         snapshot={"chunk_rows": 10})
    conn = connect(s)
    chunks = Chunks()
    table: dict[int, str] = {}
    between = [  # after chunk 1 (keys 1-10), after chunk 2 (11-20)
        ["UPDATE t SET v = 'in-read' WHERE id = 3", "UPDATE t SET v = 'not-yet' WHERE id = 25",
         "UPDATE t SET id = 50 WHERE id = 1",  # moved into chunk 3, read later
         "UPDATE t SET id = 0 WHERE id = 22",  # moved into chunk 1, read already
         "DELETE FROM t WHERE id = 15", "INSERT INTO t VALUES (100, 'new')"],
        ["UPDATE t SET v = 'again' WHERE id = 0", "DELETE FROM t WHERE id = 26"],
    ]
    reader = read_chunks(s, conn, mdb, "t", ["id", "v"], ["id"], True, chunks)
    for n, (high, rows) in enumerate(reader):
        for row in rows:
            assert row["id"] not in table, f"key {row['id']} read twice"
            table[row["id"]] = row["v"]
        if n < len(between):
            maria.execute(mdb, *between[n])
    conn.close()
    assert len(chunks.ranges) == 3 and chunks.ranges[0][2] < chunks.ranges[1][2] < chunks.ranges[2][2]
    end = position.current(maria.connect(mdb)).value()
    base = position.current(maria.connect(mdb)).base
    start = min(at for _, _, at in chunks.ranges)
    for c in binlog.read(s, mdb, "t", ["id", "v"], start, end, base, 6):
        if c.before is not None and chunks.after((c.before["id"],), c.pos) and (
                c.after is None or c.after["id"] != c.before["id"]):
            table.pop(c.before["id"], None)
        if c.after is not None and chunks.after((c.after["id"],), c.pos):
            table[c.after["id"]] = c.after["v"]
    assert table == dict(maria.query(mdb, "SELECT id, v FROM t"))


def test_a_table_read_whole_when_its_key_is_not_integers(tmp_path: Path, binlog_maria: Any, mdb: str) -> None:
    maria = binlog_maria
    maria.execute(mdb, "CREATE TABLE t (id varchar(10) PRIMARY KEY, v text)",
                  "INSERT INTO t VALUES ('a', '1'), ('B', '2'), ('c', '3')")
    s = MysqlCdcSettings(url=maria.url(mdb, "mysql"), password_env=PASSWORD_ENV, tables=[f"{mdb}.t"],
                         snapshot={"chunk_rows": 1})
    conn = connect(s)
    chunks = Chunks()
    got = [r for _, rows in read_chunks(s, conn, mdb, "t", ["id", "v"], ["id"], False, chunks) for r in rows]
    conn.close()
    assert len(chunks.ranges) == 1 and sorted(r["id"] for r in got) == ["B", "a", "c"]
