"""Upsert mode of the `iceberg` publisher (`mode: upsert, key: [id]`): a commit's Parquet files are the *changes* to a
table kept equal to its source by key. The last change per key within the commit wins (by `order_by`), a change the
`delete_when` marker names removes the key's row, a change the `truncate_when` marker names (a source's TRUNCATE)
removes every row committed before it (the changes after it in `order_by` apply), and the table gets ONE snapshot: copy-on-write, the live data files
that hold a changed key rewritten without it, plus the new rows (pyiceberg writes no equality deletes, and reads
none, so copy-on-write is what every reader of the table sees alike).

The reduction by key, which knows no table format, is `publishers/changes.py` (shared with the `delta` publisher).
What it assumes, each a check that fails closed with the file, row or key named: every change has a key (a null one
is a bad commit); two changes of one key in one commit are ordered (by `order_by`, a tie of different rows is refused;
without it, only within one file by position); the table holds no delete files (they would have to be rewritten too);
the key is still the column the job committed (field ids, as append mode checks every column). The files it writes
are named from the commit id (`00000-<n>-<uuid5(commit id)>.parquet`), so an attempt's leftovers are overwritten by
the replay and a commit whose snapshot was expired is found by them. A first snapshot into an empty table adds the
change files as they are instead, when they qualify (`first_snapshot.py`). pyiceberg is imported inside the functions."""

from __future__ import annotations

import itertools
import json
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gobblin_py.builtin.publishers.changes import (
    _ROW,
    Changes,
    UpsertSpec,
    check_reduced,
    reduce_changes,
    reduce_columns,
)
from gobblin_py.crashpoints import crash_point
from gobblin_py.errors import CommitError

log = logging.getLogger(__name__)

UPSERT = "gobblin-py.upsert"
"""Set on an upsert commit's snapshot: its counts as JSON (changes read, rows upserted, keys deleted, files rewritten)."""
WRITTEN_POINT = "iceberg.upsert_written"
"""Crash point: the commit's new data files are written, its snapshot not yet committed."""


def write_uuid(commit_id: str) -> uuid.UUID:
    """The uuid in the names of the data files an upsert commit writes: a pure function of the commit id."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"gobblin-py:iceberg-upsert:{commit_id}")


def read_changes(io: Any, files: Sequence[tuple[str, str]], spec: UpsertSpec, where: str) -> Changes:
    """The changes in the Parquet files `files` ((uri, name for messages), in commit order), read through the
    pyiceberg FileIO `io`, reduced to the last per key (`changes.reduce_changes`, which names what it refuses)."""
    return reduce_changes(_read(io, files, None), files, spec, where)


def check_changes(io: Any, files: Sequence[tuple[str, str]], spec: UpsertSpec, where: str) -> None:
    """The publisher's check: CommitError for what `read_changes` refuses, before anything moves, reading only the
    columns the reduction needs (`changes.check_reduced`), the whole files only where those cannot decide."""
    if not check_reduced(_read(io, files, spec.columns()), files, spec, where):
        read_changes(io, files, spec, where)


def reduce_keys(io: Any, files: Sequence[tuple[str, str]], spec: UpsertSpec, where: str) -> Changes | None:
    """The changes in `files` reduced on the key, order and marker columns only (`changes.reduce_columns`): counts,
    keys and what each file contributes, without the rows; None where those columns cannot decide."""
    return reduce_columns(_read(io, files, spec.columns()), files, spec, where)


def footers(io: Any, files: Sequence[tuple[str, str]]) -> list[Any]:
    """Each Parquet file's footer (`pq.FileMetaData`: its row count and schema), read through the FileIO `io`."""
    import pyarrow.parquet as pq

    out = []
    for uri, _ in files:
        with io.new_input(uri).open() as stream:
            out.append(pq.read_metadata(stream))
    return out


