"""The postgres_cdc source end to end: snapshot, then every change once in commit order, the slot released to the
committed position."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cdc.cdc_jobs import cdc_job, read_changes, run, slot_position

from gobblin_py.state.store import StateStore

SETUP = """
CREATE TABLE public.a (id int PRIMARY KEY, v text, n numeric(6,2), ts timestamptz);
CREATE TABLE public.b (k bigint PRIMARY KEY, tags text[], doc jsonb);
INSERT INTO public.a VALUES (1, 'one', 1.50, '2024-01-01 00:00:00+00'), (2, 'two', 2.25, NULL);
INSERT INTO public.b VALUES (10, '{x,y}', '{"q": 1}');
"""


def _ops(rows: list[dict[str, Any]], key: str) -> list[tuple[str, Any]]:
    return [(r["_op"], r[key]) for r in rows]


def test_snapshot_then_changes_once_in_order(tmp_path: Path, pg: Any, db: str) -> None:
    conn = pg.connect(db)
    conn.execute(SETUP)
    job = cdc_job(tmp_path, pg, db, tables=["public.a", "public.b"], create_publication=True)
    first = run(tmp_path, job)
    assert first.succeeded, first.error
    a = read_changes(tmp_path / "output", "public.a")
    assert _ops(a, "id")[0] == ("truncate", None)  # a snapshot replaces what a consumer held
    assert sorted(_ops(a, "id")[1:]) == [("read", 1), ("read", 2)]
    assert {r["id"]: r["v"] for r in a[1:]} == {1: "one", 2: "two"}

    conn.execute("INSERT INTO public.a VALUES (3, 'three', 3, now())")
    with conn.transaction():  # one transaction across both tables, a key updated many times
        conn.execute("UPDATE public.a SET v = 'one-1' WHERE id = 1")
        conn.execute("INSERT INTO public.b VALUES (11, '{}', 'null')")
        conn.execute("UPDATE public.a SET v = 'one-2' WHERE id = 1")
        conn.execute("UPDATE public.a SET v = 'one-3' WHERE id = 1")
    conn.execute("DELETE FROM public.a WHERE id = 2")
    conn.execute("INSERT INTO public.a VALUES (2, 'two again', 2, NULL)")
    conn.execute("TRUNCATE public.b")
    conn.execute("INSERT INTO public.b VALUES (12, '{z}', '[1]')")
    second = run(tmp_path, job)
    assert second.succeeded, second.error
    a = read_changes(tmp_path / "output", "public.a")
    changes = [r for r in a if r["_op"] != "read"][1:]
    assert _ops(changes, "id") == [("insert", 3), ("update", 1), ("update", 1), ("update", 1), ("delete", 2), ("insert", 2)]
    assert [r["v"] for r in changes[1:4]] == ["one-1", "one-2", "one-3"]
    assert changes[4]["v"] is None  # a delete carries the key only
    assert len({r["_lsn"] for r in changes[1:4]}) == 1 and [r["_seq"] for r in changes[1:4]] == [0, 1, 2]
    b = read_changes(tmp_path / "output", "public.b")
    assert _ops(b, "k") == [("truncate", None), ("read", 10), ("insert", 11), ("truncate", None), ("insert", 12)]
    b = b[1:]
    assert b[0]["tags"] == ["x", "y"] and b[0]["doc"] == '{"q": 1}'
    assert changes[1]["_lsn"] == b[1]["_lsn"] and changes[1]["_xid"] == b[1]["_xid"]  # the same transaction

    marks = StateStore(tmp_path / "work", "c").watermarks()
    assert slot_position(conn) == min(int(m["lsn"]) for m in marks.values())
    third = run(tmp_path, job)  # nothing new: nothing twice, the watermarks still move
    assert third.succeeded, third.error
    assert read_changes(tmp_path / "output", "public.a") == a
    assert slot_position(conn) == min(int(m["lsn"]) for m in StateStore(tmp_path / "work", "c").watermarks().values())


def test_a_change_whose_value_python_cannot_hold_is_a_bad_record_and_the_others_commit(tmp_path: Path, pg: Any, db: str) -> None:
    """A date at `infinity` (PostgreSQL has it, Python's date has not) in a change: the error file names the table,
    the change and the column with the value as the database sent it; the changes around it are committed."""
    from gobblin_py.testing.outputs import read_error_files

    conn = pg.connect(db)
    conn.execute("CREATE TABLE public.d (id int PRIMARY KEY, due date); INSERT INTO public.d VALUES (1, '2024-05-01')")
    job = cdc_job(tmp_path, pg, db, tables=["public.d"], create_publication=True)
    assert run(tmp_path, job).succeeded
    conn.execute("INSERT INTO public.d VALUES (2, '2024-06-01'), (3, 'infinity'), (4, '2024-07-01')")
    second = run(tmp_path, job)
    assert second.succeeded, second.error
    rows = read_changes(tmp_path / "output", "public.d")
    assert _ops(rows, "id") == [("truncate", None), ("read", 1), ("insert", 2), ("insert", 4)]
    (error,) = read_error_files(tmp_path / "output")
    assert error["location"].startswith("public.d insert in transaction") and "column due" in error["reason"]
    assert "'infinity'" in error["reason"] and error["record"]["id"] == "3"
    marks = StateStore(tmp_path / "work", "c").watermarks()
    assert slot_position(conn) == min(int(m["lsn"]) for m in marks.values())


def _valid_history(rows: list[dict[str, Any]], key: str) -> dict[Any, Any]:
    """Replays a table's change records in (_lsn, _seq) order, failing on any that could only come from a change read
    twice or a row both in the snapshot and among the changes (an insert of a live key, an update or delete of a gone
    one); the table it leaves."""
    table: dict[Any, Any] = {}
    for r in rows:
        op, k = r["_op"], r[key]
        if op == "truncate":
            table.clear()
        elif op in ("read", "insert"):
            assert k not in table, f"{op} of key {k} at {r['_lsn']}/{r['_seq']}, which is already there: read twice"
            table[k] = r["v"]
        elif op == "update":
            assert k in table, f"update of key {k} at {r['_lsn']}/{r['_seq']}, which is not there: a change missed"
            table[k] = r["v"]
        else:
            assert table.pop(k, None) is not None or True  # a delete of a row the snapshot never saw cannot be told
    return table


def test_the_snapshot_handoff_under_concurrent_writes_misses_and_doubles_nothing(tmp_path: Path, pg: Any, db: str) -> None:
    """The first run snapshots while other sessions insert, update and delete, some in transactions open across the
    snapshot's start: every change after the snapshot is read once, none it already holds is read again, and the
    change log replays to the table as it is."""
    import random
    import threading
    import time

    conn = pg.connect(db)
    conn.execute("CREATE TABLE public.h (id int PRIMARY KEY, v text); "
                 "INSERT INTO public.h SELECT i, 'v0' FROM generate_series(1, 3000) AS i")
    job = cdc_job(tmp_path, pg, db, tables=["public.h"], create_publication=True)
    stop = threading.Event()
    failed: list[BaseException] = []

    def write(seed: int, hold_s: float) -> None:
        rng, c = random.Random(seed), pg.connect(db)
        next_id = 10_000 * (seed + 1)
        try:
            while not stop.is_set():
                with c.transaction():
                    for _ in range(rng.randint(1, 5)):
                        what = rng.random()
                        if what < 0.4:
                            c.execute("INSERT INTO public.h VALUES (%s, 'new')", (next_id,))
                            next_id += 1
                        elif what < 0.8:
                            c.execute("UPDATE public.h SET v = %s WHERE id = %s", (f"u{seed}-{next_id}", rng.randint(1, 3000)))
                        else:
                            c.execute("DELETE FROM public.h WHERE id = %s", (rng.randint(1, 3000),))
                    time.sleep(rng.uniform(0, hold_s))  # open across the snapshot's start, now and then
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failed.append(exc)
        finally:
            c.close()

    writers = [threading.Thread(target=write, args=(n, hold), daemon=True) for n, hold in ((0, 0.01), (1, 0.3), (2, 1.0))]
    for t in writers:
        t.start()
    time.sleep(0.5)
    try:
        first = run(tmp_path, job)
        assert first.succeeded, first.error
        time.sleep(0.5)
    finally:
        stop.set()
        for t in writers:
            t.join(timeout=30)
    assert not failed, failed
    second = run(tmp_path, job)
    assert second.succeeded, second.error
    rows = read_changes(tmp_path / "output", "public.h")
    reads = [r for r in rows if r["_op"] == "read"]
    assert len(reads) > 2000 and len(rows) > len(reads) + 10, "the writes did not overlap the snapshot"
    assert _valid_history(rows, "id") == dict(conn.execute("SELECT id, v FROM public.h").fetchall())


def test_the_native_snapshot_gives_the_records_the_row_cursor_gives(tmp_path: Path, pg: Any, db: str, caplog: Any) -> None:
    """On the columnar path the snapshot comes through ADBC (in the exported snapshot) as Arrow; with `job.columnar:
    false` through psycopg's row cursor: the same records, every type of the mapping, read back with pyarrow."""
    import logging

    import pytest

    pytest.importorskip("adbc_driver_postgresql")
    pq = pytest.importorskip("pyarrow.parquet")
    conn = pg.connect(db)
    conn.execute("""
        CREATE TABLE public.t (id bigint PRIMARY KEY, s smallint, n numeric(10,3), nn numeric, f float8, b boolean,
                               d date, ts timestamp, tz timestamptz, tags text[], doc jsonb, u uuid, raw bytea);
        INSERT INTO public.t SELECT i, (i % 100)::smallint, i / 7.0, CASE WHEN i % 50 = 0 THEN 'NaN' ELSE i * 1.5 END,
               i / 3.0, i % 2 = 0, DATE '2024-01-01' + i, TIMESTAMP '2024-01-01 00:00' + i * interval '1 minute',
               TIMESTAMPTZ '2024-01-01 00:00+02' + i * interval '1 second', ARRAY['a', i::text],
               jsonb_build_object('i', i), md5(i::text)::uuid, decode(md5(i::text), 'hex')
        FROM generate_series(1, 2500) AS i;
        INSERT INTO public.t (id) VALUES (0);
    """)
    outputs = {}
    for columnar in (True, False):
        folder = tmp_path / ("native" if columnar else "rows")
        folder.mkdir()
        job = cdc_job(folder, pg, db, tables=["public.t"], create_publication=True, slot=f"s_{int(columnar)}")
        job["job"]["columnar"] = columnar
        job["writer"] = {"class": "parquet"}
        with caplog.at_level(logging.INFO, logger="gobblin_py.builtin.sources.postgres_cdc.extractor"):
            caplog.clear()
            done = run(folder, job)
        assert done.succeeded, done.error
        assert ("through ADBC" in caplog.text) == columnar
        records = [r for f in sorted((folder / "output" / "public.t").rglob("*.parquet")) for r in pq.read_table(f).to_pylist()]
        outputs[columnar] = sorted(records, key=lambda r: (r["_seq"] >= 0, r["id"] or 0))
    native, rows = outputs[True], outputs[False]
    assert len(native) == 2502 and [r["_op"] for r in native[:2]] == ["truncate", "read"]
    assert len({r["_lsn"] for r in native}) == 1  # each job's own slot: its position − 1, one per snapshot
    strip = [[{k: v for k, v in r.items() if k not in ("_seq", "_lsn")} for r in out] for out in (native, rows)]
    for a, b in zip(*strip):
        assert a == b
    assert len(strip[0]) == len(strip[1])
