"""The table commit of upsert mode: the run's changes (`upsert.py`, pure) applied to the table in ONE copy-on-write
snapshot, in the transaction append mode creates or evolves the table with; known again by its id, or by its files."""

from __future__ import annotations

import logging
from typing import Any

from gobblin_py.api import DatasetCommit
from gobblin_py.builtin.publishers.changes import Changes
from gobblin_py.builtin.publishers.iceberg import first_snapshot
from gobblin_py.builtin.publishers.iceberg import snapshots as s
from gobblin_py.builtin.publishers.iceberg import upsert as u
from gobblin_py.builtin.publishers.iceberg.catalog import load_table, table_uri, with_retries
from gobblin_py.builtin.publishers.iceberg.identity import check_one_dataset, still_pinned
from gobblin_py.builtin.publishers.iceberg.schema import breaking_change, changed_identity, read_schemas
from gobblin_py.builtin.publishers.iceberg.settings import IcebergPublisherSettings
from gobblin_py.builtin.publishers.iceberg.table_commit import create_transaction, evolving_transaction, summary
from gobblin_py.errors import CommitError
from gobblin_py.fs import Location

log = logging.getLogger(__name__)


def commit_upsert(catalog: Any, settings: IcebergPublisherSettings, name: str, table_dir: Location,
                  commit: DatasetCommit) -> None:
    """Upsert mode: the commit's files (in task output) are changes, reduced to the last per key; ONE snapshot
    rewrites the table's data files holding a changed key without it and adds the upserted rows, in the same
    transaction as table creation and schema evolution. Retried from a fresh read on a conflict."""
    from pyiceberg.io import load_file_io

    d = commit.dataset
    sources = [(table_uri(f.path), f.rel_path) for f in commit.files if f.kind == "data"]
    io = load_file_io(catalog.properties, sources[0][0])
    output = read_schemas(io, [uri for uri, _ in sources])
    spec = settings.upsert_spec()
    where = f"table {name} (dataset {d})"
    footers = u.footers(io, sources)
    keyed = u.reduce_keys(io, sources, spec, where)  # enough to count, and to know a snapshot into an empty table
    whole: list[Changes] = []

    def changes() -> Changes:  # the files read whole: only for the rewrite
        if not whole:
            whole.append(u.read_changes(io, sources, spec, where))
        return whole[0]

    properties = summary(commit, name)
    written: set[str] = set()
    committed: list[str] = []

    def attempt() -> None:
        table = load_table(catalog, name)
        if table is not None and upsert_committed(table, name, commit.commit_id):
            return  # a conflict's retry after the commit went through
        still_pinned(table, name, commit)
        check_one_dataset(table, commit.dataset, name, settings.table)
        if table is None:
            tx = create_transaction(catalog, name, output, commit, settings.partition, table_dir)
            table_io = io
        else:
            problem = key_moved(table, name, settings) or cannot_write(table, name, settings) or \
                changed_identity(table, output, name) or breaking_change(table.schema(), output, name)
            if problem is not None:
                raise CommitError(
                    f"{problem}. Nothing of this run's changes of dataset {d} was applied (they wait in task "
                    f"output). Either change the table so they fit and run `gobblin-py recover JOB.yaml --dataset {d}`, "
                    f"or give up on them with `recover JOB.yaml --dataset {d} --abandon` and fix the job: the next "
                    "run re-extracts their range")
            tx = evolving_transaction(table, output)
            table_io = table.io
        written.update(first_snapshot.copy_names(tx.table_metadata.location, len(sources), commit.commit_id))  # a
        # killed attempt's copies, which a replay that rewrites does not add: removed with the attempt's other files
        why = "the key columns do not decide" if keyed is None else \
            first_snapshot.why_not(table, tx, keyed, [m.num_rows for m in footers], [m.schema.to_arrow_schema() for m in footers])
        if why is None and keyed is not None:
            applied, counted = first_snapshot.add(tx, io, sources, keyed, tx.table_metadata.location, commit.commit_id,
                                                 written.add), keyed
        else:
            counted = changes()
            applied = u.rewrite(tx, table, counted, spec, table_io, commit.commit_id, name, written.add)
        u.commit_snapshot(tx, table_io, applied, {**properties, s.FIELD_IDS: s.field_ids(tx.table_metadata.schema(), output.names),
                                                  u.UPSERT: u.counts(counted, applied)}, name)
        committed.extend(f.file_path for f in applied.added)
        log.info("table %s: commit %s applied %d change(s) of %d key(s) (%d deleted), rewriting %d data file(s), %s",
                 name, commit.commit_id, counted.received, counted.keys.num_rows, counted.deleted, len(applied.deleted),
                 f"its {len(applied.added)} file(s) added as written (a first snapshot)" if why is None else
                 f"writing {len(applied.added)} ({why})")

    try:
        with_retries(f"table {name}: commit {commit.commit_id}", settings.commit_attempts, attempt)
    finally:  # what an attempt that lost a conflict wrote and the one that won did not: never in the table
        _remove_unreferenced(io, sorted(written - set(committed)) if committed else [], name)


