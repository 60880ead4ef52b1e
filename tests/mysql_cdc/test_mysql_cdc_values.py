"""One row, one record: the values a mysql_cdc snapshot reads (PyMySQL's SELECT) and those its stream reads from the
binlog (mysql-replication, `rows.py`) of the same row are the same record, for every mapped column type. An upsert
table is fed by both (a snapshot, then changes of the same keys): a value that differs by path is a wrong row."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from mysql_cdc.mysql_cdc_jobs import cdc_job, read_changes, run
from mysql_cdc.test_mysql_cdc_rows import FAST, LIBRARY

OUT_OF_RANGE = ("dt", "dtm", "ts", "g", "bt64")
"""Zero dates, TIME outside a day (every TIME column) and BIT(64) values from 2^63 (BIT(n) is an Avro long) are bad
records on both paths (docs/sources/jdbc.md), and geometry has no Avro mapping (a table with it is refused): left
out here."""
DIFFER = {
    "e": "ENUM with a non-ASCII label: the binlog's value comes back empty",
    "st": "SET, empty: the binlog's value comes back NULL",
}
"""Known to differ between the paths (not fixed yet, named in the issue's note): compared by no one."""


def test_a_row_read_by_the_snapshot_and_from_the_binlog_gives_one_record(tmp_path: Path, binlog_maria: Any,
                                                                         mdb: str) -> None:
    """Issue 45: BIT(1) 0 read from the binlog was written True (the library gives the text '0'), and every BIT(n)
    change went to the error file (its text of digits): both now read as the snapshot reads them."""
    maria = binlog_maria
    types = {c: t for c, t in {**FAST, **LIBRARY}.items()
             if c not in OUT_OF_RANGE and not (t[0].startswith("time") and not t[0].startswith("timestamp"))}
    r = random.Random(3)
    rows = [[None if r.random() < 0.1 else make(r) for _, make in types.values()] for _ in range(40)]
    rows.append([make(r) for _, make in types.values()])  # none NULL
    maria.execute(mdb, "CREATE TABLE t (id int PRIMARY KEY, " + ", ".join(f"{c} {d}" for c, (d, _) in types.items()) + ")")
    names = ", ".join(types)

    def insert(base: int) -> None:
        with maria.connect(mdb) as conn, conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = '', time_zone = '+00:00'")  # as test_mysql_cdc_rows fills its tables
            for k, row in enumerate(rows):
                cur.execute(f"INSERT INTO t (id, {names}) VALUES ({base + k}, " + ", ".join(["%s"] * len(types)) + ")", row)

    insert(0)
    job = cdc_job(tmp_path, maria, mdb, ["t"])
    assert run(tmp_path, job).succeeded  # the snapshot
    insert(10_000)
    assert run(tmp_path, job).succeeded  # the same rows as changes
    assert not [str(p) for p in (tmp_path / "output").rglob("*.errors.jsonl") if p.stat().st_size]
    got = {c["id"]: c for c in read_changes(tmp_path / "output", f"{mdb}.t") if c["_op"] in ("read", "insert")}
    assert sorted(got) == [*range(len(rows)), *range(10_000, 10_000 + len(rows))]
    bits = [got[k]["bt"] for k in range(len(rows))]
    assert False in bits and True in bits  # both BIT(1) values drawn
    differ = [(k, c, got[k][c], got[10_000 + k][c]) for k in range(len(rows)) for c in types
              if c not in DIFFER and got[k][c] != got[10_000 + k][c]]
    assert not differ, differ[:10]
