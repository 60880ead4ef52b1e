"""Upsert mode's first snapshot into an empty table, without the rewrite: when a commit's change files are a snapshot
(no key twice, no delete, each file applied whole or not at all) and the table holds no row, the files the tasks
wrote ARE the table's data files. They are copied (hard-linked where task output and table share a local disk) to
`<table>/data/snapshot-<n>-<uuid5(commit id)>.parquet` and added in ONE snapshot tagged like every upsert commit,
through the same snapshot producer (`upsert.commit_snapshot`), so recovery knows it by its commit id, or by its
files' uuid once the snapshot was expired (`upsert.committed_by_files`): a crash after the Iceberg commit is found and
not added twice, one before it is redone over the same names.

The chunk files are added as written, not rewritten in the table's shape at task time: a CDC table in upsert mode has
the change columns (`_op`, `_lsn`, `_seq`, …) as columns of its own (it is created from the files' schema), so a
snapshot row's file already has the table's columns; the one row a table must never hold, a snapshot's truncate
record, is in a file of its own (the stream task's: `postgres_cdc` writes it before every chunk's rows), which the
reduction drops whole. A file holding a truncate or a delete among rows that apply (the one-transaction snapshot's
single file starts with its truncate) is not added as it is: that commit takes the rewrite.

What it assumes, each checked at commit time, where failing any means the rewrite path (never a guess):
- the table, as the transaction being committed loaded it, has no live data or delete file (no snapshot, or only
  empty ones); a writer that adds one between that load and the commit makes the commit conflict (the snapshot
  producer validates that no data file was added since: the table's `write.delete.isolation-level` must be
  `serializable`, pyiceberg's default), and the retry reloads and rewrites;
- the reduction (on the key, order and marker columns only) repeated no key, deleted none, and each file's rows apply
  all (`Changes.per_file` equals its row count) or none;
- the table is unpartitioned (a task's file holds rows of any partition) and every added file is Parquet whose
  columns are the table's columns (names and Arrow types, after the transaction's schema evolution), without Iceberg
  field ids (read by the table's name mapping, set here if missing, as `add_files` does).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gobblin_py.builtin.publishers.changes import Changes
from gobblin_py.builtin.publishers.iceberg import snapshots as s
from gobblin_py.builtin.publishers.iceberg.upsert import Applied, write_uuid
from gobblin_py.crashpoints import crash_point
from gobblin_py.durable import fsync_dir, fsync_file

COPIED_POINT = "iceberg.first_snapshot_copied"
"""Crash point: one of a first snapshot's files copied into the table's data directory (N-th file), not yet added."""
PREFIX = "snapshot-"
ISOLATION = "write.delete.isolation-level"
"""The table property pyiceberg validates an append's concurrent commits by: `serializable` (its default) refuses a
data file added since the commit's load of the table."""


def why_not(table: Any | None, tx: Any, changes: Changes, rows: Sequence[int], schemas: Sequence[Any]) -> str | None:
    """Why the commit cannot add its files as they are (a reason for the log), or None when it can: `table` as this
    attempt loaded it (None: created in `tx`), `changes` reduced on the key columns, `rows` and `schemas` each file's
    row count and Arrow schema (from its footer)."""
    if table is not None and next(s.live_entries(table), None) is not None:
        return "the table holds files"
    if changes.per_file is None or changes.deleted or changes.upserts.num_rows == 0:
        return "a key changes twice, or a change deletes one, or nothing is upserted"
    if any(n not in (0, total) for n, total in zip(changes.per_file, rows, strict=True)):
        return "a file's rows apply only in part (a truncate or a delete among them)"
    if not tx.table_metadata.spec().is_unpartitioned():
        return "the table is partitioned"
    if tx.table_metadata.properties.get(ISOLATION, "serializable") != "serializable":
        return f"the table's {ISOLATION} is not serializable: a file another writer adds before the commit would not conflict"
    target = _arrow(tx.table_metadata.schema())
    for schema, n in zip(schemas, changes.per_file, strict=True):
        if n and (not _fits(_arrow(schema), target) or any(f.metadata and b"PARQUET:field_id" in f.metadata for f in schema)):
            return "a file's columns are not the table's"
    return None


def _arrow(schema: Any) -> dict[str, tuple[str, bool]]:
    """name → (Arrow type, may be null), of a file's Arrow schema or the table's Iceberg schema (whose strings and
    binaries pyiceberg reads as their large kinds, the same Parquet type): what a file must match to be the table's."""
    import pyarrow as pa

    arrow = schema if isinstance(schema, pa.Schema) else schema.as_arrow()
    same = {pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}
    return {f.name: (str(same.get(f.type, f.type)), f.nullable) for f in arrow}


def _fits(file: dict[str, tuple[str, bool]], table: dict[str, tuple[str, bool]]) -> bool:
    """The file has the table's columns, of its types, none that may be null where the table's may not."""
    return file.keys() == table.keys() and all(t == table[n][0] and (table[n][1] or not null)
                                               for n, (t, null) in file.items())


def add(tx: Any, io: Any, sources: Sequence[tuple[str, str]], changes: Changes, table_dir: str, commit_id: str,
        written: Callable[[str], None]) -> Applied:
    """Copy the files of `sources` whose rows all apply (`changes.per_file`) into `table_dir/data`, named from
    `commit_id` (`written` is told each), and the DataFiles to add for them (`tx`'s schema and name mapping)."""
    from pyiceberg.io.pyarrow import parquet_file_to_data_file
    from pyiceberg.table import TableProperties

    assert changes.per_file is not None
    if tx.table_metadata.name_mapping() is None:  # the files carry no field ids: readers map their columns by name
        tx.set_properties(**{TableProperties.DEFAULT_NAME_MAPPING: tx.table_metadata.schema().name_mapping.model_dump_json()})
    added = []
    for i, ((uri, _), n) in enumerate(zip(sources, changes.per_file, strict=True)):
        if not n:
            continue
        target = copy_names(table_dir, len(sources), commit_id)[i]
        written(target)
        _copy(io, uri, target)
        crash_point(COPIED_POINT)
        added.append(parquet_file_to_data_file(io, tx.table_metadata, target))
    return Applied([], added, 0)


def copy_names(table_dir: str, files: int, commit_id: str) -> list[str]:
    """Where `add` puts each of a commit's `files` change files in the table at `table_dir`: a pure function of the
    commit id and the file's place, so an attempt's leftovers are known without listing the directory."""
    mark = write_uuid(commit_id)
    return [f"{table_dir.rstrip('/')}/data/{PREFIX}{i:05d}-{mark}.parquet" for i in range(files)]


def _copy(io: Any, src: str, dst: str) -> None:
    """`src` at `dst`, durably: a hard link where both are local (one disk), else a copy; what an earlier attempt of
    this commit left at `dst` (named with its uuid, never added) is replaced."""
    local = [u.removeprefix("file://") for u in (src, dst) if u.startswith("file://") or "://" not in u]
    if len(local) == 2:
        a, b = Path(local[0]), Path(local[1])
        b.parent.mkdir(parents=True, exist_ok=True)
        b.unlink(missing_ok=True)
        try:
            os.link(a, b)
        except OSError:  # another filesystem, or links not allowed: a copy
            shutil.copyfile(a, b)
            fsync_file(b)
        fsync_dir(b.parent)
        return
    with io.new_input(src).open() as r, io.new_output(dst).create(overwrite=True) as w:
        shutil.copyfileobj(r, w, 8 << 20)
