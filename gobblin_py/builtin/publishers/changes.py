"""Upsert of a table publisher (`mode: upsert, key: [id]`), the part that knows no table format: the settings
(key, order, the delete and truncate markers) and a commit's changes reduced to the last per key, in change order,
with the source's deletes and truncates applied. The `iceberg` publisher rewrites its data files with them, the
`delta` publisher merges them; each keeps its own commit and its idempotency.

What the reduction assumes, each a check that fails closed with the file, row or key named: every change has a key
(a null one is a bad commit, but a truncate's); two changes of one key in one commit are ordered (by `order_by`, a
tie of different rows is refused; without it, only within one file by position)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, StrictBool, StrictInt, model_validator

from gobblin_py.api import Settings
from gobblin_py.errors import CommitError

_FILE = "__gobblin_file"
_ROW = "__gobblin_row"


class DeleteWhen(Settings):
    """Which changes delete their key's row (upsert mode): those whose `column` holds one of `equals`
    (`{column: op, equals: [d]}`, or a boolean column: `{column: _deleted, equals: [true]}`)."""

    column: str = Field(description="the column that marks a change as a delete (kept in the table, as every column)")
    equals: list[StrictBool | StrictInt | str] = Field(min_length=1, description="the values of `column` that mean the key's row is deleted")


class UpsertSettings(Settings):
    """The settings of a table publisher's two modes: append, or upsert by key (validated together)."""

    mode: Literal["append", "upsert"] = Field(
        default="append", description="append: add each run's files; upsert: apply them as changes by `key`, one row per key")
    key: list[str] = Field(default_factory=list, description="upsert: the columns that identify a row (non-null in every change)")
    order_by: list[str] = Field(
        default_factory=list, description="upsert: the columns that order one key's changes within a commit, last wins "
                                          "(unset: position within one file; a key in two files is refused)")
    delete_when: DeleteWhen | None = Field(default=None, description="upsert: the changes that delete their key's row (unset: none)")
    truncate_when: DeleteWhen | None = Field(
        default=None, description="upsert: the changes that empty the table (a source's TRUNCATE, e.g. {column: _op, "
        "equals: [truncate]}): every row committed before the commit's last one goes, the changes after it in order_by "
        "apply; their key may be null (needs order_by; unset: such a change is an ordinary one, and a null key fails the commit)")

    @model_validator(mode="after")
    def _upsert(self) -> UpsertSettings:
        if self.mode == "append":
            given = [k for k in ("key", "order_by", "delete_when", "truncate_when") if getattr(self, k)]
            if given:
                raise ValueError(f"{', '.join(given)} only apply to mode: upsert (append mode adds every row as it is)")
            return self
        if not self.key:
            raise ValueError("mode: upsert needs key: the columns that identify a row, e.g. key: [id]")
        for name in ("key", "order_by"):
            columns = getattr(self, name)
            if len(set(columns)) != len(columns):
                raise ValueError(f"{name} names a column twice: {columns}")
        both = set(self.key) & set(self.order_by)
        if both:
            raise ValueError(f"{sorted(both)} is in both key and order_by: one key's changes would never differ in it")
        for name, marker in (("delete_when", self.delete_when), ("truncate_when", self.truncate_when)):
            if marker is not None and marker.column in self.key:
                raise ValueError(f"{name}.column {marker.column!r} is a key column: the marker must be another column "
                                 "(e.g. op)")
        if self.truncate_when is not None and not self.order_by:
            raise ValueError("truncate_when needs order_by: which changes of a commit follow a truncate (and apply) is "
                             "defined only by an order, e.g. order_by: [_lsn, _seq]")
        return self

    def upsert_spec(self) -> UpsertSpec:
        """The key, order and markers of upsert mode, for `reduce_changes`."""
        d, t = self.delete_when, self.truncate_when
        return UpsertSpec(tuple(self.key), tuple(self.order_by), d.column if d else None, tuple(d.equals) if d else (),
                          t.column if t else None, tuple(t.equals) if t else ())

    def unapplied_changes(self, markers: Mapping[str, tuple[str, str]]) -> list[tuple[str, str]]:
        """Upsert mode: a source's deletes not matched by `delete_when` (they would be upserted as rows of nulls, the
        deleted key kept) and truncates not matched by `truncate_when` (every snapshot starts with one)."""
        if self.mode != "upsert":
            return []
        found = []
        for kind, setting in (("delete", "delete_when"), ("truncate", "truncate_when")):
            if kind not in markers:
                continue
            column, value = markers[kind]
            given = getattr(self, setting)
            if given is not None and given.column == column and value in given.equals:
                continue
            what = ("would be upserted as rows holding only the key, the deleted row kept" if kind == "delete" else
                    "would be upserted as rows without a key (every snapshot starts with one, so that a table "
                    "snapshotted again loses the rows the source deleted meanwhile)")
            found.append((setting, f"the source's {kind}s ({column} = {value}) {what}: set {setting}: "
                                   f"{{column: {column}, equals: [{value}]}}"
                                   + (", with order_by (e.g. [_lsn, _seq])" if kind == "truncate" and not self.order_by else "")))
        return found


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

    def columns(self) -> list[str]:
        """Every column the reduction reads (key, order, markers), each once: all a publisher's check needs."""
        return list(dict.fromkeys([*self.key, *self.order_by, *(c for c in (self.delete_column, self.truncate_column) if c)]))


