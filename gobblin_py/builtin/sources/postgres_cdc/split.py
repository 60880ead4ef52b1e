"""The postgres_cdc source's split: one table's changes in an LSN range, after its snapshot when it takes one."""

from __future__ import annotations

from typing import Any

from gobblin_py.api.split import Split


class CdcSplit(Split):
    """Changes of `table` (relation `oid`) committed at LSNs in `[low, end)`, decoded from the slot, with the columns
    and types resolved at planning; with `snapshot`, the table's rows first, read in a snapshot the slot's position
    splits exactly (see the extractor)."""

    table: str  # the dataset: `schema.table`
    schema_name: str
    table_name: str
    oid: int
    columns: list[str]
    types: list[list[int]]  # per column: [declared type oid, typmod, base type oid]
    primary: list[str] | None = None  # its primary key's columns as planned (None: read by the extractor)
    casts: dict[str, str] = {}  # column → the SQL cast it is read through
    avro_schema: dict[str, Any]
    low: int
    end: int
    snapshot: bool
    snapshot_bytes: int = 0  # pg_table_size when snapshotted: what the snapshot reads
    wal_bytes: int = 0
    tables: list[str]  # every table of the run: the slot advances to the lowest committed position of them all
    routed: list[str] = []  # the run's tables whose changes one decode of [decode_low, end) serves (`decode.py`)
    decode_low: int = 0
    chunk: dict[str, Any] | None = None  # a chunk task: the chunk of a chunked snapshot to read (`snapshot.py`)
    chunks: dict[str, Any] | None = None  # a stream during a chunked snapshot: its per-key filter (`chunks.py`)
