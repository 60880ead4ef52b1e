"""Plans a table's chunked snapshot (`chunks.py` explains it): its key checked, its boundaries computed once, then each
run the stream's filter and the WorkUnits of the next pending chunks, outside the slot's MultiWorkUnit."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from gobblin_py.api import SourceState, WorkUnit
from gobblin_py.api.names import identity_hash, workunit_id
from gobblin_py.builtin.sources.postgres_cdc.chunks import (
    CHUNK_KEY,
    KEPT_NAME,
    KEY_TYPES,
    RESNAPSHOT,
    ChunkPlan,
    key_expressions,
)
from gobblin_py.builtin.sources.postgres_cdc.columns import checked_primary
from gobblin_py.builtin.sources.postgres_cdc.settings import PostgresCdcSettings, lsn_text
from gobblin_py.builtin.sources.postgres_cdc.split import CdcSplit
from gobblin_py.builtin.sources.postgres_cdc.visibility import Snapshot
from gobblin_py.errors import ConfigError, SourceError

log = logging.getLogger(__name__)

def chunk_key(conn: Any, split: CdcSplit) -> list[list[Any]]:
    """The table's primary key as [[column, base type oid], …]; ConfigError naming the table when it cannot chunk it."""
    names = checked_primary(conn, split)
    if not names:
        raise ConfigError(f"table {split.table} has no primary key, and a chunked snapshot splits a table by it: add "
                          "one, or leave source.snapshot_chunk_rows unset (the table is then snapshotted in one "
                          "transaction)")
    key = [[n, split.types[split.columns.index(n)][2]] for n in names]
    odd = [f"{n} (type oid {t})" for n, t in key if t not in KEY_TYPES]
    if odd:
        raise ConfigError(f"table {split.table}: its primary key column(s) {', '.join(odd)} are not of a type a chunked "
                          "snapshot splits by (integers, text, varchar, uuid): leave source.snapshot_chunk_rows unset "
                          "(one transaction)")
    return key


SAMPLE_ABOVE_PAGES = 10_000
"""A table of more heap pages than this (80 MiB at 8 KiB pages) gets its boundaries from a sample of its keys: the
exact every-n-th key takes a window over every key in order, about 1 s per 2,000,000 rows here (issue 45)."""
SAMPLE_ROWS = 20_000
"""About how many keys a sampled table's boundaries are taken from (TABLESAMPLE BERNOULLI: each row alike, so a
chunk's share of the sample is its share of the rows within a few per cent; SYSTEM, whole pages, was as slow for
that accuracy)."""


def boundaries(conn: Any, split: CdcSplit, key: list[list[Any]], rows: int) -> list[list[Any]]:
    """The keys that start each chunk after the first: every `rows`-th key in key order, or, for a table of more than
    SAMPLE_ABOVE_PAGES pages, the same quantiles of a sample of its keys (chunks of about `rows` rows each). Either
    way strictly increasing in the order the chunk ranges compare keys (`key_expressions`); which keys start the
    chunks changes only their sizes, never what the chunks hold together (every key, once)."""
    from psycopg import sql

    exprs = key_expressions(key)
    named = sql.SQL(", ").join(sql.SQL("{} AS {}").format(e, sql.Identifier(f"k{i}")) for i, e in enumerate(exprs))
    order = sql.SQL(", ").join(exprs)
    out = sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(f"k{i}")) if KEY_TYPES[t] == "uuid"
                             else sql.Identifier(f"k{i}") for i, (_, t) in enumerate(key))
    table = sql.Identifier(split.schema_name, split.table_name)
    pages, tuples, counted = conn.execute(
        "SELECT pg_relation_size(oid) / current_setting('block_size')::int, reltuples, relpages FROM pg_class "
        "WHERE oid = %s", (split.oid,)).fetchone()
    if int(pages) > SAMPLE_ABOVE_PAGES:  # rows by the last ANALYZE's rows a page, else a guess of 50 a page
        estimate = int(pages) * (float(tuples) / int(counted) if tuples > 0 and counted > 0 else 50.0)
        percent = min(100.0, 100.0 * max(SAMPLE_ROWS, 100 * estimate / rows) / estimate)
        return _sampled(conn, sql.SQL("SELECT {} FROM (SELECT {}, row_number() OVER (ORDER BY {}) AS rn FROM {} "
                                      "TABLESAMPLE BERNOULLI ({}) REPEATABLE (0)) s ORDER BY rn").format(
            out, named, order, table, sql.Literal(percent)), percent, rows, split.table)
    query = sql.SQL("SELECT {} FROM (SELECT {}, row_number() OVER (ORDER BY {}) AS rn FROM {}) s "
                    "WHERE rn % {} = 1 AND rn > 1 ORDER BY rn").format(out, named, order, table, sql.Literal(rows))
    return [list(r) for r in conn.execute(query).fetchall()]


