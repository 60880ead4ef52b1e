"""The table commit of append mode, and the transaction both modes build on: ONE transaction creates the table when
missing or evolves its schema by name, and adds the run's files as one snapshot whose summary carries the commit's id."""

from __future__ import annotations

import json
import logging
from typing import Any

from gobblin_py.api import DatasetCommit
from gobblin_py.builtin.publishers.iceberg import snapshots as s
from gobblin_py.builtin.publishers.iceberg.catalog import (
    ensure_namespace,
    load_table,
    split_identifier,
    table_uri,
    with_retries,
)
from gobblin_py.builtin.publishers.iceberg.identity import check_one_dataset, still_pinned
from gobblin_py.builtin.publishers.iceberg.schema import (
    breaking_change,
    changed_identity,
    evolvable,
    needs_evolution,
    partition_spec,
    read_schemas,
    to_iceberg_schema,
)
from gobblin_py.builtin.publishers.iceberg.settings import IcebergPublisherSettings, TablePartition
from gobblin_py.errors import CommitError
from gobblin_py.fs import Location

log = logging.getLogger(__name__)


def commit_append(catalog: Any, settings: IcebergPublisherSettings, name: str, table_dir: Location, commit: DatasetCommit,
                  paths: list[str]) -> None:
    """Add the published data files `paths` to table `name` (created at `table_dir` when missing) as one snapshot,
    checking the table's identity and schema first; retried on a conflict, and a no-op once the commit is in."""
    from pyiceberg.io import load_file_io

    output = read_schemas(load_file_io(catalog.properties, paths[0]), paths)
    properties = summary(commit, name)

    def attempt() -> None:
        table = load_table(catalog, name)
        if table is not None and s.is_committed(table, name, commit.commit_id, paths):
            return  # a conflict's retry after the commit went through
        still_pinned(table, name, commit)
        check_one_dataset(table, commit.dataset, name, settings.table)
        fresh = paths
        if table is not None:  # a re-read of a range the table holds (`state reset`) writes files of the same
            live = s.live_data_paths(table)  # names, which publishing found byte-identical: they are in already
            fresh = [p for p in paths if p not in live]
            if not fresh:  # still a snapshot of its own, with no file: the job's newest commit of the dataset in the
                # table is then this one, as the work directory's is (`identity.pin` compares the two), and a replay
                # finds it by its id
                log.info("table %s: the %d file(s) of commit %s are in the table already (a range read again); "
                         "committed as a snapshot adding no file", name, len(paths), commit.commit_id)
                _mark(table.transaction(), properties)
                return
        if table is None:
            tx = create_transaction(catalog, name, output, commit, settings.partition, table_dir)
        else:
            problem = changed_identity(table, output, name) or breaking_change(table.schema(), output, name)
            if problem is not None:
                d = commit.dataset
                raise CommitError(
                    f"{problem}. Nothing was appended: this run's files of dataset {d} are published under "
                    f"{table_dir / 'data'} but not in the table. Either change the table so they fit (Spark's "
                    f"ALTER TABLE) and run `gobblin-py recover JOB.yaml --dataset {d}`, or give up on them with "
                    f"`recover JOB.yaml --dataset {d} --abandon`, delete those files and fix the schema: the next run "
                    "re-extracts their range")
            tx = evolving_transaction(table, output)
        _add(tx, fresh, {**properties, s.FIELD_IDS: s.field_ids(tx.table_metadata.schema(), output.names)}, name)

    with_retries(f"table {name}: commit {commit.commit_id}", settings.commit_attempts, attempt)


def create_transaction(catalog: Any, name: str, output: Any, commit: DatasetCommit, partition: TablePartition | None,
                       table_dir: Location) -> Any:
    """The transaction creating table `name` (and its namespace) at `table_dir` with the files' schema and the
    partition spec, marked with the commit that created it (`pin`)."""
    namespace, _ = split_identifier(name)
    ensure_namespace(catalog, namespace)
    schema = to_iceberg_schema(output)
    kwargs: dict[str, Any] = {}
    if partition is not None:
        kwargs["partition_spec"] = partition_spec(schema, partition.column, partition.granularity, name)
    return catalog.create_table_transaction(name, schema=schema, location=table_uri(table_dir),
                                            properties={s.CREATED_BY: commit.commit_id}, **kwargs)


def evolving_transaction(table: Any, output: Any) -> Any:
    """A transaction on `table` that first gains the columns the commit's files add (in the commit's own snapshot)."""
    tx = table.transaction()
    if needs_evolution(table.schema(), output):
        with tx.update_schema() as update:
            update.union_by_name(evolvable(output, table.schema()))
    return tx


def summary(commit: DatasetCommit, table: str) -> dict[str, str]:
    """What a commit's snapshot summary carries: its identity, the watermarks, and what the source keeps with it."""
    properties = {s.COMMIT_ID: commit.commit_id, s.JOB: commit.job, s.RUN_ID: commit.run_id, s.DATASET: commit.dataset,
                  s.WATERMARKS: json.dumps(commit.watermarks, sort_keys=True, default=str)}
    if commit.epoch is not None:
        properties[s.EPOCH] = str(commit.epoch)
    if commit.watermark_keys is not None:
        properties[s.WATERMARK_KEYS] = str(commit.watermark_keys)
    if commit.source_state:
        kept = json.dumps(commit.source_state, sort_keys=True, default=str)
        if len(kept) <= s.SOURCE_STATE_MAX:
            properties[s.SOURCE_STATE] = kept
        else:
            log.info("table %s: commit %s keeps %d bytes of source state, more than a snapshot summary holds here; it "
                     "is in the dataset's state only", table, commit.commit_id, len(kept))
    return properties


def _mark(tx: Any, properties: dict[str, str]) -> None:
    """Commit a snapshot that adds no file and carries `properties` (the commit's summary; no `FIELD_IDS`, which the
    snapshots that added the files keep)."""
    with tx.update_snapshot(snapshot_properties=properties).fast_append():
        pass
    tx.commit_transaction()


def _add(tx: Any, paths: list[str], properties: dict[str, str], table: str) -> None:
    """Add the files and commit; a file the table cannot take (duplicate, several partitions, a schema it cannot
    read) is a CommitError naming the table; a conflict goes up to be retried."""
    from pyiceberg.exceptions import ValidationError

    try:
        tx.add_files(paths, snapshot_properties=properties)
    except (ValueError, TypeError, ValidationError) as exc:
        raise CommitError(f"table {table}: cannot add {len(paths)} file(s) ({paths[0]} …): {exc}") from exc
    tx.commit_transaction()
