"""The `delta` publisher's part of `gobblin-py maintain` (`TableUpkeep`), each action planned here as commit steps the
framework logs before running them, so a SIGKILL anywhere is completed by the next `maintain` or `run`:

- `--remove-orphans-older-than D`: Delta's vacuum. delta-rs lists the candidates (`vacuum(dry_run=True, full=True)`:
  files the log removed longer than D ago, and files under the table no version references, last written longer
  than D ago); the listed files are deleted by one `FsDeleteCommitStep`, never by delta-rs, so what is deleted is
  exactly what was listed. A file a pending commit names (a published file its table commit has yet to add, a
  compaction's merged file) is refused, naming the record.
- `--expire-snapshots-older-than D`: a checkpoint at the version the job's next commit reads the history from (its
  RESTORE check reads the history since the version its last commit read; the current version when the job has no
  commit there), done when `_delta_log/_last_checkpoint` is at that version or later, then the log entries (commits,
  checkpoints, checksums) of versions below it written longer than D ago, deleted by one `FsDeleteCommitStep` after
  the checkpoint step, so nothing is expired that no checkpoint covers. Not at the current version: delta-rs's own
  log cleanup (`delta.enableExpiredLogCleanup`, on any writer's next commit) deletes the entries older than
  `delta.logRetentionDuration` below the latest checkpoint, and one above that version let it delete entries the
  job still reads (a RESTORE among them went unseen). A table a pending record touches is refused, and the
  maintainer commits the actions on one table one after another (`maintainer.rounds`): a retention commit that opened
  the table while the expiry deleted entries below its new checkpoint failed reading them.
- `--retention D`: the table's time partitions (`ts_day` …) that ended longer than D ago, removed in ONE Delta
  commit (`DeltaTable.delete` on the partition column, so whole files go, none rewritten) tagged with a transaction
  of app id `gobblin-py.maintain/<job>/retention`: its version is pinned in the record, and the step is done when the
  table's transaction version reaches it, or when no file of those partitions is left.

Ages below the table's own `delta.deletedFileRetentionDuration` (vacuum) or `delta.logRetentionDuration` (log
expiry) are refused, naming the property, unless `--below-table-retention` asks for them."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

from gobblin_py.api import CommitStep, PendingCommit, UpkeepAction, UpkeepRequest
from gobblin_py.builtin.publishers.delta import table as t
from gobblin_py.errors import CommitError
from gobblin_py.fs import Location, filesystem_for
from gobblin_py.fs.delete_steps import FsDeleteCommitStep, inside

DELETED_FILE_RETENTION = ("delta.deletedFileRetentionDuration", "interval 1 weeks")
LOG_RETENTION = ("delta.logRetentionDuration", "interval 30 days")
"""The table properties an age is checked against, with Delta's defaults."""

_UNITS = {"nanosecond": 1e-9, "microsecond": 1e-6, "millisecond": 1e-3, "second": 1, "minute": 60, "hour": 3600,
          "day": 86400, "week": 604800}
_LOG_FILE = re.compile(r"^(\d{20})\.(json|crc|checkpoint\.parquet|checkpoint\.\d+\.\d+\.parquet|checkpoint\.[^/]+\.(json|parquet))$")


def interval_seconds(value: str, name: str, table: str) -> float:
    """A Delta interval property (`interval 7 days`) in seconds; CommitError naming the property when unreadable."""
    found = re.fullmatch(r"\s*(?:interval\s+)?(\d+)\s*([a-z]+?)s?\s*", value.lower())
    if found is None or found.group(2) not in _UNITS:
        raise CommitError(f"table {table}: its property {name} is {value!r}, not an interval gobblin-py reads "
                          "(`interval 7 days`); set it to one")
    return int(found.group(1)) * _UNITS[found.group(2)]


def _property(table: Any, prop: tuple[str, str], name: str) -> tuple[str, float]:
    value = table.metadata().configuration.get(prop[0]) or prop[1]
    return value, interval_seconds(value, prop[0], name)


def _too_young(age: float, table: Any, prop: tuple[str, str], name: str, request: UpkeepRequest, what: str) -> str | None:
    """Why `age` is refused on `table`: shorter than its property `prop` and not asked for explicitly."""
    value, limit = _property(table, prop, name)
    if age >= limit or request.below_table_retention:
        return None
    return (f"{age / 3600:g}h is shorter than the table's {prop[0]} ({value}): readers and writers of the table rely on "
            f"{what} that young staying; give an age of at least {limit / 3600:g}h, lower the table property "
            "(delta-rs: `DeltaTable.alter.set_table_properties`), or pass --below-table-retention")


