"""MariaDB rows on the columnar path (each round trip → one Arrow batch → the avro writer's encoder) give byte for
byte the files of the row path (`job.columnar: false`), NULLs, converted types (tinyint(1), bit, time, set) included."""

from __future__ import annotations

from pathlib import Path

from jdbc.jdbc_jobs import run_both_paths
from jdbc_mysql.mysql_jobs import mysql_job

TABLE = """CREATE TABLE flat (id bigint PRIMARY KEY, updated bigint NOT NULL, ti tinyint, b1 tinyint(1), mi mediumint,
  iu int unsigned, n decimal(12,2), f float, d double, v varchar(80), t text, vb varbinary(16), day date,
  at_time time(6), dtm datetime(6), yr year, e enum('sad', 'happy'), st set('a', 'b', 'c'), flag bit(1))"""
FILL = """INSERT INTO flat SELECT seq, seq DIV 7, CAST(seq % 256 AS SIGNED) - 128, seq % 2, CAST(seq AS SIGNED) * 3 - 8000000, seq * 400000,
  IF(seq % 11 = 0, NULL, (CAST(seq * 31 % 2000000 AS SIGNED) - 1000000) / 100), seq * 0.5, seq * 1e-3,
  IF(seq % 13 = 0, NULL, CONCAT('tëxt ', REPEAT('x', seq % 70))), REPEAT('y', seq % 5), UNHEX(MD5(seq)),
  DATE('1969-12-01') + INTERVAL seq DAY, SEC_TO_TIME(seq * 7), TIMESTAMP('1969-12-31 23:00:00') + INTERVAL seq SECOND,
  1901 + seq % 254, ELT(1 + seq % 2, 'sad', 'happy'), ELT(1 + seq % 3, 'a', 'b,c', ''), seq % 2
  FROM seq_1_to_4000"""


def test_the_columnar_path_writes_the_row_paths_files(tmp_path: Path, maria, mdb) -> None:
    maria.execute(mdb, TABLE, FILL, "INSERT INTO flat (id, updated) VALUES (0, 0)")  # every nullable column NULL
    table = [{"table": "flat", "watermark_column": "updated", "primary_key": "id"}]
    results, outputs = run_both_paths(tmp_path, lambda tmp: mysql_job(tmp, maria, mdb, table, partitions=2, fetch_rows=900),
                                      "flat")
    assert len(outputs[True]) == 2
    assert outputs[True] == outputs[False]  # same names, same bytes
    assert sum(t.records_columnar for t in results[True].tasks) == 4001
    assert all(t.records_columnar == 0 for t in results[False].tasks)