def _sampled(conn: Any, query: Any, percent: float, rows: int, table: str) -> list[list[Any]]:
    """The quantiles of the sampled keys (in key order) that cut the table into chunks of about `rows` rows, the
    table's row count estimated from the sample's (each row is in it with probability `percent` / 100)."""
    sample = [list(r) for r in conn.execute(query).fetchall()]
    chunks = max(1, round(len(sample) * 100.0 / percent / rows))
    picked: list[list[Any]] = []
    for k in range(1, chunks):
        candidate = sample[k * len(sample) // chunks]
        if not picked or candidate != picked[-1]:
            picked.append(candidate)
    log.info("%s: chunk boundaries from a sample of %d key(s) (%.3f%% of its rows): %d chunk(s)", table, len(sample),
             percent, len(picked) + 1)
    return picked


def plan_chunks(s: PostgresCdcSettings, conn: Any, state: SourceState, stream: WorkUnit, end: int, low: int | None,
                table_bytes: int) -> tuple[WorkUnit, list[WorkUnit]]:
    """The table's stream WorkUnit with its chunk filter and kept plan, and this run's chunk WorkUnits: unchanged and
    none when the table has no chunked snapshot going on and needs none (`low`: its committed watermark)."""
    split: CdcSplit = CdcSplit.of(stream)
    kept = state.kept(split.table)
    again = low is not None and kept.get(RESNAPSHOT) is not None  # `gobblin-py snapshot --table`
    plan = None if again else ChunkPlan.of_kept(kept.get(KEPT_NAME), split.table)
    if plan is None and low is not None and not again:
        return stream, []
    key = chunk_key(conn, split)
    fresh = plan is None and low is None  # a table new to the output, or reset: what the output holds of it goes
    if plan is None:
        plan = ChunkPlan(identity_hash(split.table, split.oid, end)[:16], key,
                         boundaries(conn, split, key, s.snapshot_chunk_rows or 1), again=again)
        log.info("%s: chunked snapshot planned, %d chunk(s) of about %s row(s)", split.table, len(plan.done),
                 s.snapshot_chunk_rows)
    elif plan.key != key:
        raise SourceError(f"table {split.table}: its primary key changed during its chunked snapshot (was "
                          f"{plan.key}, now {key}: [column, type oid]), so its chunks no longer split the keys its "
                          f"changes carry. Snapshot it again: `gobblin-py state reset JOB.yaml --dataset {split.table} "
                          "--yes`, then run")
    plan.absorb(state.watermarks(split.table))
    if plan.done_at is not None and low is not None and low >= plan.done_at:
        log.info("%s: chunked snapshot done, its filter dropped", split.table)
        return dataclasses.replace(stream, props={**stream.props, f"state.{KEPT_NAME}": None}), []
    pending = plan.pending()
    if not pending and plan.done_at is None:
        xmin = Snapshot(conn.execute("SELECT pg_current_snapshot()::text").fetchone()[0]).xmin
        if xmin >= max(Snapshot(d).xmax for d in plan.done if d is not None):
            plan.done_at = end  # every change from here on is invisible to every chunk's snapshot
    props = {**stream.props, f"state.{KEPT_NAME}": plan.kept()}
    filtered = split.model_copy(update={"snapshot": False, "snapshot_bytes": 0,
                                        "chunks": {**plan.stream_filter(), "fresh": fresh}})
    unit = dataclasses.replace(stream, id=workunit_id(f"{split.table}.{split.low}-{split.end}", stream.id, plan.plan,
                                                      str(len(pending))),
                               split=filtered.packed(), props=props)
    chunks = []
    for j, i in enumerate(pending[:s.snapshot_chunks_per_run]):
        low_key, high_key = plan.range(i)
        chunk = split.model_copy(update={
            "low": end, "end": end, "snapshot": False, "wal_bytes": 0,
            "snapshot_bytes": table_bytes // max(1, len(plan.done)),
            "chunk": {"plan": plan.plan, "index": i, "key": plan.key, "low": low_key, "high": high_key}})
        chunks.append(WorkUnit(id=workunit_id(f"{split.table}.chunk{i}", "postgres_cdc", s.endpoint, s.database, s.slot,
                                              split.table, plan.plan, str(i), str(end)),
                               dataset=split.table, watermark_key=f"{CHUNK_KEY}{j}", low_watermark=None,
                               expected_high_watermark=None, split=chunk.packed(), props=props))
    log.info("%s: chunked snapshot, %d of %d chunk(s) pending, reading %d at %s", split.table, len(pending),
             len(plan.done), len(chunks), lsn_text(end))
    return unit, chunks
