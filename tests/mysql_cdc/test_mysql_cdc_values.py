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
LABELS = {  # a utf8mb4 table's ENUM and SET labels beyond Latin-1 (MariaDB's default charset is latin1)
    "e": ("enum('a','ç','€','😀')", lambda r: r.choice(["a", "ç", "€", "😀", "not one"])),
    "st": ("set('€','ç','a','😀')", lambda r: r.choice(["", "ç", "€,a", "😀,ç", "€,ç,a,😀"])),  # not in code order
}
LATIN1 = {"stl": ("set('é','x','ç')", lambda r: r.choice(["", "é", "x,ç", "é,x,ç"]))}  # non-ASCII SET members


def test_a_row_read_by_the_snapshot_and_from_the_binlog_gives_one_record(tmp_path: Path, binlog_maria: Any,
                                                                         mdb: str) -> None:
    """Issue 45: BIT(1) 0 read from the binlog was written True (the library gives the text '0'), and every BIT(n)
    change went to the error file (its text of digits); an ENUM or SET label not ASCII in a latin1 table came back ''
    (the library decodes labels as UTF-8), an empty SET NULL, and a SET's members in code order: all now read as the
    snapshot reads them, in a latin1 and a utf8mb4 table."""
    maria = binlog_maria
    latin = {c: t for c, t in {**FAST, **LIBRARY, **LATIN1}.items()
             if c not in OUT_OF_RANGE and not (t[0].startswith("time") and not t[0].startswith("timestamp"))}
    # t has a geometry column: the library decodes its rows (`binlog.scan`'s fallback); u and v `rows.py`
    tables = {"t": (latin, ""), "u": ({**LABELS, "vc": FAST["vc"]}, " DEFAULT CHARSET utf8mb4"),
              "v": ({"e": FAST["e"], **LATIN1}, " DEFAULT CHARSET latin1")}
    r = random.Random(3)
    rows = {name: [[None if r.random() < 0.1 else make(r) for _, make in types.values()] for _ in range(40)]
            + [[make(r) for _, make in types.values()], [None] * len(types)]  # the last two: none NULL, all NULL
            for name, (types, _) in tables.items()}
    for name, (types, charset) in tables.items():
        maria.execute(mdb, f"CREATE TABLE {name} (id int PRIMARY KEY, "
                      + ", ".join(f"{c} {d}" for c, (d, _) in types.items()) + ")" + charset)

    def insert(base: int) -> None:
        with maria.connect(mdb) as conn, conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = '', time_zone = '+00:00'")  # as test_mysql_cdc_rows fills its tables
            for name, (types, _) in tables.items():
                for k, row in enumerate(rows[name]):
                    cur.execute(f"INSERT INTO {name} (id, {', '.join(types)}) VALUES ({base + k}, "
                                + ", ".join(["%s"] * len(types)) + ")", row)

    insert(0)
    job = cdc_job(tmp_path, maria, mdb, list(tables))
    assert run(tmp_path, job).succeeded  # the snapshot
    insert(10_000)
    assert run(tmp_path, job).succeeded  # the same rows as changes
    assert not [str(p) for p in (tmp_path / "output").rglob("*.errors.jsonl") if p.stat().st_size]
    for name, (types, _) in tables.items():
        got = {c["id"]: c for c in read_changes(tmp_path / "output", f"{mdb}.{name}") if c["_op"] in ("read", "insert")}
        n = len(rows[name])
        assert sorted(got) == [*range(n), *range(10_000, 10_000 + n)]
        differ = [(name, k, c, got[k][c], got[10_000 + k][c]) for k in range(n) for c in types
                  if got[k][c] != got[10_000 + k][c]]
        assert not differ, differ[:10]
        for c in ("e", "st", "stl"):  # the values the fixes are about were drawn
            if c in types:
                seen = {got[k][c] for k in range(n)}
                assert {None, ""} <= seen, (name, c, seen)
                assert types[c][0].isascii() or any(v and not v.isascii() for v in seen), (name, c, seen)
    bits = [c["bt"] for c in read_changes(tmp_path / "output", f"{mdb}.t") if c["_op"] == "read"]
    assert False in bits and True in bits  # both BIT(1) values drawn


