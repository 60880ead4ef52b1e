"""What gobblin-py writes into a table's snapshots and reads back from them: the summary keys, a commit known by its
id (never by a counter), the job's watermarks and field ids per dataset, and the files the current snapshot lists."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gobblin_py.api import TableFile
from gobblin_py.errors import CommitError

log = logging.getLogger(__name__)

COMMIT_ID = "gobblin-py.commit-id"
EPOCH = "gobblin-py.epoch"  # the fencing epoch of the job's lease that committed it
JOB = "gobblin-py.job"
RUN_ID = "gobblin-py.run-id"
DATASET = "gobblin-py.dataset"
WATERMARKS = "gobblin-py.watermarks"
WATERMARK_KEYS = "gobblin-py.watermark-keys"
"""How many watermark keys the dataset holds once the commit's `WATERMARKS` (this run's keys) are merged in: the
job's snapshots of a dataset add up to its whole watermarks when they hold that many keys between them."""
SOURCE_STATE = "gobblin-py.source-state"
"""What the commit's work units keep in the dataset's state, as JSON: the source's schema in effect (a registry
subject's version and schema id, a table's columns) and identities (a topic's id); left out above `SOURCE_STATE_MAX`."""
SOURCE_STATE_MAX = 16_384
FIELD_IDS = "gobblin-py.field-ids"
"""The field id of each top-level column of the commit's files (JSON `{name: id}`): what the next commit compares with
the table's schema, as another writer may rename or drop a column in between."""
CREATED_BY = "gobblin-py.created-by-commit"
"""A table property: the commit id whose transaction created the table, so that the dataset's next commit knows the
table for the one its first commit made (its uuid is known only once it exists)."""
COMPACTION = "gobblin-py.compaction"
"""Set (to the compaction's counts, as JSON) on a compaction's snapshot: it moves no watermark."""


@dataclass(frozen=True)
class TableMark:
    """What a table records of one dataset's last gobblin-py commit: its run, when, and the watermarks it committed."""

    table: str
    run_id: str
    commit_id: str
    snapshot_id: int
    committed_at_ms: int
    watermarks: dict[str, Any]


def read_metadata(io: Any, uri: str) -> Any | None:
    """The table metadata in the file at `uri`, or None when it cannot be read or parsed."""
    from pyiceberg.serializers import FromInputFile

    try:
        return FromInputFile.table_metadata(io.new_input(uri))
    except (OSError, ValueError) as exc:  # a pydantic ValidationError and a JSON error are ValueErrors
        log.info("could not read table metadata %s: %s", uri, exc)
        return None


def creating_commit(metadata: Any) -> str | None:
    """The commit id whose transaction created the table, when `metadata` is the version that transaction wrote (the
    table's first: no earlier version logged, no snapshot but that commit's), else None."""
    created = metadata.properties.get(CREATED_BY)
    if created is None or metadata.metadata_log:
        return None
    if any(s.summary is None or s.summary.get(COMMIT_ID) != created for s in metadata.snapshots):
        return None
    return created


def gobblin_snapshots(table: Any) -> Iterator[Any]:
    """The snapshots of the table's current state (the current one and its ancestors, newest first) that gobblin-py made."""
    from pyiceberg.table.snapshots import ancestors_of

    for snapshot in ancestors_of(table.current_snapshot(), table.metadata):
        if snapshot.summary is not None and snapshot.summary.get(COMMIT_ID) is not None:
            yield snapshot


def other_dataset(table: Any, dataset: str) -> str | None:
    """Another dataset than `dataset` that a gobblin-py snapshot of the table's current state committed, or None."""
    for s in gobblin_snapshots(table):
        found = s.summary.get(DATASET)
        if found is not None and found != dataset:
            return str(found)
    return None


def has_commit(table: Any, commit_id: str) -> bool:
    """True when the table's current state holds the snapshot tagged `commit_id` (a rolled-back one does not count)."""
    return any(s.summary.get(COMMIT_ID) == commit_id for s in gobblin_snapshots(table))


