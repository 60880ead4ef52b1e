"""The chunked snapshot (`snapshot.boundaries`, `snapshot.read_chunk`) with changes written between its chunks: each
chunk as of its own high position, and the binlog after it keeps exactly the changes of each key after its chunk, so
the whole equals the table once (a key moved from a chunk read to one not yet read, and back, included); and as a
job, its chunks spread over runs (`chunks_per_run`) while the table changes, then the stream."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mysql_cdc.mysql_cdc_jobs import PASSWORD_ENV, cdc_job, read_changes, replay, run

from gobblin_py.builtin.sources.mysql_cdc import binlog, position
from gobblin_py.builtin.sources.mysql_cdc.settings import MysqlCdcSettings, connect
from gobblin_py.builtin.sources.mysql_cdc.snapshot import Chunks, boundaries, read_chunk


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
    highs = boundaries(s, conn, mdb, "t", ["id"], None, 10)
    assert highs == [(10,), (20,), (30,), None]  # the last chunk is open above (and empty when read)
    for n, hi in enumerate(highs):
        lo = highs[n - 1] if n else None
        high, rows = read_chunk(s, conn, mdb, "t", ["id", "v"], ["id"], lo, hi)
        chunks.ranges.append((lo, hi, high))
        for row in rows:
            assert row["id"] not in table, f"key {row['id']} read twice"
            table[row["id"]] = row["v"]
        if n < len(between):
            maria.execute(mdb, *between[n])
    conn.close()
    assert chunks.ranges[0][2] < chunks.ranges[1][2] < chunks.ranges[2][2]
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
    assert run(tmp_path, cdc_job(tmp_path, maria, mdb, ["t"], snapshot={"chunk_rows": 1})).succeeded
    rows = read_changes(tmp_path / "output", f"{mdb}.t")
    reads = [r for r in rows if r["_op"] == "read"]
    assert sorted(r["id"] for r in reads) == ["B", "a", "c"] and {r["_seq"] >> 32 for r in reads} == {0}


def test_chunks_spread_over_runs_then_the_stream(tmp_path: Path, binlog_maria: Any, mdb: str) -> None:
    maria = binlog_maria
    maria.execute(mdb, "CREATE TABLE t (id int PRIMARY KEY, v text)", "INSERT INTO t SELECT seq, 'v' FROM seq_1_to_45")
    job = cdc_job(tmp_path, maria, mdb, ["t"], snapshot={"chunk_rows": 10, "chunks_per_run": 2})
    dml = [["UPDATE t SET v = 'x' WHERE id IN (3, 33)", "DELETE FROM t WHERE id = 12", "INSERT INTO t VALUES (7000, 'hi')"],
           ["UPDATE t SET id = 0 WHERE id = 44", "UPDATE t SET id = 4444 WHERE id = 2", "UPDATE t SET v = 'y' WHERE id = 3"],
           ["DELETE FROM t WHERE id = 0", "INSERT INTO t VALUES (46, 'late')"],
           ["UPDATE t SET v = 'z' WHERE id = 46"]]
    read_by_run = []
    for statements in dml:
        done = run(tmp_path, job)
        assert done.succeeded, done.error
        read_by_run.append(sum(1 for r in read_changes(tmp_path / "output", f"{mdb}.t") if r["_op"] == "read"))
        maria.execute(mdb, *statements)
    assert run(tmp_path, job).succeeded
    rows = read_changes(tmp_path / "output", f"{mdb}.t")
    assert replay(rows, "id", "v") == dict(maria.query(mdb, "SELECT id, v FROM t"))
    assert len({r["_seq"] >> 32 for r in rows if r["_op"] == "read"}) == 5  # chunks 0-4: 2, 2, then the open one
    assert read_by_run[0] == 20 and read_by_run[2] == read_by_run[3], read_by_run  # run 4 streamed, read nothing


def test_a_failed_chunk_commits_none_of_its_runs_chunks_under_commit_policy_successful(
        tmp_path: Path, binlog_maria: Any, mdb: str, monkeypatch: Any) -> None:
    """Chunk n starts at chunk n - 1's high key, and chunk 0 carries the truncate: with chunk 0 failed and chunks 1
    and 2 committed, keys 1-10 were never read (lost). The table's units now commit all or none, whatever the
    policy, and the next runs read every key once."""
    from gobblin_py.builtin.sources.mysql_cdc.extractor import MysqlCdcExtractor
    from gobblin_py.errors import SourceError

    maria = binlog_maria
    maria.execute(mdb, "CREATE TABLE t (id int PRIMARY KEY, v text)", "INSERT INTO t SELECT seq, 'v' FROM seq_1_to_45")
    job = cdc_job(tmp_path, maria, mdb, ["t"], snapshot={"chunk_rows": 10, "chunks_per_run": 3})
    job["job"]["commit_policy"] = "successful"
    real = MysqlCdcExtractor._chunk

    def first_fails(self: Any) -> Any:
        if self.split.chunk == 0:
            raise SourceError("chunk 0 failed (injected)")
        return real(self)

    monkeypatch.setattr(MysqlCdcExtractor, "_chunk", first_fails)
    failed = run(tmp_path, job)
    assert not failed.succeeded
    [summary] = [d for d in failed.datasets if d.dataset == f"{mdb}.t"]
    assert summary.status.value == "not committed" and "all or none" in summary.message, summary
    assert read_changes(tmp_path / "output", f"{mdb}.t") == []
    monkeypatch.setattr(MysqlCdcExtractor, "_chunk", real)
    for _ in range(4):
        assert run(tmp_path, job).succeeded
    rows = read_changes(tmp_path / "output", f"{mdb}.t")
    reads = [r["id"] for r in rows if r["_op"] == "read"]
    assert sorted(reads) == list(range(1, 46))
    assert replay(rows, "id", "v") == dict(maria.query(mdb, "SELECT id, v FROM t"))


def test_a_chunk_takes_mariadbs_exact_snapshot_position(binlog_maria: Any, mdb: str) -> None:
    """A chunk's low is MariaDB's `Binlog_snapshot_position`, exact for its read view. The status names come
    capitalized, and the lower-case look-up found none: every chunk took `SHOW MASTER STATUS` before its transaction,
    whose window (a transaction in the binlog before it but not yet visible to the view) lost a change of the chunk."""
    from gobblin_py.builtin.sources.mysql_cdc import position
    from gobblin_py.builtin.sources.mysql_cdc.snapshot import _snapshot_position

    maria = binlog_maria
    maria.execute(mdb, "CREATE TABLE t (id int PRIMARY KEY)", "INSERT INTO t VALUES (1)")
    s = MysqlCdcSettings(url=maria.url(mdb, "mysql"), password_env=PASSWORD_ENV, tables=[f"{mdb}.t"])
    conn = connect(s)
    try:
        with conn.cursor() as cur:
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
            maria.execute(mdb, "INSERT INTO t VALUES (2)")  # committed after the view: past its position
            cur.execute("SHOW STATUS LIKE 'Binlog_snapshot_position'")
            exact = int(cur.fetchone()[1])
            got = _snapshot_position(conn)
        assert got is not None and got.offset == exact
        assert got.value() < position.current(conn).value()
    finally:
        conn.rollback()
        conn.close()


def test_a_chunk_read_by_connectorx_changed_in_its_window_is_read_again_by_rows(binlog_maria: Any, mdb: str,
                                                                                 monkeypatch: Any) -> None:
    """ConnectorX's SELECT sees the chunk somewhere in (low, high]: a change of one of its keys committed after the
    SELECT, before `high`, would be published as of `high` with the old value (lost). Such a chunk is left to the
    rows path (None); a change of a key outside the chunk leaves ConnectorX's rows as they are."""
    import connectorx

    from gobblin_py.builtin.sources.mysql_cdc.snapshot import read_chunk_native

    maria = binlog_maria
    maria.execute(mdb, "CREATE TABLE t (id int PRIMARY KEY, v text)", "INSERT INTO t SELECT seq, 'v' FROM seq_1_to_30")
    s = MysqlCdcSettings(url=maria.url(mdb, "mysql"), password_env=PASSWORD_ENV, tables=[f"{mdb}.t"])
    real, late = connectorx.read_sql, []

    def then_change(*args: Any, **kwargs: Any) -> Any:
        got = real(*args, **kwargs)
        maria.execute(mdb, late.pop())  # committed after the SELECT, before the chunk's high
        return got

    monkeypatch.setattr(connectorx, "read_sql", then_change)
    conn = connect(s)
    try:
        late.append("UPDATE t SET v = 'outside' WHERE id = 25")
        high, arrow = read_chunk_native(s, conn, mdb, "t", ["id", "v"], ["id"], None, (10,))
        assert arrow.to_pylist() == [{"id": k, "v": "v"} for k in range(1, 11)] and high == position.current(conn).value()
        late.append("UPDATE t SET v = 'late' WHERE id = 5")
        assert read_chunk_native(s, conn, mdb, "t", ["id", "v"], ["id"], None, (10,)) is None
        _, rows = read_chunk(s, conn, mdb, "t", ["id", "v"], ["id"], None, (10,))
        assert rows[4] == {"id": 5, "v": "late"}
    finally:
        conn.close()