def _last_checkpoint(uri: str) -> int | None:
    """The version `_delta_log/_last_checkpoint` names, None when there is none."""
    loc = Location(uri) / "_delta_log" / "_last_checkpoint"
    fs = filesystem_for(loc)
    if not fs.exists(loc):
        return None
    with fs.open_read(loc) as stream:
        return int(json.loads(stream.read())["version"])


def _table(uri: str, storage_options: dict[str, str]) -> Any:
    table = t.open_table(uri, storage_options)
    if table is None:
        raise CommitError(f"table {uri} no longer exists: nothing to do (abandon the maintenance record)")
    return table


@dataclass
class DeltaCheckpointCommitStep(CommitStep):
    """A checkpoint of `table` at `version` or later; done when `_delta_log/_last_checkpoint` names such a version."""

    type_name: ClassVar[str] = "delta_checkpoint"
    table: str
    version: int
    storage_options: dict[str, str] = field(default_factory=dict)

    def verify(self) -> bool:
        done = _last_checkpoint(self.table)
        return done is not None and done >= self.version

    def execute(self) -> None:
        from deltalake import DeltaTable

        _table(self.table, self.storage_options)  # CommitError naming the table when it is gone
        DeltaTable(self.table, version=self.version, storage_options=self.storage_options or None).create_checkpoint()

    def describe(self) -> str:
        return f"checkpoint table {self.table} at version {self.version}"

    def paths(self) -> list[str]:
        return [self.table]


@dataclass
class DeltaRetentionCommitStep(CommitStep):
    """Remove the files of `table` in partitions `values` of `column` in one Delta commit tagged (app_id, version);
    done when the table's transaction version of `app_id` reaches `version`, or no file of those partitions is left."""

    type_name: ClassVar[str] = "delta_retention"
    table: str
    column: str
    values: list[str]
    app_id: str
    version: int
    commit_id: str
    storage_options: dict[str, str] = field(default_factory=dict)

    def _predicate(self) -> str:
        return f"{self.column} IN ({', '.join(_quote(v) for v in self.values)})"

    def verify(self) -> bool:
        table = _table(self.table, self.storage_options)
        if (table.transaction_version(self.app_id) or 0) >= self.version:
            return True
        return not any(v in self.values for v in _partition_values(table, self.column))

    def execute(self) -> None:
        from deltalake import CommitProperties, Transaction

        table = _table(self.table, self.storage_options)
        if t.transaction_done(table, self.app_id, self.version, self.table,
                              "this retention was planned: another maintenance of the table ran since. Nothing was "
                              "deleted; abandon this record and run `gobblin-py maintain` again"):
            return
        table.delete(self._predicate(), commit_properties=CommitProperties(
            app_transactions=[Transaction(self.app_id, self.version)],
            custom_metadata={t.COMMIT_ID: self.commit_id, "gobblin-py.operation": "retention"}))

    def describe(self) -> str:
        return f"remove partitions {', '.join(self.values)} of {self.column} from table {self.table} ({self.commit_id})"

    def paths(self) -> list[str]:
        return [self.table]


UPKEEP_STEPS = (DeltaCheckpointCommitStep, DeltaRetentionCommitStep)


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _partition_values(table: Any, column: str) -> list[str | None]:
    """The partition value of `column` of each file the table's current version lists."""
    actions = table.get_add_actions(flatten=True)
    name = f"partition.{column}"
    return list(actions.column(name).to_pylist()) if name in actions.column_names else []


def _named(pending: list[PendingCommit]) -> dict[str, str]:
    """Every local path a pending commit names (folded) → the record."""
    return {os.path.normpath(p): c.record for c in pending for p in c.paths}


def _touching(uri: str, pending: list[PendingCommit]) -> PendingCommit | None:
    """The first pending commit naming the table or a path under it."""
    for p in pending:
        if any(path == uri or inside(path, uri) for path in p.paths):
            return p
    return None