def _read(io: Any, files: Sequence[tuple[str, str]], columns: list[str] | None) -> list[Any]:
    """Each file of `files` as a pa.Table: every column, or those of `columns` it has."""
    import pyarrow.parquet as pq

    tables = []
    for uri, _ in files:
        with io.new_input(uri).open() as stream:
            parquet = pq.ParquetFile(stream)
            names = None if columns is None else [c for c in columns if c in parquet.schema_arrow.names]
            tables.append(parquet.read(columns=names))
    return tables


def partitioned_writes() -> bool:
    """Whether pyiceberg can write a partitioned table's files here: its time transforms on Arrow need
    `pyiceberg-core` (`pip install 'pyiceberg[pyiceberg-core]'`)."""
    import importlib.util

    return importlib.util.find_spec("pyiceberg_core") is not None


PARTITIONED_NEEDS = ("upsert mode writes the table's data files through pyiceberg, whose partition transforms need "
                     "pyiceberg-core, not installed here: pip install 'pyiceberg[pyiceberg-core]', or upsert into an "
                     "unpartitioned table")


# --- applying the changes to a table --------------------------------------------------------------------------------

def conform(t: Any, target: Any) -> Any:
    """`t` with `target`'s columns in its order, cast to its types (Iceberg's promotions, ms → µs), a column `t`
    lacks as nulls (an optional column the table has and this output does not)."""
    import pyarrow as pa

    columns = []
    for field in target:
        if field.name in t.column_names:
            columns.append(t[field.name].cast(field.type))
        else:
            columns.append(pa.nulls(t.num_rows, field.type))
    return pa.Table.from_arrays(columns, schema=target)


def key_filter(keys: Any, key: Sequence[str], table_schema: Any) -> Any:
    """A pyiceberg row filter that holds for every changed key (a superset: each key column between its changes'
    least and greatest value, and among them when they are few), so `plan_files` keeps every data file whose column
    statistics say it may hold one. Columns of other types than integers and strings are not used to prune."""
    import pyarrow.compute as pc
    import pyarrow.types as pt
    from pyiceberg.expressions import AlwaysTrue, And, GreaterThanOrEqual, In, LessThanOrEqual

    out: Any = AlwaysTrue()
    for c in key:
        col = keys[c]
        if not (pt.is_integer(col.type) or pt.is_string(col.type) or pt.is_large_string(col.type)):
            continue
        if table_schema.find_field(c) is None:
            continue
        bounds = pc.min_max(col).as_py()
        out = And(out, And(GreaterThanOrEqual(c, bounds["min"]), LessThanOrEqual(c, bounds["max"])))
        distinct = pc.unique(col)
        if len(distinct) <= 200:  # pyiceberg's metrics evaluator gives up on larger IN lists anyway
            out = And(out, In(c, distinct.to_pylist()))
    return out


@dataclass
class Applied:
    """What one attempt of an upsert commit did to the transaction: files it dropped and wrote, rows it kept."""

    deleted: list[Any]       # DataFiles of the table rewritten (or dropped whole)
    added: list[Any]         # DataFiles written
    kept_rows: int