@dataclass(frozen=True)
class Changes:
    """A commit's changes reduced to the last per key: the rows to upsert, the key of every changed key (upserted or
    deleted, one row each), and counts."""

    upserts: Any      # pa.Table, the changes' schema without helper columns
    keys: Any         # pa.Table of the key columns
    received: int
    deleted: int
    truncated: bool = False  # a truncate came first: every row the table held before this commit goes
    deleted_keys: Any = None  # pa.Table of the deleted keys' key columns
    per_file: tuple[int, ...] | None = None
    """No key repeated (nothing was reduced): how many of `upserts` came from each file, in commit order (a file
    whose count is its row count is applied whole, as it is); None when some key changed twice."""

    @property
    def empty(self) -> bool:
        return self.keys.num_rows == 0 and not self.truncated


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
                                  f"(its columns: {', '.join(n for n in schema.names if n not in (_FILE, _ROW))}); fix publisher.{role} or the job's schema")
            t = schema.field(c).type
            if role != "a marker column" and (not _orderable(t) or (role == "key" and pt.is_floating(t))):
                raise CommitError(f"{where}: publisher.{role} column {c!r} is {t}; a {role} column must be a "
                                  "string, an integer, a date, a timestamp, a decimal or binary"
                                  + (" (or a float, for order_by)" if role == "order_by" else ""))


def reduce_changes(tables: Sequence[Any], files: Sequence[tuple[str, str]], spec: UpsertSpec, where: str) -> Changes:
    """The changes in `tables` (one pa.Table per file of `files`: (uri, name for messages), in commit order) reduced
    to the last per key. CommitError, naming `where`, the file and the row or key: a null key or order value; two
    different changes of one key tying on `order_by`; without `order_by`, one key in two files (their order is not
    defined)."""
    changes = _reduce(tables, files, spec, where, complete=True)
    assert changes is not None
    return changes


def check_reduced(tables: Sequence[Any], files: Sequence[tuple[str, str]], spec: UpsertSpec, where: str) -> bool:
    """A publisher's check before anything moves, on `tables` read with only the columns `spec.columns()` (a sixth of
    a CDC file's bytes): CommitError for what `reduce_changes` refuses; False when these columns cannot decide (a
    file lacks one, one key's changes tie on `order_by`, refused only if the rows differ elsewhere, or a null key whose
    message names the row's other columns): read whole."""
    if any(c not in t.column_names for t in tables for c in spec.columns()):
        return False
    return _reduce(tables, files, spec, where, complete=False) is not None


def reduce_columns(tables: Sequence[Any], files: Sequence[tuple[str, str]], spec: UpsertSpec, where: str) -> Changes | None:
    """`reduce_changes` of `tables` read with only the columns `spec.columns()`: the counts, keys and `per_file` a
    commit decides by without the files' other columns (its `upserts` hold those columns only); None where `check_reduced`
    is False (read whole)."""
    if any(c not in t.column_names for t in tables for c in spec.columns()):
        return None
    return _reduce(tables, files, spec, where, complete=False)


