"""Reloading a table (`state reset --dataset D`, the documented way) after rows below its committed high were deleted:
the reload's first load split on the key plans the very key slices of the first (same high, same keys), so its files
get the first load's names with other bytes. The publisher refused to replace them ("the destination already holds a
different file ... which this job did not write"), every run, until the user moved the files away; it now publishes
such a file beside the first, named by its checksum (the reset asked for one more copy). The watermark split met it
alike when its sub-range boundaries did not move (soak seed 313887733 of `--world jdbc`). Found by the jdbc world
(tests/support/world_jdbc.py: delete, state reset, run)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jdbc.jdbc_jobs import read_output
from jdbc_mysql.mysql_jobs import mysql_job
from support.jobs import write_job

from gobblin_py.testing.crash import cli

RUN = ["run", "job.yaml", "--in-process"]
TABLE = {"table": "t", "watermark_column": "ver", "primary_key": ["id"]}


def test_a_reload_after_a_delete_reads_the_table_again(tmp_path: Path, maria: Any, mdb: str) -> None:
    maria.execute(mdb, "CREATE TABLE t (id bigint PRIMARY KEY, ver bigint NOT NULL, payload varchar(16))",
                  "INSERT INTO t SELECT seq * 5, seq, CONCAT('p', seq) FROM seq_1_to_40")
    write_job(tmp_path, mysql_job(tmp_path, maria, mdb, [TABLE], partitions=2, first_load_split="key"))
    first = cli(RUN, tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    maria.execute(mdb, "DELETE FROM t WHERE id = 20")  # below the committed high, not its top row: the high stays 40
    reset = cli(["state", "reset", "job.yaml", "--dataset", "t", "--yes"], tmp_path)
    assert reset.returncode == 0, reset.stdout + reset.stderr
    reload = cli(RUN, tmp_path)
    assert reload.returncode == 0, reload.stdout + reload.stderr  # failed: "the destination already holds a different file"
    pairs = [(r["id"], r["ver"]) for r in read_output(tmp_path / "output", "t")]
    rows = maria.query(mdb, "SELECT id, ver FROM t")
    assert {tuple(r) for r in rows} <= set(pairs)  # every row read again