def rewrite(tx: Any, table: Any | None, changes: Changes, spec: UpsertSpec, io: Any, commit_id: str,
            name: str, written: Callable[[str], None]) -> Applied:
    """Into the transaction `tx` (of `table`, None for a table it creates): every live data file that holds a changed
    key rewritten without those keys' rows, and the upserted rows, as new data files of `tx`'s schema named from
    `commit_id` (`written` is told each path). Nothing is committed here."""
    import pyarrow as pa
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan, _dataframe_to_data_files

    target = tx.table_metadata.schema().as_arrow()
    target = pa.schema([f.remove_metadata() for f in target])
    file_uuid = write_uuid(commit_id)
    counter = itertools.count(0)
    deleted: list[Any] = []
    added: list[Any] = []
    kept = 0

    def write(rows: Any) -> None:
        if rows.num_rows == 0:
            return
        for data_file in _dataframe_to_data_files(tx.table_metadata, conform(rows, target), io, write_uuid=file_uuid,
                                                  counter=counter):
            written(data_file.file_path)
            added.append(data_file)

    if table is not None and table.current_snapshot() is not None and not changes.empty:
        schema = table.schema()
        keys = changes.keys
        scan = table.scan(row_filter=AlwaysTrue() if changes.truncated else key_filter(keys, spec.key, schema))
        for task in scan.plan_files():
            if task.delete_files:
                raise CommitError(f"table {name}: data file {task.file.file_path} has delete files (another engine's "
                                  "merge-on-read deletes), which upsert mode does not rewrite: nothing of this commit "
                                  "was applied. Rewrite them away with that engine (Spark: CALL system.rewrite_data_files"
                                  " with delete-file-threshold 1), then run again")
            if changes.truncated:  # every row committed before the truncate goes
                deleted.append(task.file)
                continue
            rows = ArrowScan(table.metadata, table.io, schema, AlwaysTrue()).to_table([task])
            index = pa.array(range(rows.num_rows), pa.int64())
            probe = pa.table({**{c: rows[c] for c in spec.key}, _ROW: index})
            typed = pa.table({c: keys[c].cast(rows.schema.field(c).type) for c in spec.key})
            left = probe.join(typed, keys=list(spec.key), join_type="left anti")[_ROW]
            if len(left) == rows.num_rows:
                continue  # the statistics allowed a changed key, the file holds none
            deleted.append(task.file)
            remaining = rows.take(left.combine_chunks().sort())
            kept += remaining.num_rows
            write(remaining)
    write(changes.upserts)
    return Applied(deleted, added, kept)


def commit_snapshot(tx: Any, io: Any, applied: Applied, properties: dict[str, str], name: str) -> None:
    """ONE snapshot of `tx` that drops `applied.deleted` and adds `applied.added` (an `overwrite`; an `append` when it
    drops nothing), then commits the transaction. A conflict goes up to be retried from a fresh read: pyiceberg's own
    retry re-bases the snapshot on the new head and refuses it (a ValidationException) when the other commit added or
    removed data files, as the files this one rewrote were chosen from the table it read."""
    from pyiceberg.exceptions import CommitFailedException, ValidationError, ValidationException
    from pyiceberg.table.snapshots import Operation
    from pyiceberg.table.update.snapshot import _OverwriteFiles

    operation = Operation.OVERWRITE if applied.deleted else Operation.APPEND
    producer = _OverwriteFiles(operation=operation, transaction=tx, io=io, snapshot_properties=properties)
    try:
        for data_file in applied.deleted:
            producer.delete_data_file(data_file)
        for data_file in applied.added:
            producer.append_data_file(data_file)
        crash_point(WRITTEN_POINT)
        producer.commit()
    except (ValueError, TypeError, ValidationError, ValidationException) as exc:
        raise CommitError(f"table {name}: cannot commit the upsert ({len(applied.deleted)} file(s) rewritten, "
                          f"{len(applied.added)} written): {exc}") from exc
    try:
        tx.commit_transaction()
    except ValidationException as exc:
        raise CommitFailedException(f"table {name}: a concurrent commit changed the data files this upsert read: {exc}") from exc


def counts(changes: Changes, applied: Applied) -> str:
    """The `UPSERT` summary value."""
    return json.dumps({"changes": changes.received, "keys": changes.keys.num_rows, "upserted": changes.upserts.num_rows,
                       "deleted": changes.deleted, "files_rewritten": len(applied.deleted),
                       "files_written": len(applied.added), "rows_kept": applied.kept_rows,
                       "truncated": changes.truncated}, sort_keys=True)


def committed_by_files(live_paths: set[str], commit_id: str) -> bool:
    """Whether the table lists a data file an upsert commit of `commit_id` wrote (named with its uuid)."""
    mark = f"-{write_uuid(commit_id)}"
    return any(mark in p.rsplit("/", 1)[-1] for p in live_paths)
