"""Upsert mode of the `delta` publisher (`mode: upsert, key: [id]`): a commit's Parquet files (read in task output)
are the *changes* to a table kept equal to its source by key, reduced to the last per key as the `iceberg` upsert
reduces them (`publishers/changes.py`), and applied as ONE delta-rs `merge`: matched keys updated or (a delete)
removed, new keys inserted, and after a truncate every row the merge does not match removed too. The merge's commit
carries the app transaction and the commitInfo append mode writes, so "already committed?" is this commit's own id.

What it assumes, beyond append mode's (the table's id, the app's transaction version, no RESTORE since), each checked
and failing closed: the table is kept by the same key in the same mode as the dataset's last commit (pinned with each
commit); every key column is a column of the table (not renamed or dropped by another writer); the table holds one
row per key (only this job writes it, or writers that merge by the same key). The table is not partitioned."""

from __future__ import annotations

from typing import Any

from gobblin_py.builtin.publishers.changes import Changes, UpsertSpec, check_reduced, reduce_changes
from gobblin_py.errors import CommitError
from gobblin_py.fs import Location, filesystem_for

DELETE = "__gobblin_delete"
"""The merge source's column saying whether a key's change deletes it (not written to the table)."""
UPSERT = "gobblin-py.upsert"
"""Set in an upsert commit's commitInfo: the key and the commit's counts as JSON."""


def read_changes(files: list[tuple[str, str]], spec: UpsertSpec, where: str) -> Changes:
    """The changes in the Parquet files `files` ((location, name for messages), in commit order) reduced to the last
    per key (`reduce_changes` names what it refuses: a null key, a tie, a key column missing)."""
    return reduce_changes(_read(files, None, where), files, spec, where)


def check_changes(files: list[tuple[str, str]], spec: UpsertSpec, where: str) -> None:
    """The publisher's check: CommitError for what `read_changes` refuses, before anything moves, reading only the
    columns the reduction needs (`changes.check_reduced`), the whole files only where those cannot decide."""
    if not check_reduced(_read(files, spec.columns(), where), files, spec, where):
        read_changes(files, spec, where)


def _read(files: list[tuple[str, str]], columns: list[str] | None, where: str) -> list[Any]:
    """Each file of `files` as a pa.Table: every column, or those of `columns` it has; CommitError for a missing one."""
    import pyarrow.parquet as pq

    tables = []
    for location, name in files:
        loc = Location(location)
        fs = filesystem_for(loc)
        if fs.size(loc) is None:
            raise CommitError(f"{where}: the change file {name} ({loc}) is missing from task output")
        with fs.open_read(loc) as stream:
            parquet = pq.ParquetFile(stream)
            names = None if columns is None else [c for c in columns if c in parquet.schema_arrow.names]
            tables.append(parquet.read(columns=names))
    return tables


def key_missing(table_schema: Any, key: tuple[str, ...], name: str) -> str | None:
    """Why the table cannot be merged into by `key`: a key column it lacks (renamed or dropped by another writer, or a
    table another job made); None when it has them all."""
    columns = [f.name for f in table_schema.fields]
    for column in key:
        if column not in columns:
            return (f"table {name}: the upsert key column {column!r} is not in the table (its columns: "
                    f"{', '.join(columns)}): renamed or dropped by another writer, or the table was made by another "
                    "job, so no change can be applied by key. Rename it back, or change publisher.key to the table's key")
    return None


def conformed(rows: Any, target: Any) -> list[Any]:
    """The columns of the Arrow schema `target` from the pa.Table `rows`: cast to its types, one `rows` lacks as nulls."""
    import pyarrow as pa

    return [rows[f.name].cast(f.type) if f.name in rows.column_names else pa.nulls(rows.num_rows, f.type) for f in target]


def merge_source(changes: Changes, target: Any) -> Any:
    """One row per changed key, of the table's Arrow schema `target` plus `DELETE`: the upserted rows (cast to the
    table's types; a column the changes lack as nulls) and the deleted keys (their other columns null)."""
    import pyarrow as pa

    def conform(rows: Any, deleted: bool) -> Any:
        columns = [*conformed(rows, target), pa.array([deleted] * rows.num_rows, pa.bool_())]
        return pa.Table.from_arrays(columns, schema=pa.schema([*(f.with_nullable(True) for f in target),
                                                               pa.field(DELETE, pa.bool_())]))

    deleted = changes.deleted_keys if changes.deleted_keys is not None else changes.keys.slice(0, 0)
    return pa.concat_tables([conform(changes.upserts, False), conform(deleted, True)])


def merge(table: Any, changes: Changes, key: tuple[str, ...], properties: Any) -> dict[str, Any]:
    """The changes merged into `table` as ONE commit with `properties` (the app transaction, the commitInfo); its
    metrics. A commit with no change (its files held no rows, or a merge that changed no row) commits the transaction
    alone, so a replay finds it and the next commit's version follows it (the upsert_delta soak, seed 109392023)."""
    import pyarrow as pa

    target = pa.schema(table.schema().to_arrow())
    if changes.empty:
        table.create_write_transaction([], "append", target, list(table.metadata().partition_columns),
                                       commit_properties=properties)
        return {}
    source = merge_source(changes, target)
    on = " AND ".join(f't."{c}" = s."{c}"' for c in key)
    merger = (table.merge(source, on, source_alias="s", target_alias="t", commit_properties=properties)
              .when_matched_delete(predicate=f's."{DELETE}"')
              .when_matched_update_all(predicate=f'NOT s."{DELETE}"', except_cols=[DELETE])
              .when_not_matched_insert_all(predicate=f'NOT s."{DELETE}"', except_cols=[DELETE]))
    if changes.truncated:  # every row before the truncate goes: those no change after it matched
        merger = merger.when_not_matched_by_source_delete()
    before = table.version()
    metrics = merger.execute()
    if table.version() == before:  # a merge that changed no row (deletes of keys the table lacks) commits nothing in
        # delta-rs, so its app transaction would be missing and every later commit refused: commit it alone
        table.create_write_transaction([], "append", target, list(table.metadata().partition_columns),
                                       commit_properties=properties)
    return metrics


def replace(table: Any, changes: Changes, output: Any, properties: Any) -> None:
    """After a truncate (`changes.truncated`: every row the table held goes), the changes' rows as the whole table, of
    the run's columns (the Arrow schema `output`), in ONE overwrite commit with `properties` that replaces the table's
    schema too (a column the source retyped): a merge can only keep the table's types. The table keeps its id."""
    import pyarrow as pa
    from deltalake import write_deltalake

    rows = pa.Table.from_arrays(conformed(changes.upserts, output), schema=output)
    write_deltalake(table, rows, mode="overwrite", schema_mode="overwrite", commit_properties=properties)


def counts(changes: Changes, key: tuple[str, ...]) -> str:
    """The `UPSERT` commitInfo value."""
    import json

    return json.dumps({"key": list(key), "changes": changes.received, "keys": changes.keys.num_rows,
                       "upserted": changes.upserts.num_rows, "deleted": changes.deleted, "truncated": changes.truncated},
                      sort_keys=True)
