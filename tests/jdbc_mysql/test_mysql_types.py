"""Every mapped MySQL/MariaDB type written by the jdbc source and read back with the Apache `avro` package."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

from jdbc.jdbc_jobs import read_with_apache_avro
from jdbc_mysql.mysql_jobs import mysql_job
from support.jobs import run_cli, write_job

from gobblin_py.config import load_job
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import JobRunner

TYPES = """CREATE TABLE typed (
  id int PRIMARY KEY, ti tinyint NOT NULL, b1 tinyint(1), si smallint, mi mediumint, iu int unsigned, bi bigint,
  bu bigint unsigned, n decimal(12,4), f float, d double, c char(3), v varchar(20), t text, bin binary(2),
  vb varbinary(10), bl blob, day date, at_time time(6), dtm datetime(6), ts timestamp(6) NULL, yr year, j json,
  e enum('sad', 'happy'), st set('a', 'b', 'c'), flag bit(1), bits bit(10), updated bigint NOT NULL)"""


def test_every_listed_type_round_trips(tmp_path: Path, maria, mdb) -> None:
    maria.execute(mdb, TYPES,
                  "SET time_zone = '+02:00'",  # the timestamp literal below is 01:04:05 UTC
                  "INSERT INTO typed VALUES (1, -3, 1, -300, 8000000, 4000000000, 9007199254740993, "
                  "18446744073709551615, 12345678.1234, 1.5, 2.25, 'ab', 'var', 'tëxt', x'00ff', x'01', x'ff00', "
                  "'2024-02-29', '13:14:15.123456', '2024-01-02 03:04:05.678901', '2024-01-02 03:04:05.678901', "
                  "2024, '{\"a\": [1, 2]}', 'happy', 'a,c', b'1', b'1000000001', 1)",
                  "INSERT INTO typed (id, ti, updated) VALUES (2, 0, 2)")  # every nullable column NULL
    job = mysql_job(tmp_path, maria, mdb, [{"table": "typed", "watermark_column": "updated", "primary_key": "id"}],
                    partitions=1)
    assert JobRunner(load_job(write_job(tmp_path, job)), InProcessExecutor()).run().succeeded
    rows, schema = read_with_apache_avro(tmp_path / "output" / "typed")
    by_id = {r["id"]: r for r in rows}
    one = by_id[1]
    assert (one["ti"], one["b1"], one["si"], one["mi"], one["iu"]) == (-3, 1, -300, 8000000, 4000000000)
    assert one["bi"] == 9007199254740993 and one["bu"] == Decimal(18446744073709551615)
    assert one["n"] == Decimal("12345678.1234") and one["f"] == 1.5 and one["d"] == 2.25
    assert (one["c"], one["v"], one["t"]) == ("ab", "var", "tëxt")  # char: MySQL strips the padding
    assert (one["bin"], one["vb"], one["bl"]) == (b"\x00\xff", b"\x01", b"\xff\x00")
    assert one["day"] == dt.date(2024, 2, 29) and one["at_time"] == dt.time(13, 14, 15, 123456)
    assert one["dtm"].replace(tzinfo=None) == dt.datetime(2024, 1, 2, 3, 4, 5, 678901)  # no zone: wall clock as UTC
    assert one["ts"] == dt.datetime(2024, 1, 2, 1, 4, 5, 678901, tzinfo=dt.UTC)  # an instant, in UTC
    assert one["yr"] == 2024 and json.loads(one["j"]) == {"a": [1, 2]}
    assert (one["e"], one["st"], one["flag"], one["bits"]) == ("happy", "a,c", True, 513)
    assert all(v is None for k, v in by_id[2].items() if k not in ("id", "ti", "updated"))
    fields = {f["name"]: f["type"] for f in json.loads(str(schema))["fields"]}
    assert fields["id"] == "int" and fields["ti"] == "int"  # NOT NULL: no null branch
    assert fields["iu"] == ["null", "long"] and fields["bi"] == ["null", "long"] and fields["b1"] == ["null", "int"]
    assert fields["bu"][1] == {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 0}
    assert fields["n"][1] == {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 4}
    assert fields["ts"][1] == fields["dtm"][1] == {"type": "long", "logicalType": "timestamp-micros"}
    assert fields["at_time"][1] == {"type": "long", "logicalType": "time-micros"}
    assert fields["flag"] == ["null", "boolean"] and fields["bits"] == ["null", "long"]


def test_a_type_without_mapping_fails_before_any_task_naming_table_and_column(tmp_path: Path, maria, mdb) -> None:
    maria.execute(mdb, "CREATE TABLE odd (id int PRIMARY KEY, updated bigint NOT NULL, shape point)",
                  "INSERT INTO odd VALUES (1, 1, POINT(1, 2))")
    job = mysql_job(tmp_path, maria, mdb, [{"table": "odd", "watermark_column": "updated", "primary_key": "id"}])
    write_job(tmp_path, job)
    done = run_cli("run", "job.yaml", "--in-process", cwd=tmp_path)
    text = done.stdout + done.stderr
    assert done.returncode == 2 and "Traceback" not in text  # a ConfigError found against the source
    assert "table odd: column 'shape' has type point, which has no Avro mapping" in text
    assert not (tmp_path / "output").exists()  # no task ran
    job["source"]["tables"][0]["columns"] = ["id", "updated"]  # the remedy: leave it out
    write_job(tmp_path, job)
    assert run_cli("run", "job.yaml", "--in-process", cwd=tmp_path).returncode == 0
