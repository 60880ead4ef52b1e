"""The jdbc source on the columnar path (each round trip's rows → one Arrow batch → the avro writer's encoder), with
the row driver or the native reader (ADBC's binary COPY straight into Arrow), writes byte for byte the files of the
row path (`job.columnar: false`), NULLs and edge values included."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from jdbc.jdbc_jobs import jdbc_job, read_with_apache_avro, run_both_paths

TABLE = """CREATE TABLE public.flat (id bigint PRIMARY KEY, updated bigint NOT NULL, s smallint, i integer,
  n numeric(12,2), n_free numeric, r real, d double precision, t text, flag boolean, raw bytea, day date,
  at_time time, ts timestamp, tstz timestamptz, u uuid, jb jsonb)"""
FILL = """INSERT INTO flat SELECT g, g / 7, (g % 65535 - 32767)::smallint, CASE WHEN g % 5 = 0 THEN NULL ELSE g * 7919 END,
  CASE WHEN g % 11 = 0 THEN NULL ELSE ((g * 31) %% 2000000 - 1000000) / 100.0 END, g / 3.0, g * 0.5, g * 1e-3,
  CASE WHEN g % 13 = 0 THEN NULL ELSE 'tëxt ' || repeat('x', g %% 70) END, g %% 3 = 0, decode(md5(g::text), 'hex'),
  date '1969-12-01' + g, time '00:00' + g * interval '7 seconds', timestamp '1969-12-31 23:00' + g * interval '1.5 s',
  timestamptz '2026-01-01 00:00+02' + g * interval '1 min', md5(g::text)::uuid, jsonb_build_object('g', g)
  FROM generate_series(1, %s) g"""


@pytest.mark.parametrize("reader", ["rows", "native"])
@pytest.mark.parametrize("partition", [None, {"column": "tstz", "granularity": "DAY"}], ids=["whole", "by-day"])
def test_the_columnar_path_writes_the_row_paths_files(tmp_path: Path, pg, db, partition: dict[str, Any] | None,
                                                      reader: str, caplog: pytest.LogCaptureFixture) -> None:
    with pg.connect(db) as conn:
        conn.execute(TABLE)
        conn.execute(FILL.replace("%%", "%").replace("%s", "5000"))
        conn.execute("INSERT INTO flat (id, updated) VALUES (0, 0)")  # every nullable column NULL

    def make_job(tmp: Path) -> dict[str, Any]:
        job = jdbc_job(tmp, pg, db, [{"table": "public.flat", "watermark_column": "updated", "primary_key": "id"}],
                       partitions=3, fetch_rows=700)
        if partition:
            job["writer"]["partition"] = partition
        return job

    with caplog.at_level(logging.DEBUG, logger="gobblin_py.builtin.sources.jdbc.extractor"):
        results, outputs = run_both_paths(tmp_path, make_job, "public.flat", reader)
    assert ("native reader" in caplog.text) is (reader == "native")
    assert len(outputs[True]) == (3 if partition is None else 7)  # 3 ranges; by day: 5 days, 2 cut by a range
    assert outputs[True] == outputs[False]  # same names, same bytes
    columnar = sum(t.records_columnar for t in results[True].tasks)
    assert columnar == (5001 if partition is None else 5001 - 700)  # a batch holding the row without a time: by row
    assert all(t.records_columnar == 0 for t in results[False].tasks)
    rows, _ = read_with_apache_avro(tmp_path / "columnar" / "output")
    by_id = {r["id"]: r for r in rows}
    if partition is None:
        assert len(by_id) == 5001 and all(v is None for k, v in by_id[0].items() if k not in ("id", "updated"))
    else:  # the row without a partition time is a bad record on both paths
        assert len(by_id) == 5000 and results[True].datasets[0].records_rejected == 1
    assert by_id[10]["t"] == "tëxt " + "x" * 10 and by_id[10]["raw"] is not None


EDGES = """CREATE TABLE public.edges (id bigint PRIMARY KEY, updated bigint NOT NULL, n numeric(6,2), n_free numeric,
  ts timestamp, tz timestamptz, s smallint, arr integer[], words text[])"""
EDGE_ROWS = """INSERT INTO edges VALUES
  (1, 1, 'NaN', 'NaN', '0001-01-01 00:00', '9999-12-31 23:59:59.999999+00', -32768, '{1,NULL,3}', '{"a",NULL}'),
  (2, 1, 9999.99, '123456789012345678901234567890.123456789', '1970-01-01', '1969-12-31 23:59:59.999999+00', 32767,
   '{}', '{}'),
  (3, 2, -0.01, '-0', NULL, NULL, NULL, NULL, NULL)"""


@pytest.mark.parametrize("writer", ["avro", "parquet"])
def test_the_native_reader_keeps_every_value_and_refuses_what_the_row_path_refuses(tmp_path: Path, pg, db,
                                                                                  writer: str) -> None:
    """A NaN in numeric(6,2) has no Avro or Parquet decimal: a bad record on both paths, the rest written alike."""
    with pg.connect(db) as conn:
        conn.execute(EDGES)
        conn.execute(EDGE_ROWS)

    def make_job(tmp: Path) -> dict[str, Any]:
        table: dict[str, Any] = {"table": "public.edges", "watermark_column": "updated", "primary_key": "id"}
        if writer == "avro":  # the avro writer's Arrow encoder has no arrays: a task with them keeps to the row path
            table["columns"] = ["id", "updated", "n", "n_free", "ts", "tz", "s"]
        job = jdbc_job(tmp, pg, db, [table], partitions=1, fetch_rows=2)
        job["writer"] = {"class": writer}
        return job

    results, outputs = run_both_paths(tmp_path, make_job, "public.edges", "native", f".{writer}")
    assert outputs[True] == outputs[False] and outputs[True]
    for columnar in (True, False):
        [dataset] = results[columnar].datasets
        assert dataset.records_rejected == 1  # row 1: its NaN
    assert sum(t.records_columnar for t in results[True].tasks) == 1  # the batch of row 3; rows 1-2 by row