def history_complete(table: Any) -> bool:
    """Whether the current snapshot's ancestry reaches back to the table's first snapshot: False once an ancestor was
    expired (`expire_snapshots`), when a commit's absence from the snapshot log proves nothing. pyiceberg's expiry
    clears the parent id of the oldest snapshot left, so that alone does not tell: a first snapshot also has sequence
    number 1 (format v2) and its summary's totals equal what it added."""
    from pyiceberg.table.snapshots import ancestors_of

    oldest = None
    for oldest in ancestors_of(table.current_snapshot(), table.metadata):  # noqa: B007 - the last one is the oldest
        pass
    if oldest is None:
        return True
    if oldest.parent_snapshot_id is not None or (table.metadata.format_version >= 2 and (oldest.sequence_number or 0) > 1):
        return False
    summary = oldest.summary
    if summary is None:
        return False
    for total, added in (("total-data-files", "added-data-files"), ("total-records", "added-records")):
        if int(summary.get(total) or 0) > int(summary.get(added) or 0):
            return False
    return True


def is_committed(table: Any, name: str, commit_id: str, paths: list[str]) -> bool:
    """Whether the commit tagged `commit_id`, which adds the data files `paths`, is in the table's current state: its
    snapshot among the current one's ancestors, or, when some of them were expired, all of its files live in the
    table (a commit adds all of them or none). Some live and some not: CommitError naming the table and a file."""
    if has_commit(table, commit_id):
        return True
    if history_complete(table):
        return False
    from pyiceberg.manifest import DataFileContent

    live = {e.data_file.file_path for e in live_entries(table) if e.data_file.content == DataFileContent.DATA}
    present = [p for p in paths if p in live]
    if len(present) == len(paths):
        log.info("table %s: commit %s found by its %d file(s), all live in the table (its snapshot was expired)",
                 name, commit_id, len(paths))
        return True
    if present:
        missing = next(p for p in paths if p not in live)
        raise CommitError(f"table {name}: commit {commit_id} is neither in the table's snapshot log (expired) nor wholly "
                          f"in its files: {len(present)} of its {len(paths)} files are live ({present[0]} …) and "
                          f"{missing} is not, so another writer removed or rewrote some of them. Check the table's "
                          "rows of this commit's range, then end the commit with `gobblin-py recover JOB.yaml --dataset "
                          "DATASET --abandon`")
    return False


def recorded_field_ids(table: Any) -> dict[str, int]:
    """name → field id of the columns of the newest gobblin-py commit that recorded them (none before that)."""
    for s in gobblin_snapshots(table):
        raw = s.summary.get(FIELD_IDS)
        if raw:
            try:
                return {str(k): int(v) for k, v in json.loads(raw).items()}
            except (ValueError, TypeError, AttributeError):
                log.warning("snapshot %s has an unreadable %s summary: %r", s.snapshot_id, FIELD_IDS, raw)
    return {}


def field_ids(schema: Any, names: list[str]) -> str:
    """The `FIELD_IDS` summary of a commit whose files hold the top-level columns `names`, in the table's `schema`."""
    by_name = {f.name: f.field_id for f in schema.fields}
    return json.dumps({n: by_name[n] for n in names if n in by_name}, sort_keys=True)


def latest_marks(table: Any, table_name: str, job: str) -> dict[str, TableMark]:
    """dataset → the newest gobblin-py snapshot of `job` for it in the table's current state."""
    out: dict[str, TableMark] = {}
    for s in gobblin_snapshots(table):
        summary = s.summary
        dataset = summary.get(DATASET)
        if summary.get(JOB) != job or dataset is None or dataset in out or summary.get(COMPACTION) is not None:
            continue
        try:
            watermarks = json.loads(summary.get(WATERMARKS) or "{}")
        except ValueError:
            watermarks = None
        if not isinstance(watermarks, dict):
            raise CommitError(f"table {table_name}: snapshot {s.snapshot_id} (commit {summary.get(COMMIT_ID)}) has an "
                              f"unreadable {WATERMARKS} summary: {summary.get(WATERMARKS)!r}")
        out[dataset] = TableMark(table_name, summary.get(RUN_ID, ""), summary.get(COMMIT_ID, ""), s.snapshot_id,
                                 s.timestamp_ms, watermarks)
    return out


