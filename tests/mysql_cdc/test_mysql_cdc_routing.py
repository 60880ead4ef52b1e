"""One read of the binlog per run, routed to every table (issue 45): tables at different committed positions (one added
later and snapshotted in chunks over two runs) whose changes share transactions each get exactly what a job of that
table alone gives, and replay to its `SELECT`; the run's log names one binlog read; a DDL on one table fails that
table alone; a run killed in the middle of the routed read, or between two tables reading it, leaves every change
once after the next run."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from mysql_cdc.mysql_cdc_jobs import cdc_job, read_changes, replay, run
from support.jobs import write_job

from gobblin_py.runtime.job_result import DatasetStatus
from gobblin_py.testing.crash import SIGKILLED, cli, each_point

RUN = ["run", "job.yaml", "--in-process"]
READ = "binlog of "  # the line each read of the binlog logs (`binlog.scan`)


def _tables(maria: Any, db: str, *names: str) -> None:
    for name in names:
        maria.execute(db, f"CREATE TABLE {name} (id int PRIMARY KEY, v text)",
                      f"INSERT INTO {name} VALUES (1, '{name}1'), (2, '{name}2'), (3, '{name}3')")


def _interleaved(maria: Any, db: str, tables: list[str], start: int) -> None:
    """Transactions each inserting, updating and moving a key in every table in turn, then a delete of its own."""
    with maria.connect(db, autocommit=False) as conn, conn.cursor() as cur:
        for t in range(3):
            for k, table in enumerate(tables):
                i = start + 10 * t + k
                cur.execute(f"INSERT INTO {table} VALUES (%s, %s)", (i, f"{table}{i}"))
                cur.execute(f"UPDATE {table} SET v = CONCAT(v, '+') WHERE id = (SELECT min(id) FROM {table} x)")
                cur.execute(f"UPDATE {table} SET id = id + 1000 WHERE id = (SELECT min(id) FROM {table} x)")
            conn.commit()
        cur.execute(f"DELETE FROM {tables[0]} ORDER BY id DESC LIMIT 1")
        conn.commit()


def _equal(tmp: Path, maria: Any, db: str, table: str) -> list[dict[str, Any]]:
    """The table's change records, read back with the Apache avro package, each once and replaying to its SELECT."""
    rows = read_changes(tmp / "output", f"{db}.{table}")
    assert max(Counter(repr(sorted(r.items())) for r in rows).values()) == 1, f"{table}: a record twice"
    assert len({(r["_pos"], r["_seq"]) for r in rows}) == len(rows), f"{table}: a change twice"
    assert replay(rows, "id", "v") == dict(maria.query(db, f"SELECT id, v FROM {table}")), table
    return rows


def _reads(caplog: Any) -> int:
    n = sum(1 for r in caplog.records if r.getMessage().startswith(READ))
    caplog.clear()
    return n


def test_one_read_gives_each_table_what_its_own_job_gives(tmp_path: Path, binlog_maria: Any, mdb: str,
                                                          caplog: Any) -> None:
    """a and b from the start, c added later (snapshotted in two runs of chunks, then streamed filtered by them): a
    job of the three and a job per table run at the same moments write the same change records, every table of the
    three-table job equal to its SELECT, and each run of it reads the binlog once."""
    maria = binlog_maria
    caplog.set_level(logging.INFO, logger="gobblin_py.builtin.sources.mysql_cdc")
    _tables(maria, mdb, "a", "b", "c")
    snap = {"chunk_rows": 4, "chunks_per_run": 2}  # a and b in one run; c, grown by then, in two
    together = tmp_path / "together"
    alone = {t: tmp_path / f"alone_{t}" for t in ("a", "b", "c")}
    for d in (together, *alone.values()):
        d.mkdir()

    def runs(tables: list[str]) -> int:
        assert run(together, cdc_job(together, maria, mdb, tables, snapshot=snap)).succeeded
        reads = _reads(caplog)
        for t in tables:
            assert run(alone[t], cdc_job(alone[t], maria, mdb, [t], snapshot=snap)).succeeded
        caplog.clear()
        return reads

    runs(["a", "b"])  # the snapshots
    _interleaved(maria, mdb, ["a", "b", "c"], 100)
    assert runs(["a", "b"]) == 1
    _interleaved(maria, mdb, ["b", "a", "c"], 200)
    runs(["a", "b", "c"])  # c's first chunks while a and b stream: nothing to route them with
    _interleaved(maria, mdb, ["c", "b", "a"], 300)
    runs(["a", "b", "c"])  # c's last chunks
    _interleaved(maria, mdb, ["a", "c", "b"], 400)
    assert runs(["a", "b", "c"]) == 1  # c streams after its chunks' high positions, from below a's and b's
    _interleaved(maria, mdb, ["c", "a", "b"], 500)
    assert runs(["a", "b", "c"]) == 1
    for t in ("a", "b", "c"):
        got = _equal(together, maria, mdb, t)
        assert got == read_changes(alone[t] / "output", f"{mdb}.{t}"), f"{t}: not what a job of {t} alone gives"
        assert any(r["_op"] == "delete" for r in got) and any((r["id"] or 0) > 1000 for r in got), t


