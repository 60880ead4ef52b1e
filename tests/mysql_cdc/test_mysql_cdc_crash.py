"""Exactly-once for mysql_cdc into Avro change files: SIGKILL of `gobblin-py run` at every commit point (and in
recovery), in the first run (the snapshot) or a later one, changes coming in between, then a rerun: every change
record once (read back with the Apache avro package), one snapshot per table, and the records replayed by key equal
`SELECT` of each table."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from mysql_cdc.mysql_cdc_jobs import cdc_job, read_changes, replay
from support.jobs import write_job

from gobblin_py.state.store import StateStore
from gobblin_py.testing.crash import SIGKILLED, cli, commit_points, each_point

pytestmark = [pytest.mark.crash]

RUN = ["run", "job.yaml", "--in-process"]


def _check(tmp: Path, maria: Any, db: str) -> None:
    for table, key in (("a", "id"), ("b", "k")):
        rows = read_changes(tmp / "output", f"{db}.{table}")
        seen = Counter(repr(sorted(r.items())) for r in rows)
        assert max(seen.values()) == 1, f"{table}: duplicates"
        assert len({r["_pos"] for r in rows if r["_op"] == "truncate" and r["_seq"] == -1}) == 1, \
            f"{table}: snapshotted more than once"
        assert len({(r["_pos"], r["_seq"]) for r in rows}) == len(rows)
        assert replay(rows, key, "v") == dict(maria.query(db, f"SELECT {key}, v FROM {table}")), table
    marks = StateStore(tmp / "work", "c").watermarks()
    assert set(marks) == {f"{db}.a", f"{db}.b"}


@pytest.mark.parametrize("in_snapshot", [False, True], ids=["changes", "first-run"])
def test_kill_at_every_commit_point(tmp_path_factory: Any, binlog_maria: Any, in_snapshot: bool) -> None:
    maria = binlog_maria
    points = commit_points(6) + ["recovery.before_commit"]  # two tables: files, watermark, state each
    dirs = [tmp_path_factory.mktemp("cp") for _ in points]
    dbs = [maria.create_database(f"crash_{int(in_snapshot)}_{n}") for n in range(len(points))]

    def check(n: int, point: str) -> None:
        tmp, db = dirs[n], dbs[n]
        maria.execute(db, "CREATE TABLE a (id int PRIMARY KEY, v text)", "CREATE TABLE b (k int PRIMARY KEY, v text)",
                      "INSERT INTO a VALUES (1, 'a1'), (2, 'a2')", "INSERT INTO b VALUES (1, 'b1')")
        write_job(tmp, cdc_job(tmp, maria, db, ["a", "b"], snapshot={"chunk_rows": 1}))
        if not in_snapshot:
            first = cli(RUN, tmp)
            assert first.returncode == 0, first.stdout + first.stderr
        with maria.connect(db, autocommit=False) as conn, conn.cursor() as cur:
            cur.execute("UPDATE a SET v = 'a1-x' WHERE id = 1")
            cur.execute("INSERT INTO b VALUES (2, 'b2')")
            conn.commit()
        maria.execute(db, "DELETE FROM a WHERE id = 2", "INSERT INTO a VALUES (3, 'a3')", "UPDATE b SET k = 5 WHERE k = 1")
        if point.startswith("recovery."):
            assert cli(RUN, tmp, crash_at="commit.after_step:2").returncode == SIGKILLED
        crashed = cli(RUN, tmp, crash_at=point)
        assert crashed.returncode == SIGKILLED, f"{point}: {crashed.stdout}{crashed.stderr}"
        maria.execute(db, "UPDATE b SET v = 'b1-y' WHERE k = 5", "INSERT INTO a VALUES (4, 'a4')")
        again = cli(RUN, tmp)
        assert again.returncode == 0, f"{point}: {again.stdout}{again.stderr}"
        _check(tmp, maria, db)

    each_point(points, check)