def _reduce(tables: Sequence[Any], files: Sequence[tuple[str, str]], spec: UpsertSpec, where: str,
            complete: bool) -> Changes | None:
    """`reduce_changes`; with `complete` False (the tables hold only the spec's columns), None where a tie on
    `order_by` needs the other columns to judge, or a null key or order value the rest of its row to explain."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    tables = [t.append_column(_FILE, pa.array(np.full(t.num_rows, i, np.int32)))
              .append_column(_ROW, pa.array(np.arange(t.num_rows, dtype=np.int64))) for i, t in enumerate(tables)]
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
                if not complete:
                    return None  # the advice reads the change's other columns (a truncate marked in one of them)
                at = pc.index(nulls, True).as_py()
                raise CommitError(f"{where}: change {_at(changes, at, files)} has a null {role} column {c!r}: a change "
                                  f"without its {role} cannot be applied, so nothing of this commit was. "
                                  + _null_advice(changes.slice(at, 1).to_pylist()[0], c, role, spec))
    if changes.num_rows == 0:
        keys = changes.select(list(spec.key))
        return Changes(changes.drop_columns([_FILE, _ROW]), keys, received, 0, truncated, keys, (0,) * len(tables))
    if _distinct(changes, spec.key):  # one change per key (a snapshot): nothing to order, tie or reduce
        winners = changes
    else:
        winners = _last_per_key(changes, files, spec, where, complete)
        if winners is None:
            return None
    keys = winners.select(list(spec.key))
    count, deleted_keys = 0, keys.slice(0, 0)
    if spec.delete_column is not None:
        deleted = _marked(winners, spec.delete_column, spec.delete_values, "delete_when", where)
        count = int(pc.sum(deleted.cast("int64")).as_py() or 0)
        if count:
            deleted_keys = winners.filter(deleted).select(list(spec.key))
            winners = winners.filter(pc.invert(deleted))
    per_file = None
    if _FILE in winners.column_names:  # nothing reduced: the helper columns are still there
        per_file = tuple(int(n) for n in np.bincount(winners[_FILE].to_numpy(), minlength=len(tables)))
        winners = winners.drop_columns([_FILE, _ROW])
    return Changes(winners, keys, received, count, truncated, deleted_keys, per_file)


def _distinct(t: Any, key: Sequence[str]) -> bool:
    """No two rows of `t` share a key (keys are non-null here): a one-column key in runs that each rise strictly
    over disjoint ranges (a snapshot's chunks) in one comparison pass, else by one hash pass; no sort either way."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        if len(key) == 1:
            return _rising_runs(t[key[0]]) or pc.count_distinct(t[key[0]]).as_py() == t.num_rows
        return t.select(list(key)).group_by(list(key)).aggregate([]).num_rows == t.num_rows
    except pa.ArrowNotImplementedError:  # a key type Arrow does not compare or hash: the sort decides
        return False


def _rising_runs(column: Any) -> bool:
    """Every chunk of `column` strictly rises and no two chunks' [first, last] ranges overlap (so no value repeats);
    compared in Arrow, so any type it orders (a nanosecond timestamp too) is judged without a Python value."""
    import pyarrow as pa
    import pyarrow.compute as pc

    chunks = [c for c in column.chunks if len(c)]
    for chunk in chunks:
        if len(chunk) > 1 and not pc.all(pc.less(chunk[:-1], chunk[1:])).as_py():
            return False
    if len(chunks) < 2:
        return True
    firsts, lasts = pa.concat_arrays([c[:1] for c in chunks]), pa.concat_arrays([c[-1:] for c in chunks])
    order = pc.sort_indices(firsts)
    firsts, lasts = firsts.take(order), lasts.take(order)
    return bool(pc.all(pc.less(lasts[:-1], firsts[1:])).as_py())


def _last_per_key(changes: Any, files: Sequence[tuple[str, str]], spec: UpsertSpec, where: str,
                  complete: bool) -> Any | None:
    """The last change of each key (by key, `order_by`, file, row), without the helper columns; CommitError for a tie
    of different rows or (without `order_by`) a key in two files; None for a tie when not `complete`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    order = [*spec.key, *spec.order_by, _FILE, _ROW]
    ordered = changes.take(pc.sort_indices(changes, sort_keys=[(c, "ascending") for c in order]))
    same_key = _equal_next(ordered, spec.key)
    if spec.order_by:
        tie = pc.and_(same_key, _equal_next(ordered, spec.order_by))
        for i in pc.indices_nonzero(tie).to_pylist():
            if not complete:
                return None
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
    return ordered.filter(last).drop_columns([_FILE, _ROW])


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
    kept = int(pc.sum(after.cast("int64")).as_py() or 0)
    if kept == 0 or pc.all(after.slice(changes.num_rows - kept)).as_py():  # a snapshot's: what goes is a prefix
        return changes.slice(changes.num_rows - kept), True
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
