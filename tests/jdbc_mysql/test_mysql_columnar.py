"""MariaDB rows on the columnar path (each round trip → one Arrow batch → the avro writer's encoder) give byte for
byte the files of the row path (`job.columnar: false`), NULLs, converted types (tinyint(1), bit, time, set) included."""

from __future__ import annotations

from pathlib import Path

import pytest
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


PLAIN = """CREATE TABLE plain (id bigint PRIMARY KEY, updated datetime(6) NOT NULL, ti tinyint, b1 tinyint(1), mi mediumint,
  iu int unsigned, n decimal(12,2), wide decimal(38,10), f float, d double, v varchar(80), t text, vb varbinary(16),
  day date, dtm datetime(6), yr year, e enum('sad', 'happy'))"""
PLAIN_FILL = """INSERT INTO plain SELECT seq, TIMESTAMP('2026-03-29 00:30:00') + INTERVAL seq * 2 SECOND, CAST(seq % 256 AS SIGNED) - 128,
  seq % 3, CAST(seq AS SIGNED) * 3 - 8000000, seq * 400000, IF(seq % 11 = 0, NULL, (CAST(seq * 31 % 2000000 AS SIGNED) - 1000000) / 100),
  seq * 1234567.0123456789, seq * 0.1, seq * 1e-3, IF(seq % 13 = 0, NULL, CONCAT('tëxt ', REPEAT('x', seq % 70))),
  REPEAT('y', seq % 5), UNHEX(MD5(seq)), DATE('1969-12-01') + INTERVAL seq DAY,
  TIMESTAMP('1969-12-31 23:00:00.123456') + INTERVAL seq SECOND, 1901 + seq % 254, ELT(1 + seq % 2, 'sad', 'happy')
  FROM seq_1_to_4000"""


@pytest.mark.parametrize("writer", ["avro", "parquet"])
def test_the_native_reader_writes_the_row_paths_files(tmp_path: Path, maria, mdb, caplog, writer: str) -> None:
    """ConnectorX's Arrow for a table of plainly typed columns, cast to the row path's types: the same bytes."""
    import logging

    create, fill = PLAIN, PLAIN_FILL
    if writer == "avro":  # its Arrow encoder takes decimals up to 18 digits: a wider one would keep the task to rows
        create, fill = create.replace("decimal(38,10)", "decimal(18,10)"), fill.replace("1234567.0123", "12.0123")
    maria.execute(mdb, create, fill, "INSERT INTO plain (id, updated) VALUES (0, '2026-03-29 00:00:00')")
    table = [{"table": "plain", "watermark_column": "updated", "primary_key": "id"}]

    def make_job(tmp: Path) -> dict:
        job = mysql_job(tmp, maria, mdb, table, partitions=2, fetch_rows=900)
        job["writer"] = {"class": writer}
        return job

    with caplog.at_level(logging.DEBUG, logger="gobblin_py.builtin.sources.jdbc.extractor"):
        results, outputs = run_both_paths(tmp_path, make_job, "plain", "native", f".{writer}")
    assert "MariaDB's native reader" in caplog.text
    assert len(outputs[True]) == 2 and outputs[True] == outputs[False]
    extracted = sum(t.records_extracted for t in results[True].tasks)
    assert extracted == 2201  # up to the newest `updated` less the default lag of an hour, and the row at midnight
    assert sum(t.records_columnar for t in results[True].tasks) == extracted


def test_a_table_with_a_type_the_native_reader_would_change_is_read_as_rows(tmp_path: Path, maria, mdb, caplog) -> None:
    """TIME, BIT, SET (converted here) keep the whole table on PyMySQL's rows, with reader: native too."""
    import logging

    maria.execute(mdb, TABLE, FILL)
    table = [{"table": "flat", "watermark_column": "updated", "primary_key": "id"}]
    with caplog.at_level(logging.DEBUG, logger="gobblin_py.builtin.sources.jdbc.extractor"):
        results, outputs = run_both_paths(
            tmp_path, lambda tmp: mysql_job(tmp, maria, mdb, table, partitions=1, fetch_rows=900), "flat", "native")
    assert "native reader" not in caplog.text
    assert outputs[True] == outputs[False] and sum(t.records_columnar for t in results[True].tasks) == 4000


def test_a_zero_date_stops_reader_native_naming_the_fix_and_commits_nothing(tmp_path: Path, maria, mdb) -> None:
    """ConnectorX cannot read '0000-00-00' (the rows reader sends it to the error file): under reader native the task
    fails saying so, and the next run with reader rows takes the table whole."""
    from support.jobs import write_job

    from gobblin_py.config import load_job
    from gobblin_py.runtime.executors.in_process import InProcessExecutor
    from gobblin_py.runtime.runner import JobRunner

    maria.execute(mdb, "SET SESSION sql_mode = ''", "CREATE TABLE z (id int PRIMARY KEY, updated int NOT NULL, day date)",
                  "INSERT INTO z VALUES (1, 1, '2024-01-01'), (2, 1, '0000-00-00'), (3, 2, '2024-01-03')")
    job = mysql_job(tmp_path, maria, mdb, [{"table": "z", "watermark_column": "updated", "primary_key": "id"}],
                    partitions=1, reader="native")
    job["writer"] = {"class": "parquet"}
    failed = JobRunner(load_job(write_job(tmp_path, job)), InProcessExecutor()).run()
    assert not failed.succeeded
    assert "the native reader cannot read it: give source.reader: auto or rows" in failed.error
    assert "0000-00-00" in failed.error
    assert not list((tmp_path / "output").rglob("*.parquet"))
    job["source"]["reader"] = "rows"
    done = JobRunner(load_job(write_job(tmp_path, job)), InProcessExecutor()).run()
    assert done.succeeded and done.datasets[0].records_written == 2 and done.datasets[0].records_rejected == 1


