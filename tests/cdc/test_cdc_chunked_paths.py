"""The chunked snapshot's fast paths against the paths they replace: a chunk read through ADBC as Arrow (its change
fields made in Arrow) gives the records psycopg's row cursor gives, every mapped type, nulls, non-ASCII text keys,
uuid keys and composite keys; boundaries taken from a sample of a large table's keys split it into chunks that hold
every key once, of about the asked size, and a snapshot planned by them over runs with concurrent writes replays to
the table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cdc.cdc_jobs import cdc_job, run
from cdc.test_cdc_chunked import Writer, check_output, chunk_state

from gobblin_py.builtin.sources.postgres_cdc import chunk_plan

TYPES = """s smallint, n numeric(10,3), nn numeric, f float8, b boolean, d date, ts timestamp, tz timestamptz,
           tags text[], doc jsonb, u uuid, raw bytea, note text"""
VALUES = """(i % 100)::smallint, i / 7.0, CASE WHEN i % 50 = 0 THEN 'NaN' ELSE i * 1.5 END, i / 3.0, i % 2 = 0,
            DATE '2024-01-01' + i, TIMESTAMP '2024-01-01 00:00' + i * interval '1 minute',
            TIMESTAMPTZ '2024-01-01 00:00+02' + i * interval '1 second', ARRAY['a', i::text], jsonb_build_object('i', i),
            md5(i::text)::uuid, decode(md5(i::text), 'hex'), CASE WHEN i % 7 = 0 THEN NULL ELSE 'ñ' || i END"""
KEYS = {  # the table's key columns and how a row i makes them
    "bigint": ("id bigint PRIMARY KEY", "i"),
    "text, non-ASCII": ("id text PRIMARY KEY", "(ARRAY['é', 'Z', 'a', 'ß', '日本', 'Ω'])[1 + i % 6] || i"),
    "uuid": ("id uuid PRIMARY KEY", "md5('k' || i)::uuid"),
    "text+int": ("ka text, kb int, PRIMARY KEY (ka, kb)", "(ARRAY['Ä', 'b', 'B', 'ü'])[1 + i % 4], i / 4"),
}


def outputs(tmp: Path, pg: Any, db: str, columnar: bool, table: str = "public.t") -> list[dict[str, Any]]:
    """The records of a chunked snapshot of `table` in chunks of 300, read back from Parquet in (_seq) order."""
    pq = pytest.importorskip("pyarrow.parquet")
    folder = tmp / ("native" if columnar else "rows")
    folder.mkdir()
    job = cdc_job(folder, pg, db, tables=[table], create_publication=True,
                  slot=f"s_{int(columnar)}", snapshot_chunk_rows=300, snapshot_chunks_per_run=100)
    job["job"]["columnar"] = columnar
    job["writer"] = {"class": "parquet"}
    done = run(folder, job)
    assert done.succeeded, done.error
    records = [r for f in sorted((folder / "output" / table).rglob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    return sorted(records, key=lambda r: r["_seq"])


@pytest.mark.parametrize("kind", sorted(KEYS))
def test_a_chunk_read_natively_gives_the_records_the_row_cursor_gives(tmp_path: Path, pg: Any, db: str,
                                                                      kind: str) -> None:
    pytest.importorskip("adbc_driver_postgresql")
    columns, key = KEYS[kind]
    conn = pg.connect(db)
    conn.execute(f"CREATE TABLE public.t ({columns}, {TYPES}); "
                 f"INSERT INTO public.t SELECT {key}, {VALUES} FROM generate_series(1, 2000) AS i")
    conn.execute("INSERT INTO public.t SELECT {}, {} FROM generate_series(2001, 2001) AS i".format(
        key, ", ".join(["NULL"] * 13)))  # a row of nulls but its key
    native, rows = outputs(tmp_path, pg, db, True), outputs(tmp_path, pg, db, False)
    assert [r["_op"] for r in native[:2]] == ["truncate", "read"] and len(native) == 2002
    assert len({r["_lsn"] for r in native}) == 1 and len({r["_lsn"] for r in rows}) == 1  # each its own slot's end - 1
    assert len({r["_seq"] >> 32 for r in native if r["_op"] == "read"}) >= 6, "not several chunks"
    for out in (native, rows):
        assert len({r["_seq"] for r in out}) == len(out), "two records at one _seq"

    def by_key(out: list[dict[str, Any]]) -> list[dict[str, Any]]:  # a chunk's rows come in the order its scan gives
        same = [{**{k: v for k, v in r.items() if k != "_lsn"}, "_seq": r["_seq"] >> 32} for r in out]
        return sorted(same, key=lambda r: (r["_seq"], repr([r[c] for c in ("id", "ka", "kb") if c in r])))

    for a, b in zip(by_key(native), by_key(rows), strict=True):
        assert a == b
    conn.close()


def test_sampled_boundaries_split_every_key_once_in_chunks_of_about_the_size(pg: Any, db: str,
                                                                            monkeypatch: Any) -> None:
    """A table of 60,000 (text, int) keys, mixed case and non-ASCII, chunked by 5,000 rows from a sample: strictly
    increasing boundaries in the chunks' own order, about 12 chunks, each within a third of the size, together every
    row once."""
    from psycopg import sql

    from gobblin_py.builtin.sources.postgres_cdc.chunks import range_condition
    from gobblin_py.builtin.sources.postgres_cdc.split import CdcSplit

    monkeypatch.setattr(chunk_plan, "SAMPLE_ABOVE_PAGES", 0)
    conn = pg.connect(db)
    conn.execute("CREATE TABLE public.k (a text, b int, v text, PRIMARY KEY (a, b)); INSERT INTO public.k SELECT "
                 "(ARRAY['é', 'Z', 'a', 'ß', '日本', 'A'])[1 + g % 6] || (g % 997), g, 'r' || g "
                 "FROM generate_series(1, 60000) g; ANALYZE public.k")
    oid = conn.execute("SELECT 'public.k'::regclass::oid").fetchone()[0]
    split = CdcSplit(table="public.k", schema_name="public", table_name="k", oid=oid, columns=["a", "b", "v"],
                     types=[[25, -1, 25], [23, -1, 23], [25, -1, 25]], avro_schema={}, low=0, end=0, snapshot=False,
                     tables=["public.k"])
    key = chunk_plan.chunk_key(conn, split)
    bounds = chunk_plan.boundaries(conn, split, key, 5000)
    assert 9 <= len(bounds) + 1 <= 15, bounds
    assert all(tuple(x) < tuple(y) for x, y in zip(bounds, bounds[1:])), "boundaries not strictly increasing"
    edges = [None, *bounds, None]
    sizes = [conn.execute(sql.SQL("SELECT count(*) FROM public.k WHERE {}").format(
        range_condition(key, low, high))).fetchone()[0] for low, high in zip(edges, edges[1:])]
    assert sum(sizes) == 60000
    assert all(5000 * 2 / 3 <= n <= 5000 * 4 / 3 for n in sizes), sizes
    conn.close()


def test_a_snapshot_chunked_by_sampled_boundaries_replays_to_the_table(tmp_path: Path, pg: Any, db: str,
                                                                       monkeypatch: Any) -> None:
    """The concurrent-writes run of test_cdc_chunked with the boundaries from a sample (every table sampled)."""
    monkeypatch.setattr(chunk_plan, "SAMPLE_ABOVE_PAGES", 0)
    monkeypatch.setattr(chunk_plan, "SAMPLE_ROWS", 200)
    conn = pg.connect(db)
    conn.execute("CREATE TABLE public.t (id int PRIMARY KEY, v text); "
                 "INSERT INTO public.t SELECT g, 'r' || g FROM generate_series(1, 600) g")
    job = cdc_job(tmp_path, pg, db, tables=["public.t"], create_publication=True, snapshot_chunk_rows=50,
                  snapshot_chunks_per_run=3)
    between = Writer(pg, db, 11)
    plans = []
    for n in range(12):
        writer = Writer(pg, db, 100 + n)
        writer.start()
        result = run(tmp_path, job)
        writer.finish()
        assert result.succeeded, result.error
        kept = chunk_state(tmp_path, "public.t")
        plans.append(None if kept is None else len(kept[1]["done"]))
        for _ in range(20):
            between.step()
        if kept is None:
            break
    assert plans[0] is not None and plans[0] >= 6 and plans[-1] is None, plans
    done = run(tmp_path, job)
    assert done.succeeded, done.error
    check_output(tmp_path, conn, "public.t")
    conn.close()


def test_a_kept_adbc_connection_reads_each_snapshot_its_own_and_one_the_server_closed_is_replaced(pg: Any,
                                                                                               db: str) -> None:
    """A snapshot read through ADBC keeps its connection for the next read: that read sees its own snapshot (a row
    committed between the two is in the second, one committed after its export in neither), and a kept connection
    the server terminated meanwhile is replaced, not an error."""
    pytest.importorskip("adbc_driver_postgresql")
    from cdc.cdc_jobs import PASSWORD_ENV

    from gobblin_py.builtin.sources.postgres_cdc import native
    from gobblin_py.builtin.sources.postgres_cdc.settings import PostgresCdcSettings

    s = PostgresCdcSettings(url=pg.url(db), password_env=PASSWORD_ENV, slot="s1", publication="pub")
    writer = pg.connect(db)
    writer.execute("CREATE TABLE public.r (id int PRIMARY KEY)")

    def read(first: int) -> list[int]:
        writer.execute("INSERT INTO public.r VALUES (%s)", (first,))
        exporter = pg.connect(db, autocommit=False)
        exporter.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        exported = exporter.execute("SELECT pg_export_snapshot()").fetchone()[0]
        writer.execute("INSERT INTO public.r VALUES (%s)", (first + 1000,))  # after the snapshot: not in it
        batches = list(native.snapshot_batches(s, exported, "SELECT id FROM public.r ORDER BY id", 100, "public.r"))
        exporter.close()
        return [i for b in batches for i in b.column("id").to_pylist()]

    def kept() -> int:
        return sum(len(v) for v in native._kept.values())

    native._close_kept()
    assert read(1) == [1]
    assert kept() == 1
    assert read(2) == [1, 2, 1001]
    assert kept() == 1, "the connection was not used again"
    ended = writer.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                           "WHERE application_name = 'gobblin-py cdc' AND datname = %s", (db,)).fetchone()[0]
    assert ended == 1
    assert read(3) == [1, 2, 3, 1001, 1002]
    native._close_kept()
    writer.close()


def test_a_forked_child_forgets_the_kept_adbc_connections() -> None:
    """A child forked after a read (a Spark worker, a subprocess) must not use, nor close, its parent's connection:
    both would speak on the parent's socket."""
    import os

    from gobblin_py.builtin.sources.postgres_cdc import native

    marker = object()
    native._kept["postgresql://x"] = [(0.0, marker)]
    try:
        pid = os.fork()
        if pid == 0:
            os._exit(0 if not native._kept else 1)
        assert os.waitpid(pid, 0)[1] == 0, "the child saw its parent's kept connections"
        assert native._kept["postgresql://x"] == [(0.0, marker)], "the parent lost them"
    finally:
        native._kept.pop("postgresql://x", None)


def test_at_most_keep_adbc_connections_are_kept_the_oldest_closed() -> None:
    """However many servers a process reads, it keeps at most KEEP idle connections: a newer one closes the oldest."""
    from gobblin_py.builtin.sources.postgres_cdc import native

    class Fake:
        def __init__(self) -> None:
            self.closed = False

        def rollback(self) -> None:
            pass

        def close(self) -> None:
            self.closed = True

    native._close_kept()
    made = [Fake() for _ in range(native.KEEP + 2)]
    for i, conn in enumerate(made):
        native._give(f"postgresql://server{i % 3}", conn)
    assert [c.closed for c in made] == [True, True] + [False] * native.KEEP
    assert sum(len(v) for v in native._kept.values()) == native.KEEP
    native._close_kept()
    assert all(c.closed for c in made)