def key_moved(table: Any, name: str, settings: IcebergPublisherSettings) -> str | None:
    """Upsert mode: why the table's columns no longer hold the key the job's commits were applied by (a key column
    renamed or dropped, or dropped and added again, by another writer); None in append mode or when they do."""
    if settings.mode != "upsert":
        return None
    by_name = {f.name: f for f in table.schema().fields}
    by_id = {f.field_id: f for f in table.schema().fields}
    recorded = s.recorded_field_ids(table)
    for column in settings.key:
        found, expected = by_name.get(column), recorded.get(column)
        now = by_id.get(expected) if expected is not None else None
        if found is None:
            where = (f"renamed to {now.name!r}" if now is not None else "dropped") if expected is not None else "never added"
            return (f"table {name}: the upsert key column {column!r} is not in the table ({where}, by another writer "
                    f"or before this job's first commit), so no change can be applied by key: rename it back, or "
                    "change publisher.key and the job's output to the table's key column")
        if expected is not None and found.field_id != expected:
            return (f"table {name}: the upsert key column {column!r} is field id {found.field_id}, not {expected} as "
                    "this job's last commit recorded: another writer dropped and added it again, so the table's rows "
                    "may no longer be identified by it. Check the table, then start it over or restore the column")
    return None


def cannot_write(table: Any, name: str, settings: IcebergPublisherSettings) -> str | None:
    """Upsert mode: why pyiceberg cannot write the table's files here (a partitioned table, pyiceberg-core missing)."""
    if settings.mode != "upsert" or table.spec().is_unpartitioned() or u.partitioned_writes():
        return None
    return f"table {name} is partitioned ({table.spec()}): {u.PARTITIONED_NEEDS}".replace("\n", " ")


def upsert_committed(table: Any, name: str, commit_id: str) -> bool:
    """Whether the table's current state holds the upsert commit `commit_id`: its snapshot among the current one's
    ancestors or, once some were expired, a live data file named with the commit's uuid. A commit that wrote no file
    (deletes only) and whose snapshot was expired is applied again, which leaves the same rows (idempotent by key)."""
    if s.has_commit(table, commit_id):
        return True
    if s.history_complete(table):
        return False
    found = u.committed_by_files(s.live_data_paths(table), commit_id)
    if found:
        log.info("table %s: upsert commit %s found by its files (its snapshot was expired)", name, commit_id)
    return found


def _remove_unreferenced(io: Any, paths: list[str], table: str) -> None:
    """Delete the data files an upsert attempt wrote that its table does not reference (a retried attempt wrote
    fewer); best effort: one left is an orphan no reader sees, named with the commit's uuid."""
    for path in paths:
        try:
            io.delete(path)
        except FileNotFoundError:
            continue  # a name an attempt may have written and did not
        except OSError as exc:
            log.warning("table %s: could not remove %s, which no snapshot references: %s", table, path, exc)