def _vacuum(table: Any, uri: str, request: UpkeepRequest, pending: list[PendingCommit]) -> UpkeepAction:
    action = UpkeepAction("remove-orphans", uri)
    assert request.remove_orphans_older_than is not None
    age = request.remove_orphans_older_than
    why = _too_young(age, table, DELETED_FILE_RETENTION, uri, request, "files removed from the log")
    if why is not None:
        action.refused.append(f"vacuum of table {uri}: {why}")
        return action
    hours = math.ceil(age / 3600)  # delta-rs counts whole hours: never younger than asked
    listed = table.vacuum(retention_hours=hours, dry_run=True, enforce_retention_duration=not request.below_table_retention,
                          full=True)
    named = _named(pending)
    files: dict[str, int] = {}
    for rel in sorted(listed):
        path = str(Location(uri) / rel)
        record = named.get(os.path.normpath(path))
        if record is not None:
            action.refused.append(f"{path}: the pending commit {record!r} names it (recover it first: "
                                  f"`gobblin-py recover JOB.yaml --dataset {record}`)")
            continue
        size = filesystem_for(path).size(Location(path))
        if size is not None:
            files[path] = size
    if files:
        action.steps = [FsDeleteCommitStep(root=uri, files=files, what=f"files vacuumed from table {uri} (older than {hours}h)")]
        action.deletions = [f"{p} ({n} bytes)" for p, n in files.items()]
    elif not action.refused:
        action.note = f"nothing to vacuum (no file removed from the table or unreferenced for {hours}h)"
    return action


def _log_floor(table: Any, job: str, current: int) -> int:
    """The lowest version whose log entry the job still reads: its next commit of each dataset reads the history since
    the version its last commit read (the RESTORE check), as the commits of that commit id record it
    (`gobblin-py.read-version`; for commits before it was recorded, their `readVersion`, else their version − 1)."""
    latest: dict[str, str] = {}
    first_read: dict[str, int] = {}
    for entry in table.history():  # newest first
        dataset = entry.get(t.DATASET)
        if entry.get(t.JOB) != job or t.COMMIT_ID not in entry or dataset is None:  # not a run's commit (a creation …)
            continue
        latest.setdefault(dataset, entry[t.COMMIT_ID])
        if latest[dataset] == entry[t.COMMIT_ID]:
            read = entry.get(t.READ_VERSION, entry.get("readVersion", int(entry.get("version", current + 1)) - 1))
            first_read[dataset] = int(read)
    return min([current, *first_read.values()])


def _expire(table: Any, uri: str, job: str, request: UpkeepRequest, storage_options: dict[str, str]) -> UpkeepAction:
    action = UpkeepAction("expire-snapshots", uri)
    assert request.expire_snapshots_older_than is not None
    why = _too_young(request.expire_snapshots_older_than, table, LOG_RETENTION, uri, request,
                     "log entries (time travel)")
    if why is not None:
        action.refused.append(f"log expiry of table {uri}: {why}")
        return action
    version = table.version()
    floor = _log_floor(table, job, version)
    cutoff = request.now - request.expire_snapshots_older_than
    log_dir = Location(uri) / "_delta_log"
    files: dict[str, int] = {}
    if log_dir.is_local:
        for entry in sorted(os.scandir(log_dir), key=lambda e: e.name):
            found = _LOG_FILE.match(entry.name)
            if found is None or int(found.group(1)) >= floor or not entry.is_file(follow_symlinks=False):
                continue
            stat = entry.stat(follow_symlinks=False)
            if stat.st_mtime < cutoff:
                files[str(log_dir / entry.name)] = stat.st_size
    steps: list[CommitStep] = []
    notes = []
    last = _last_checkpoint(uri)
    if last is None or last < floor:
        steps.append(DeltaCheckpointCommitStep(table=uri, version=floor, storage_options=storage_options))
        notes.append(f"a checkpoint at version {floor}" + (" (the version the job's next commit reads the history from)"
                                                            if floor < version else "") + ", then the log entries below it")
    else:
        notes.append(f"the checkpoint at version {last} is there")
    if files:
        steps.append(FsDeleteCommitStep(root=uri, files=files, what=f"log entries of table {uri} below its checkpoint at "
                                                                      f"version {floor}"))
        action.deletions = [f"{p} ({n} bytes)" for p, n in files.items()]
    elif not log_dir.is_local:
        notes.append("log entries are expired on a local or mounted location only")
    else:
        notes.append("no log entry to expire" + (f": the job's next commit reads the history from version {floor}"
                                                 if floor < version else " older than the age"))
    action.steps = steps
    action.note = "; ".join(notes)
    return action


def _partition_of(path: str, partition: Any) -> str | None:
    """The partition value of the Parquet file at `path` (read from its time column), None when it is not there."""
    loc = Location(path)
    if not path.endswith(".parquet") or not filesystem_for(loc).exists(loc):
        return None
    try:
        return t.read_file(path, "", partition, path).partition
    except CommitError:
        return None


