"""Upsert mode of the `iceberg` publisher (`mode: upsert, key: [id]`): a commit's Parquet files are the *changes* to a
table kept equal to its source by key. The last change per key within the commit wins (by `order_by`), a change the
`delete_when` marker names removes the key's row, a change the `truncate_when` marker names (a source's TRUNCATE)
removes every row committed before it (the changes after it in `order_by` apply), and the table gets ONE snapshot: copy-on-write, the live data files
that hold a changed key rewritten without it, plus the new rows (pyiceberg writes no equality deletes, and reads
none, so copy-on-write is what every reader of the table sees alike).

What it assumes, each a check that fails closed with the file, row or key named: every change has a key (a null one
is a bad commit); two changes of one key in one commit are ordered (by `order_by`, a tie of different rows is refused;
without it, only within one file by position); the table holds no delete files (they would have to be rewritten too);
the key is still the column the job committed (field ids, as append mode checks every column). The files it writes
are named from the commit id (`00000-<n>-<uuid5(commit id)>.parquet`), so an attempt's leftovers are overwritten by
the replay and a commit whose snapshot was expired is found by them. pyiceberg is imported inside the functions."""

from __future__ import annotations

import itertools
import json
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gobblin_py.crashpoints import crash_point
from gobblin_py.errors import CommitError

log = logging.getLogger(__name__)

UPSERT = "gobblin-py.upsert"
"""Set on an upsert commit's snapshot: its counts as JSON (changes read, rows upserted, keys deleted, files rewritten)."""
WRITTEN_POINT = "iceberg.upsert_written"
"""Crash point: the commit's new data files are written, its snapshot not yet committed."""
_FILE = "__gobblin_file"
_ROW = "__gobblin_row"


@dataclass(frozen=True)
class UpsertSpec:
    """What identifies a row and orders its changes: the key columns, the order columns (empty: file position), and
    the delete marker (a column and the values that mean "deleted"; None: no deletes), and the truncate marker (the
    values that mean "every row before this change is gone"; None: no truncates; needs `order_by`)."""

    key: tuple[str, ...]
    order_by: tuple[str, ...] = ()
    delete_column: str | None = None
    delete_values: tuple[Any, ...] = ()
    truncate_column: str | None = None
    truncate_values: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Changes:
    """A commit's changes reduced to the last per key: the rows to upsert, the key of every changed key (upserted or
    deleted, one row each), and counts."""

    upserts: Any      # pa.Table, the changes' schema without helper columns
    keys: Any         # pa.Table of the key columns
    received: int
    deleted: int
    truncated: bool = False  # a truncate came first: every row the table held before this commit goes

    @property
    def empty(self) -> bool:
        return self.keys.num_rows == 0 and not self.truncated