ZEROS = ("SET SESSION sql_mode = ''", "CREATE TABLE z (id int PRIMARY KEY, updated int NOT NULL, day date, note varchar(20))",
         "INSERT INTO z SELECT seq, seq DIV 10, DATE('2024-01-01') + INTERVAL seq DAY, CONCAT('n', seq) FROM seq_1_to_3000",
         "UPDATE z SET day = '0000-00-00' WHERE id IN (5, 1205, 1206, 2999)")


@pytest.mark.parametrize("writer", ["avro", "parquet"])
def test_under_reader_auto_a_zero_date_sends_its_row_to_the_error_file_and_the_rest_is_read_as_rows(
        tmp_path: Path, maria, mdb, caplog, writer: str) -> None:
    """The default reader reads natively until a value ConnectorX cannot read, then goes on by rows from the row after
    the last one taken: the files are byte for byte the row path's, every row once, the zero dates in the error file."""
    import logging

    maria.execute(mdb, *ZEROS)
    table = [{"table": "z", "watermark_column": "updated", "primary_key": "id"}]

    def make_job(tmp: Path) -> dict:
        job = mysql_job(tmp, maria, mdb, table, partitions=2, fetch_rows=100)
        job["writer"] = {"class": writer}
        return job

    with caplog.at_level(logging.DEBUG, logger="gobblin_py.builtin.sources.jdbc.extractor"):
        results, outputs = run_both_paths(tmp_path, make_job, "z", "auto", f".{writer}")
    assert "MariaDB's native reader" in caplog.text
    went_on = [r.getMessage() for r in caplog.records if "the rest of the range is read as rows" in r.getMessage()]
    # the first range stops at its first batch (id 5), the second after batches it took (id 2999 is near its end)
    assert sorted(m.split(":")[0].split(" (")[0] for m in went_on) == ["z", "z row 1400"], went_on
    assert len(outputs[True]) == 2 and outputs[True] == outputs[False]
    for columnar in (True, False):
        assert sum(d.records_written for d in results[columnar].datasets) == 2996
        assert sum(d.records_rejected for d in results[columnar].datasets) == 4
    assert sum(t.records_columnar for t in results[True].tasks) > 1000  # the native batches before the zero dates


def test_reader_auto_does_not_go_on_by_rows_without_a_unique_key_to_go_on_from(tmp_path: Path, maria, mdb) -> None:
    """A `primary_key` that is no unique key of the table: rows sharing it cannot be told apart where the native read
    stopped, so the task fails as under reader native, and nothing is committed."""
    from support.jobs import write_job

    from gobblin_py.config import load_job
    from gobblin_py.runtime.executors.in_process import InProcessExecutor
    from gobblin_py.runtime.runner import JobRunner

    maria.execute(mdb, *ZEROS[:3], "UPDATE z SET day = '0000-00-00' WHERE id = 2999")  # after batches were taken
    job = mysql_job(tmp_path, maria, mdb, [{"table": "z", "watermark_column": "updated", "primary_key": "note"}],
                    partitions=1, fetch_rows=100)
    job["writer"] = {"class": "parquet"}
    failed = JobRunner(load_job(write_job(tmp_path, job)), InProcessExecutor()).run()
    assert not failed.succeeded and "0000-00-00" in failed.error
    assert not list((tmp_path / "output").rglob("*.parquet"))


def test_reader_auto_goes_on_by_rows_from_among_the_rows_without_a_watermark(tmp_path: Path, maria, mdb, caplog) -> None:
    """The first range holds the NULL watermarks, read first: stopped among them, the rows go on with the rest of them
    by key and then every row with a watermark, each once."""
    import logging

    maria.execute(mdb, "SET SESSION sql_mode = ''",
                  "CREATE TABLE zn (id int PRIMARY KEY, updated int NULL, day date)",
                  "INSERT INTO zn SELECT seq, IF(seq <= 600, NULL, seq DIV 10), DATE('2024-01-01') + INTERVAL seq DAY "
                  "FROM seq_1_to_1500",
                  "UPDATE zn SET day = '0000-00-00' WHERE id IN (450, 1300)")
    table = [{"table": "zn", "watermark_column": "updated", "primary_key": "id"}]

    def make_job(tmp: Path) -> dict:
        job = mysql_job(tmp, maria, mdb, table, partitions=1, fetch_rows=100)
        job["writer"] = {"class": "parquet"}
        return job

    with caplog.at_level(logging.WARNING, logger="gobblin_py.builtin.sources.jdbc.extractor"):
        results, outputs = run_both_paths(tmp_path, make_job, "zn", "auto", ".parquet")
    assert "zn row 400 (updated=None, id=400): the native reader cannot read a value" in caplog.text
    assert outputs[True] == outputs[False]
    assert [d.records_written for d in results[True].datasets] == [1498]
    assert [d.records_rejected for d in results[True].datasets] == [2]