def _retention(publisher: Any, table: Any, uri: str, job: str, request: UpkeepRequest,
               pending: list[PendingCommit]) -> UpkeepAction:
    from gobblin_py.builtin.publishers.delta.settings import DeltaPartition

    action = UpkeepAction("retention", uri)
    assert request.retention is not None
    partition: DeltaPartition | None = publisher.settings.partition
    columns = list(table.metadata().partition_columns)
    if partition is None or columns != [partition.name]:
        action.note = ("not supported: the table is not partitioned" if not columns else
                       f"not supported: the table is partitioned by {columns}, not by a time column of the writer's partition")
        return action
    fmt = t.PARTITION_FORMATS[partition.granularity]
    cutoff = dt.datetime.fromtimestamp(request.now - request.retention, dt.UTC)
    touched: dict[str, str] = {}  # partition value → the pending commit whose files (published or not) hold it
    for p in pending:
        if _touching(uri, [p]) is not None:
            for path in p.paths:
                value = _partition_of(path, partition)
                if value is not None:
                    touched.setdefault(value, p.record)
    values = []
    for value in sorted({v for v in _partition_values(table, partition.name) if v is not None}):
        try:
            start = dt.datetime.strptime(value, fmt).replace(tzinfo=dt.UTC)
        except ValueError:
            continue
        if _span_end(start, partition.granularity) > cutoff:
            continue
        if value in touched:
            record = touched[value]
            action.refused.append(f"partition {partition.name}={value} of table {uri}: the pending commit {record!r} "
                                  f"touches it (recover it first: `gobblin-py recover JOB.yaml --dataset {record}`)")
            continue
        values.append(value)
    if not values:
        if not action.refused:
            action.note = f"no partition ended before {cutoff.isoformat(timespec='seconds')}"
        return action
    app = f"gobblin-py.maintain/{job}/retention"
    version = (table.transaction_version(app) or 0) + 1
    action.steps = [DeltaRetentionCommitStep(table=uri, column=partition.name, values=values, app_id=app, version=version,
                                             commit_id=f"{app}/{version}", storage_options=publisher.settings.storage_options)]
    counts = _files_by_partition(table, partition.name)
    action.deletions = [f"partition {partition.name}={v} of table {uri} ({counts.get(v, 0)} file(s) removed in one Delta "
                        "commit; they stay on disk for time travel until a vacuum deletes them)" for v in values]
    return action


def _files_by_partition(table: Any, column: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in _partition_values(table, column):
        if v is not None:
            out[v] = out.get(v, 0) + 1
    return out


def _span_end(start: dt.datetime, granularity: str) -> dt.datetime:
    if granularity == "HOUR":
        return start + dt.timedelta(hours=1)
    if granularity == "DAY":
        return start + dt.timedelta(days=1)
    if granularity == "MONTH":
        return start.replace(year=start.year + start.month // 12, month=start.month % 12 + 1)
    return start.replace(year=start.year + 1)


def plan_upkeep(publisher: Any, job: str, datasets: list[str], request: UpkeepRequest,
                pending: list[PendingCommit]) -> list[UpkeepAction]:
    """The actions of `request` on each table of `datasets` (a table several datasets share once)."""
    actions: list[UpkeepAction] = []
    for uri in sorted({str(publisher.table_location(d)) for d in datasets}):
        table = t.open_table(uri, publisher.settings.storage_options)
        asked = [a for a, v in (("expire-snapshots", request.expire_snapshots_older_than),
                                ("remove-orphans", request.remove_orphans_older_than), ("retention", request.retention))
                 if v is not None]
        if table is None:
            actions += [UpkeepAction(a, uri, note="the table does not exist (yet)") for a in asked]
            continue
        if request.expire_snapshots_older_than is not None:
            blocker = _touching(uri, pending)
            if blocker is not None:
                actions.append(UpkeepAction("expire-snapshots", uri, refused=[
                    f"log expiry of table {uri}: the pending commit {blocker.record!r} touches the table, and its "
                    f"commit reads the log (recover it first: `gobblin-py recover JOB.yaml --dataset {blocker.record}`)"]))
            else:
                actions.append(_expire(table, uri, job, request, publisher.settings.storage_options))
        if request.remove_orphans_older_than is not None:
            actions.append(_vacuum(table, uri, request, pending))
        if request.retention is not None:
            actions.append(_retention(publisher, table, uri, job, request, pending))
    return actions