def test_a_ddl_on_one_table_fails_that_table_alone(tmp_path: Path, binlog_maria: Any, mdb: str) -> None:
    """ALTERs of b inside the range the run reads for a, b and c (a column added, then dropped: b's columns at planning
    are those committed, so only the read sees them): b is not committed, naming the statement; a and c are, equal to
    their SELECT; b, snapshotted again, catches up."""
    maria = binlog_maria
    _tables(maria, mdb, "a", "b", "c")
    job = cdc_job(tmp_path, maria, mdb, ["a", "b", "c"])
    assert run(tmp_path, job).succeeded
    _interleaved(maria, mdb, ["a", "b", "c"], 100)
    maria.execute(mdb, "ALTER TABLE b ADD COLUMN w int", "UPDATE b SET w = 1", "ALTER TABLE b DROP COLUMN w")
    _interleaved(maria, mdb, ["c", "a"], 200)
    result = run(tmp_path, job)
    status = {d.dataset: d for d in result.datasets}
    assert status[f"{mdb}.b"].status == DatasetStatus.NOT_COMMITTED
    assert "ALTER TABLE b ADD COLUMN w" in status[f"{mdb}.b"].message
    assert status[f"{mdb}.a"].status == status[f"{mdb}.c"].status == DatasetStatus.COMMITTED
    for t in ("a", "c"):
        _equal(tmp_path, maria, mdb, t)
    write_job(tmp_path, job)
    assert cli(["state", "reset", "job.yaml", "--dataset", f"{mdb}.b", "--yes"], tmp_path).returncode == 0
    assert run(tmp_path, job).succeeded
    _interleaved(maria, mdb, ["a", "c"], 300)
    assert run(tmp_path, job).succeeded
    for t in ("a", "b", "c"):
        _equal(tmp_path, maria, mdb, t)


@pytest.mark.crash
def test_kill_in_the_routed_read(tmp_path_factory: Any, binlog_maria: Any) -> None:
    """SIGKILL while the read spools (at its second transaction), once it is whole, and between the first and the
    second table reading it; then changes keep coming and a rerun: every change once in every table."""
    maria = binlog_maria
    points = ["mysql_cdc.decode_midway:2", "mysql_cdc.spool_read:1", "mysql_cdc.spool_read:2"]
    dirs = [tmp_path_factory.mktemp("route") for _ in points]
    dbs = [maria.create_database(f"route_{n}") for n in range(len(points))]
    tables = ["a", "b", "c"]

    def check(n: int, point: str) -> None:
        tmp, db = dirs[n], dbs[n]
        _tables(maria, db, *tables)
        write_job(tmp, cdc_job(tmp, maria, db, tables))
        first = cli(RUN, tmp)
        assert first.returncode == 0, first.stdout + first.stderr
        _interleaved(maria, db, tables, 100)
        crashed = cli(RUN, tmp, crash_at=point)
        assert crashed.returncode == SIGKILLED, f"{point}: {crashed.stdout}{crashed.stderr}"
        _interleaved(maria, db, tables[::-1], 200)
        again = cli(RUN, tmp)
        assert again.returncode == 0, f"{point}: {again.stdout}{again.stderr}"
        for table in tables:
            _equal(tmp, maria, db, table)

    each_point(points, check)