def test_a_snapshot_chunk_made_a_column_at_a_time_equals_its_records(tmp_path: Path, binlog_maria: Any, mdb: str,
                                                                     monkeypatch: Any) -> None:
    """Issue 45: a chunk's rows go to the writer as Arrow made a column at a time (`_chunk_arrow`), not record by
    record: every chunk batch must equal the row path's records of it made Arrow (`records_arrow`), schema and values,
    for every mapped column type, and be refused where the row path's conversion is refused."""

    from gobblin_py.api.batches import RawBatch
    from gobblin_py.builtin.schemas.arrow_rows import RECORDS, records_arrow
    from gobblin_py.builtin.sources.mysql_cdc.extractor import ChunkRows, MysqlCdcExtractor

    maria = binlog_maria
    types = {c: t for c, t in {**FAST, **LIBRARY}.items() if c not in ("g", "bt64")}  # geometry has no mapping
    r = random.Random(5)
    rows = [[None if r.random() < 0.1 else make(r) for _, make in types.values()] for _ in range(2500)]
    maria.execute(mdb, "CREATE TABLE t (id int PRIMARY KEY, " + ", ".join(f"{c} {d}" for c, (d, _) in types.items())
                  + ") DEFAULT CHARSET utf8mb4")
    with maria.connect(mdb) as conn, conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = '', time_zone = '+00:00'")
        cur.executemany(f"INSERT INTO t (id, {', '.join(types)}) VALUES (%s, " + ", ".join(["%s"] * len(types)) + ")",
                        [[k, *row] for k, row in enumerate(rows)])
    real, compared = MysqlCdcExtractor.to_arrow, []

    def both(self: Any, batch: Any) -> Any:
        got = real(self, batch)
        if isinstance(batch.values, ChunkRows):
            want = records_arrow(RawBatch(RECORDS, [(rec, "") for rec in self.records_of(batch)]), self._arrow)
            compared.append((got is not None, want is not None))
            assert (got is None) == (want is None)
            assert got is None or (got.schema == want.schema and got.equals(want)), (got.schema, want.schema)
        return got

    monkeypatch.setattr(MysqlCdcExtractor, "to_arrow", both)
    job = cdc_job(tmp_path, maria, mdb, ["t"], snapshot={"chunk_rows": 1200})
    job["writer"] = {"class": "parquet"}
    assert run(tmp_path, job).succeeded
    assert len(compared) == 5, compared  # chunks of 1,200, 1,200 and 100 rows, a thousand rows a batch
    # zero dates and TIME outside a day are bad records on both paths: batches holding them go record by record
    no_time = {c: t for c, t in types.items() if c not in OUT_OF_RANGE
               and (not t[0].startswith("time") or t[0].startswith("timestamp"))}
    maria.execute(mdb, f"CREATE TABLE u (id int PRIMARY KEY, {', '.join(f'{c} {d}' for c, (d, _) in no_time.items())})"
                  " DEFAULT CHARSET utf8mb4", f"INSERT INTO u SELECT id, {', '.join(no_time)} FROM t")
    compared.clear()
    (tmp_path / "u").mkdir()
    job = cdc_job(tmp_path / "u", maria, mdb, ["u"], snapshot={"chunk_rows": 1200})
    job["writer"] = {"class": "parquet"}
    assert run(tmp_path / "u", job).succeeded
    assert compared and all(got for got, _ in compared), compared  # the columnar path taken


def test_a_chunk_read_by_connectorx_equals_the_chunk_read_by_rows(tmp_path: Path, binlog_maria: Any, mdb: str,
                                                                   monkeypatch: Any) -> None:
    """Issue 45: a chunk whose columns ConnectorX reads as PyMySQL does is read by it (`read_chunk_native`): the same
    Arrow batches (schema and values) and the same records on the row path as the chunk read by PyMySQL, every such
    column type, `timestamp` included with the server's zone not UTC (the session's is set to UTC)."""
    import pyarrow as pa

    from gobblin_py.builtin.sources.mysql_cdc import extractor
    from gobblin_py.builtin.sources.mysql_cdc.extractor import ChunkRows, MysqlCdcExtractor

    maria = binlog_maria
    types = {c: FAST[c] for c in ("ti", "tiu", "si", "siu", "mi", "miu", "i", "iu", "bi", "f", "d", "y", "c", "vc",
                                  "lat", "bn", "vb", "tt", "t", "mt", "lt", "tb", "bl", "mb", "dtm1", "dtm3", "dtm6",
                                  "ts2", "ts6", "dm", "dm9", "dmf")}
    r = random.Random(7)
    rows = [[k, *[None if r.random() < 0.1 else make(r) for _, make in types.values()]] for k in range(2500)]
    maria.execute(mdb, "CREATE TABLE t (id int PRIMARY KEY, " + ", ".join(f"{c} {d}" for c, (d, _) in types.items())
                  + ") DEFAULT CHARSET utf8mb4")
    with maria.connect(mdb) as conn, conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = '', time_zone = '+00:00'")
        cur.executemany(f"INSERT INTO t (id, {', '.join(types)}) VALUES (%s, " + ", ".join(["%s"] * len(types)) + ")",
                        rows)
    real, seen = MysqlCdcExtractor.to_arrow, []

    def both(self: Any, batch: Any) -> Any:
        got = real(self, batch)
        if isinstance(batch.values, ChunkRows):
            seen.append((batch.values.arrow is not None, got, list(self.records_of(batch))))
        return got

    monkeypatch.setattr(MysqlCdcExtractor, "to_arrow", both)
    maria.root_execute("SET GLOBAL time_zone = '+05:00'")  # ConnectorX's session starts in the server's zone
    try:
        out = {}
        for way in ("rows", "native"):
            seen.clear()
            if way == "rows":
                monkeypatch.setattr(extractor, "read_chunk_native", lambda *a, **k: None)
            else:
                monkeypatch.undo()
                monkeypatch.setattr(MysqlCdcExtractor, "to_arrow", both)
            (tmp_path / way).mkdir()
            job = cdc_job(tmp_path / way, maria, mdb, ["t"], snapshot={"chunk_rows": 1200})
            job["writer"] = {"class": "parquet"}
            assert run(tmp_path / way, job).succeeded
            assert {native for native, _, _ in seen} == {way == "native"}, way
            assert all(got is not None for _, got, _ in seen), way  # every batch took the columnar path
            out[way] = (pa.Table.from_batches([got for _, got, _ in seen]), [rec for _, _, recs in seen for rec in recs])
    finally:
        maria.root_execute("SET GLOBAL time_zone = 'SYSTEM'")
    (rows_arrow, rows_records), (native_arrow, native_records) = out["rows"], out["native"]
    assert native_arrow.num_rows == 2500 and native_arrow.schema == rows_arrow.schema
    differ = [c for c in rows_arrow.column_names if not native_arrow.column(c).equals(rows_arrow.column(c))]
    assert not differ, differ
    assert native_records == rows_records