def resumable_marks(table: Any, table_name: str, job: str, datasets: list[str]) -> dict[str, tuple[TableMark, dict[str, Any]]]:
    """dataset → its newest mark, and the watermarks of all of `job`'s snapshots of it in the table's current state
    merged (each key's value from the newest that has it), for `datasets` the job has snapshots of. CommitError
    naming the table when they do not add up to the whole the newest recorded (`WATERMARK_KEYS`; without it,
    when some snapshots were expired), as a dataset resumed from them would extract again what the rest covered."""
    newest = {d: m for d, m in latest_marks(table, table_name, job).items() if d in datasets}
    merged: dict[str, dict[str, Any]] = {d: {} for d in newest}
    for s in gobblin_snapshots(table):
        summary = s.summary
        dataset = summary.get(DATASET)
        if dataset not in merged or summary.get(JOB) != job or summary.get(COMPACTION) is not None:
            continue
        for key, value in json.loads(summary.get(WATERMARKS) or "{}").items():
            merged[dataset].setdefault(key, value)
    complete = None
    out = {}
    for dataset, mark in newest.items():
        recorded = table.metadata.snapshot_by_id(mark.snapshot_id).summary.get(WATERMARK_KEYS)
        found = len(merged[dataset])
        if recorded is not None and found != int(recorded):
            why = (f"hold {found} of the {recorded} watermark keys its last commit left (older snapshots expired)"
                   if found < int(recorded) else
                   f"hold {found} watermark keys and its last commit left {recorded} (keys reset since?)")
        elif recorded is None and not (complete if complete is not None else (complete := history_complete(table))):
            why = "do not record how many watermark keys it holds, and some of them were expired"
        else:
            out[dataset] = (mark, merged[dataset])
            continue
        raise CommitError(f"table {table_name}: the state store holds nothing of dataset {dataset} (a new or lost work "
                          f"directory), and the table's snapshots of job {job} for it {why}, so where the job was cannot "
                          "be read safely: extracting from there could add records again. Restore the work directory, "
                          f"or set the dataset's watermarks (`gobblin-py state reset JOB.yaml --dataset {dataset} --to "
                          "KEY=VALUE …`), then run again")
    return out


def live_file_under(table: Any, prefix: str) -> str | None:
    """A data file the table's current snapshot lists under `prefix` (a URI), or None."""
    from pyiceberg.manifest import DataFileContent

    return next((e.data_file.file_path for e in live_entries(table)
                 if e.data_file.content == DataFileContent.DATA and e.data_file.file_path.startswith(prefix)), None)


def live_entries(table: Any) -> Iterator[Any]:
    """The manifest entries of every file the table's current snapshot lists (none deleted), read from its manifests."""
    current = table.current_snapshot()
    if current is None:
        return
    for manifest in current.manifests(table.io):
        yield from manifest.fetch_manifest_entry(table.io, discard_deleted=True)


def live_data_paths(table: Any) -> set[str]:
    """The paths of the data files the table's current snapshot lists."""
    from pyiceberg.manifest import DataFileContent

    return {e.data_file.file_path for e in live_entries(table) if e.data_file.content == DataFileContent.DATA}


def live_files(table: Any) -> list[TableFile]:
    """Every data and delete file the table's current snapshot lists (no data file is opened)."""
    from pyiceberg.manifest import DataFileContent

    metadata, schema = table.metadata, table.schema()
    specs, default = table.specs(), metadata.default_spec_id
    out = []
    for entry in live_entries(table):
        f = entry.data_file
        added = metadata.snapshot_by_id(entry.snapshot_id) if entry.snapshot_id is not None else None
        summary = added.summary if added is not None and added.summary is not None else {}
        out.append(TableFile(path=f.file_path, size=f.file_size_in_bytes, records=f.record_count,
                             partition=specs[f.spec_id].partition_to_path(f.partition, schema),
                             added_ms=added.timestamp_ms if added is not None else table.current_snapshot().timestamp_ms,
                             data=f.content == DataFileContent.DATA, current_spec=f.spec_id == default,
                             compacted=summary.get(COMPACTION) is not None))
    return out