def write_uuid(commit_id: str) -> uuid.UUID:
    """The uuid in the names of the data files an upsert commit writes: a pure function of the commit id."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"gobblin-py:iceberg-upsert:{commit_id}")


def _orderable(t: Any) -> bool:
    import pyarrow.types as pt

    return (pt.is_integer(t) or pt.is_string(t) or pt.is_large_string(t) or pt.is_date(t) or pt.is_timestamp(t)
            or pt.is_decimal(t) or pt.is_binary(t) or pt.is_large_binary(t) or pt.is_boolean(t) or pt.is_floating(t))


def check_columns(spec: UpsertSpec, schema: Any, where: str) -> None:
    """The key, order and delete-marker columns are top-level columns of the changes' Arrow `schema`, of types that
    compare; CommitError naming the column and `where` (the table, the dataset) otherwise."""
    import pyarrow.types as pt

    names = set(schema.names)
    markers = [c for c in (spec.delete_column, spec.truncate_column) if c]
    for role, columns in (("key", spec.key), ("order_by", spec.order_by), ("a marker column", markers)):
        for c in columns:
            if c not in names:
                raise CommitError(f"{where}: publisher.{role} names column {c!r}, which the job's output does not have "
                                  f"(its columns: {', '.join(schema.names)}); fix publisher.{role} or the job's schema")
            t = schema.field(c).type
            if role != "a marker column" and (not _orderable(t) or (role == "key" and pt.is_floating(t))):
                raise CommitError(f"{where}: publisher.{role} column {c!r} is {t}; a {role} column must be a "
                                  "string, an integer, a date, a timestamp, a decimal or binary"
                                  + (" (or a float, for order_by)" if role == "order_by" else ""))


def read_changes(io: Any, files: Sequence[tuple[str, str]], spec: UpsertSpec, where: str) -> Changes:
    """The changes in the Parquet files `files` ((uri, name for messages), in commit order) reduced to the last per
    key. CommitError, naming `where`, the file and the row or key: a null key or order value; two different changes of
    one key tying on `order_by`; without `order_by`, one key in two files (their order is not defined)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    tables = []
    for i, (uri, _) in enumerate(files):
        with io.new_input(uri).open() as stream:
            t = pq.read_table(stream)
        tables.append(t.append_column(_FILE, pa.array([i] * t.num_rows, pa.int32()))
                      .append_column(_ROW, pa.array(range(t.num_rows), pa.int64())))
    if not tables:
        raise CommitError(f"{where}: an upsert commit without change files")
    try:
        changes = pa.concat_tables(tables, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise CommitError(f"{where}: the change files of this commit disagree on a column's type: {exc} "
                          f"(files: {', '.join(n for _, n in files)})") from None
    check_columns(spec, changes.schema, where)
    received = changes.num_rows
    changes, truncated = _after_last_truncate(changes, spec, files, where)
    for role, columns in (("key", spec.key), ("order_by", spec.order_by)):
        for c in columns:
            nulls = pc.is_null(changes[c])
            if pc.any(nulls).as_py():
                at = pc.index(nulls, True).as_py()
                raise CommitError(f"{where}: change {_at(changes, at, files)} has a null {role} column {c!r}: a change "
                                  f"without its {role} cannot be applied, so nothing of this commit was. "
                                  + _null_advice(changes.slice(at, 1).to_pylist()[0], c, role, spec))
    if changes.num_rows == 0:
        return Changes(changes.drop_columns([_FILE, _ROW]), changes.select(list(spec.key)), received, 0, truncated)
    order = [*spec.key, *spec.order_by, _FILE, _ROW]
    ordered = changes.take(pc.sort_indices(changes, sort_keys=[(c, "ascending") for c in order]))
    same_key = _equal_next(ordered, spec.key)
    if spec.order_by:
        tie = pc.and_(same_key, _equal_next(ordered, spec.order_by))
        for i in pc.indices_nonzero(tie).to_pylist():
            a, b = (ordered.slice(j, 1).drop_columns([_FILE, _ROW]).to_pylist()[0] for j in (i, i + 1))
            if a != b:
                raise CommitError(
                    f"{where}: key {_key(ordered, i, spec.key)} changes twice with the same {_names(spec.order_by)} "
                    f"({_values(ordered, i, spec.order_by)}) and different values ({_at(ordered, i, files)} and "
                    f"{_at(ordered, i + 1, files)}), so which is the last is not defined: nothing of this commit was "
                    "applied. Add a column that orders them to publisher.order_by (an LSN, an offset, a sequence)")
    else:
        other_file = pc.and_(same_key, pc.not_equal(ordered[_FILE][:-1], ordered[_FILE][1:]))
        if pc.any(other_file).as_py():
            i = pc.index(other_file, True).as_py()
            raise CommitError(
                f"{where}: key {_key(ordered, i, spec.key)} changes in two files of this commit "
                f"({_at(ordered, i, files)} and {_at(ordered, i + 1, files)}), and without publisher.order_by only "
                "the order within one file is defined: nothing of this commit was applied. Set publisher.order_by to "
                "the column that orders a key's changes (the source's LSN, updated_at or offset)")
    last = pc.invert(pa.concat_arrays([same_key, pa.array([False], pa.bool_())]))
    winners = ordered.filter(last).drop_columns([_FILE, _ROW])
    deleted = pa.array([False] * winners.num_rows, pa.bool_())
    if spec.delete_column is not None:
        deleted = _marked(winners, spec.delete_column, spec.delete_values, "delete_when", where)
    return Changes(winners.filter(pc.invert(deleted)), winners.select(list(spec.key)), received,
                   int(pc.sum(deleted.cast("int64")).as_py() or 0), truncated)


def _null_advice(row: dict[str, Any], column: str, role: str, spec: UpsertSpec) -> str:
    """What to do about a change whose `column` is null: a truncate marked as such in one of its columns (postgres_cdc's
    `_op: truncate`, the first record of every snapshot) needs `truncate_when`, named with the setting to add; any
    other change needs its value (sending it to the error file instead would leave the table unlike its source)."""
    marker = next((k for k, v in row.items() if isinstance(v, str) and v.lower() == "truncate"), None)
    if role == "key" and spec.truncate_column is None and marker is not None:
        return (f"It is a truncate ({marker} = {row[marker]!r}; postgres_cdc starts every snapshot with one, so that a "
                "table snapshotted again loses the rows the source deleted meanwhile): add to the publisher "
                f"`truncate_when: {{column: {marker}, equals: [{row[marker]}]}}`"
                + ("" if spec.order_by else " with `order_by: [_lsn, _seq]` (the changes' order)")
                + ", which empties the table there and applies the changes after it, then run again")
    return (f"Give every change its {column!r} (the source's or a converter's fix); a change that empties the table "
            "rather than changes a row is named by publisher.truncate_when")


def _marked(t: Any, column: str, values: Sequence[Any], role: str, where: str) -> Any:
    """Row i of `t` holds one of `values` in `column` (booleans, nulls false)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    marker = t[column]
    try:
        wanted = pa.array(list(values)).cast(marker.type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        raise CommitError(f"{where}: publisher.{role}.equals {list(values)} are not values of column {column!r} "
                          f"({marker.type})") from None
    return pc.fill_null(pc.is_in(marker, value_set=wanted), False)


def _after_last_truncate(changes: Any, spec: UpsertSpec, files: Sequence[tuple[str, str]], where: str) -> tuple[Any, bool]:
    """The changes that follow the commit's last truncate in `order_by` (all of them, and False, without one), and
    whether there was one. CommitError: a truncate with a null order value, or another change tying with it."""
    import pyarrow.compute as pc

    if spec.truncate_column is None or changes.num_rows == 0:
        return changes, False
    marked = _marked(changes, spec.truncate_column, spec.truncate_values, "truncate_when", where)
    truncates = changes.filter(marked)
    if truncates.num_rows == 0:
        return changes, False
    for c in spec.order_by:
        if pc.any(pc.is_null(truncates[c])).as_py():
            raise CommitError(f"{where}: a truncate ({_at(truncates, pc.index(pc.is_null(truncates[c]), True).as_py(), files)}) "
                              f"has a null order_by column {c!r}, so which changes follow it is not defined: nothing of "
                              "this commit was applied")
    last = truncates.take(pc.sort_indices(truncates, sort_keys=[(c, "descending") for c in spec.order_by])).slice(0, 1)
    after = None
    tie = None
    for c in reversed(spec.order_by):  # (a, b) > (x, y) ⇔ a > x or (a = x and b > y)
        bound = last[c][0]
        greater = pc.fill_null(pc.greater(changes[c], bound), False)
        equal = pc.fill_null(pc.equal(changes[c], bound), False)
        after = greater if after is None else pc.or_(greater, pc.and_(equal, after))
        tie = equal if tie is None else pc.and_(equal, tie)
    assert after is not None and tie is not None
    tied = pc.and_(tie, pc.invert(marked))
    if pc.any(tied).as_py():
        raise CommitError(f"{where}: change {_at(changes, pc.index(tied, True).as_py(), files)} ties on "
                          f"{_names(spec.order_by)} with the truncate {_at(last, 0, files)}, so whether it came before or "
                          "after it is not defined: nothing of this commit was applied")
    return changes.filter(after), True


def _equal_next(t: Any, columns: Sequence[str]) -> Any:
    """Row i's `columns` all equal row i+1's (n-1 booleans; no nulls: keys and order values were checked)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out = pa.array([True] * (t.num_rows - 1), pa.bool_())
    for c in columns:
        col = t[c].combine_chunks()
        out = pc.and_(out, pc.fill_null(pc.equal(col[:-1], col[1:]), False))
    return out


def _key(t: Any, i: int, key: Sequence[str]) -> str:
    return ", ".join(f"{c}={t[c][i].as_py()!r}" for c in key)


_values = _key


def _names(columns: Sequence[str]) -> str:
    return ", ".join(columns)


def _at(t: Any, i: int, files: Sequence[tuple[str, str]]) -> str:
    return f"row {t[_ROW][i].as_py() + 1} of {files[t[_FILE][i].as_py()][1]}"


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
