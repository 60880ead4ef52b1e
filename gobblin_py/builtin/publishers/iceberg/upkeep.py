"""The `iceberg` publisher's part of `gobblin-py maintain` (`TableUpkeep`): expire snapshots, remove orphan files,
delete partitions past their retention, each planned here as commit steps the framework logs before running.

The one safety rule: nothing is expired, deleted or removed in a table a pending commit of the job touches (its table
commit, a compaction's replace, or any file it names under the table's location), and the refusal names that record.
So expiry can never make a pending commit unverifiable (`is_committed` looks for its snapshot first), and an orphan
sweep never deletes a file a pending commit is about to add. Metadata files (`*.metadata.json`, the version hint) are
never removed here: the catalog points at them."""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass, field
from typing import Any, ClassVar

from gobblin_py.api import CommitStep, PendingCommit, UpkeepAction, UpkeepRequest
from gobblin_py.errors import CommitError
from gobblin_py.fs import Location, filesystem_for
from gobblin_py.fs.delete_steps import FsDeleteCommitStep, inside
from gobblin_py.plugins import Kind, resolve

MAINTENANCE_ID = "gobblin-py.maintenance-id"
"""The snapshot summary key of a retention delete: its commit's id, which its `verify()` finds on a replay."""


def _local(uri: str) -> str:
    """A path as a table lists it, in the form a listing of its location gives: `file:/x` (Spark's and Hadoop's form),
    `file:///x` and `file://localhost/x` are all `/x` (`Location` reads each); another URL stays a URL."""
    return str(Location(uri))


def _table_of(step: CommitStep, publisher: Any) -> str | None:
    """The table a pending step commits to, when it is an Iceberg table commit or replace (found by its fields, so
    this layer needs nothing of the commit layer's classes)."""
    table = getattr(step, "table", None)
    if isinstance(table, str):
        return table
    kind, dataset, settings = getattr(step, "publisher", None), getattr(step, "dataset", None), getattr(step, "settings", None)
    if isinstance(kind, str) and isinstance(dataset, str) and isinstance(settings, dict):
        cls = resolve(Kind.PUBLISHER, kind)
        if isinstance(cls, type) and issubclass(cls, type(publisher)):
            return cls(cls.Settings.model_validate(settings)).table_name(dataset)
    return None


def blocking(name: str, root: str, publisher: Any, pending: list[PendingCommit]) -> PendingCommit | None:
    """The first pending commit touching table `name` (its commit, or a file under its location `root`)."""
    for p in pending:
        if any(_table_of(s, publisher) == name for s in p.steps) or any(path == root or inside(path, root) for path in p.paths):
            return p
    return None


def _reachable(table: Any, snapshots: list[Any], manifests: dict[str, dict[str, Any]] | None = None,
               needed: bool = False) -> dict[str, Any]:
    """Every file `snapshots` reference (manifest lists, manifests, data and delete files, those their manifests list
    as deleted too) → its size where known. `needed`: only the files reading them needs (no entry listed as deleted),
    each URI as the table lists it → its path. A manifest is read once however many snapshots list it (appends carry
    every earlier manifest into the next list); `manifests` keeps what each read manifest references, for another call
    on the same table with the same `needed`."""
    io, out = table.io, {}
    manifests = {} if manifests is None else manifests

    def item(uri: str, size: int | None) -> tuple[str, Any]:
        return (uri, _local(uri)) if needed else (_local(uri), size)

    for s in snapshots:
        out.update([item(s.manifest_list, None)])
        for manifest in s.manifests(io):
            if manifest.manifest_path not in manifests:
                files = dict([item(manifest.manifest_path, manifest.manifest_length)])
                for entry in manifest.fetch_manifest_entry(io, discard_deleted=needed):
                    files.update([item(entry.data_file.file_path, entry.data_file.file_size_in_bytes)])
                manifests[manifest.manifest_path] = files
            out.update(manifests[manifest.manifest_path])
    return out


def _refused_for_lost(action: UpkeepAction, name: str, needed: dict[str, str], what: str) -> bool:
    """Refuse `action` when a file reading the table needs (URI → path, `needed`) is not at its path: a URI read into
    the wrong path would make a file the table needs look unreferenced, so nothing is deleted while one is missing."""
    lost = [(uri, p) for uri, p in needed.items() if Location(p).is_local and not os.path.lexists(p)]
    if not lost:
        return False
    uri, p = lost[0]
    action.refused = [f"table {name} lists {len(lost)} file(s) that are not where their URI is read to be (first: {uri} "
                      f"→ {p}); {what} while a listed file cannot be found"]
    action.note = "refused: a file the table lists cannot be found"
    return True


def _existing(paths: dict[str, int | None], root: str) -> dict[str, int]:
    """Those of `paths` under `root` that are there, with their current size."""
    out = {}
    for path in sorted(paths):
        if inside(path, root):
            size = filesystem_for(path).size(Location(path))
            if size is not None:
                out[path] = size
    return out


@dataclass
class IcebergExpireCommitStep(CommitStep):
    """Expire `snapshot_ids` of `table` (one metadata commit); done when none of them is in the table's metadata."""

    type_name: ClassVar[str] = "iceberg_expire"
    publisher: str
    settings: dict[str, Any]
    table: str
    snapshot_ids: list[int] = field(default_factory=list)

    def _table(self) -> Any:
        from gobblin_py.builtin.publishers.iceberg.catalog import load_table

        kind = resolve(Kind.PUBLISHER, self.publisher)
        table = load_table(kind(kind.Settings.model_validate(self.settings)).catalog(), self.table)
        if table is None:
            raise CommitError(f"table {self.table} no longer exists: nothing to expire (abandon the maintenance record)")
        return table

    def _present(self, table: Any) -> list[int]:
        have = {s.snapshot_id for s in table.metadata.snapshots}  # one pass: snapshot_by_id is a linear search
        return [i for i in self.snapshot_ids if i in have]

    def verify(self) -> bool:
        return not self._present(self._table())

    def execute(self) -> None:
        table = self._table()
        present = self._present(table)
        if not present:
            return
        from pyiceberg.table.update import RemoveSnapshotsUpdate

        # pyiceberg's `expire_snapshots().by_ids()` deep-copies the whole table metadata twice for each id: 88 s for 490
        # of 500 snapshots, hours for 10,000. The same one update it would commit, staged once (ref heads were left out
        # when planning; a commit landing meanwhile fails this one on the catalog's check, and the step is retried)
        protected = {ref.snapshot_id for ref in table.metadata.refs.values()}
        with table.transaction() as tx:
            tx._apply((RemoveSnapshotsUpdate(snapshot_ids=[i for i in present if i not in protected]),))

    def describe(self) -> str:
        return f"expire {len(self.snapshot_ids)} snapshot(s) of table {self.table}"

    def paths(self) -> list[str]:
        return []


@dataclass
class IcebergRetentionCommitStep(CommitStep):
    """Delete the rows of `table` whose `column` is before `before` (a partition boundary of its time transform, so
    whole files go) in one snapshot tagged `commit_id`; done when that snapshot is in the table or no such row is."""

    type_name: ClassVar[str] = "iceberg_retention"
    publisher: str
    settings: dict[str, Any]
    table: str
    column: str
    before: str
    commit_id: str

    _table = IcebergExpireCommitStep._table

    def _filter(self) -> Any:
        from pyiceberg.expressions import LessThan

        return LessThan(self.column, self.before)

    def verify(self) -> bool:
        from gobblin_py.builtin.publishers.iceberg.snapshots import gobblin_snapshots

        table = self._table()
        if any(s.summary.get(MAINTENANCE_ID) == self.commit_id for s in gobblin_snapshots(table)):
            return True
        return not list(table.scan(row_filter=self._filter()).plan_files())

    def execute(self) -> None:
        from gobblin_py.builtin.publishers.iceberg.snapshots import COMMIT_ID

        self._table().delete(self._filter(), snapshot_properties={MAINTENANCE_ID: self.commit_id, COMMIT_ID: self.commit_id})

    def describe(self) -> str:
        return f"delete the rows of table {self.table} with {self.column} before {self.before} (one snapshot, {self.commit_id})"

    def paths(self) -> list[str]:
        return []


UPKEEP_STEPS = (IcebergExpireCommitStep, IcebergRetentionCommitStep)


def _expire(table: Any, name: str, root: str, request: UpkeepRequest, base: dict[str, Any]) -> UpkeepAction:
    action = UpkeepAction("expire-snapshots", name)
    assert request.expire_snapshots_older_than is not None
    cutoff_ms = (request.now - request.expire_snapshots_older_than) * 1000
    snapshots = sorted(table.metadata.snapshots, key=lambda s: s.timestamp_ms, reverse=True)
    protected = {ref.snapshot_id for ref in table.metadata.refs.values()}
    kept_newest = {s.snapshot_id for s in snapshots[:request.keep_last]}
    expired = [s for s in snapshots if s.timestamp_ms < cutoff_ms and s.snapshot_id not in protected | kept_newest]
    if not expired:
        action.note = f"no snapshot to expire ({len(snapshots)} snapshot(s); the newest {request.keep_last} and branch heads are kept)"
        return action
    kept = [s for s in snapshots if s not in expired]
    if _refused_for_lost(action, name, _reachable(table, kept, needed=True), "no snapshot is expired"):
        return action
    manifests: dict[str, dict[str, Any]] = {}
    still = _reachable(table, kept, manifests)
    only_expired = {p: n for p, n in _reachable(table, expired, manifests).items() if p not in still}
    files = _existing(only_expired, root)
    action.steps = [IcebergExpireCommitStep(**base, table=name, snapshot_ids=[s.snapshot_id for s in expired])]
    if files:
        action.steps.append(FsDeleteCommitStep(root=root, files=files, what=f"files only expired snapshots of table {name} referenced"))
    stamp = lambda ms: dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="seconds")  # noqa: E731
    action.deletions = [f"snapshot {s.snapshot_id} of {stamp(s.timestamp_ms)}" for s in expired] + \
                       [f"{p} ({n} bytes)" for p, n in files.items()]
    return action


def _nested_tables(listing: list[str], root: str) -> set[str]:
    """The locations of other tables inside `root`: each directory below it holding `metadata/*.metadata.json`."""
    out = set()
    for p in listing:
        if p.endswith(".metadata.json") and os.path.basename(os.path.dirname(p)) == "metadata":
            location = os.path.dirname(os.path.dirname(p))
            if inside(location, root):
                out.add(location)
    return out


def _orphans(table: Any, name: str, root: str, request: UpkeepRequest, pending: list[PendingCommit],
             errors_root: str) -> UpkeepAction:
    """Files under the table's location no snapshot lists, old enough; never one under the job's error files'
    directory nor under another table's location that lies inside this one (no snapshot of this table lists them
    either, yet they are not its orphans)."""
    action = UpkeepAction("remove-orphans", name)
    assert request.remove_orphans_older_than is not None
    if not Location(root).is_local:
        action.note = "not supported: orphan files are found by their modification time on a local or mounted location"
        return action
    if _refused_for_lost(action, name, _reachable(table, list(table.metadata.snapshots), needed=True),
                         "orphans are not looked for"):
        return action
    referenced = set(_reachable(table, list(table.metadata.snapshots)))
    referenced |= {_local(m.metadata_file) for m in table.metadata.metadata_log}
    referenced |= {_local(s.statistics_path) for s in table.metadata.statistics}
    named = {os.path.normpath(p) for c in pending for p in c.paths if Location(p).is_local}
    cutoff = request.now - request.remove_orphans_older_than
    listing = {str(path): size for path, size in filesystem_for(root).find(Location(root)).items()}
    others = {r: "the job's error files" for r in (errors_root,) if inside(r, root)}
    others.update({r: "another table's location" for r in sorted(_nested_tables(list(listing), root))})
    kept = dict.fromkeys(others, 0)
    files = {}
    for p, size in listing.items():
        if p in referenced or p.endswith(".metadata.json") or os.path.basename(p) == "version-hint.text" or p in named:
            continue
        under = next((r for r in others if inside(p, r)), None)
        if under is not None:
            kept[under] += 1
            continue
        if os.lstat(p).st_mtime < cutoff:
            files[p] = size
    action.refused = [f"{n} file(s) under {r} ({others[r]}): never orphans of table {name}" for r, n in kept.items() if n]
    if files:
        action.steps = [FsDeleteCommitStep(root=root, files=files, what=f"orphan files of table {name}")]
        action.deletions = [f"{p} ({n} bytes)" for p, n in sorted(files.items())]
    else:
        action.note = "no orphan file old enough"
    return action


def _retention(table: Any, name: str, job: str, request: UpkeepRequest, base: dict[str, Any]) -> UpkeepAction:
    from pyiceberg.expressions import LessThan
    from pyiceberg.transforms import DayTransform, HourTransform, MonthTransform, YearTransform

    action = UpkeepAction("retention", name)
    assert request.retention is not None
    schema, spec = table.schema(), table.spec()
    timed = [f for f in spec.fields if isinstance(f.transform, (HourTransform, DayTransform, MonthTransform, YearTransform))]
    if not timed:
        action.note = "not supported: the table is not partitioned by a time transform (hour, day, month, year)"
        return action
    part = timed[0]
    column = schema.find_field(part.source_id).name
    cutoff = dt.datetime.fromtimestamp(request.now - request.retention, dt.UTC).replace(tzinfo=None)
    if isinstance(part.transform, HourTransform):
        boundary = cutoff.replace(minute=0, second=0, microsecond=0)
    elif isinstance(part.transform, DayTransform):
        boundary = cutoff.replace(hour=0, minute=0, second=0, microsecond=0)
    elif isinstance(part.transform, MonthTransform):
        boundary = cutoff.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    else:
        boundary = cutoff.replace(month=1, day=1, hour=0, minute=0, second=0, microsecond=0)
    from pyiceberg.types import DateType, TimestamptzType

    kind = schema.find_field(part.source_id).field_type
    before = boundary.date().isoformat() if isinstance(kind, DateType) else \
        boundary.isoformat() + ("+00:00" if isinstance(kind, TimestamptzType) else "")
    doomed = [t.file.file_path for t in table.scan(row_filter=LessThan(column, before)).plan_files()]
    if not doomed:
        action.note = f"no partition before {before}"
        return action
    commit_id = f"{job}/maintain/retention/{name}/{before}"
    action.steps = [IcebergRetentionCommitStep(**base, table=name, column=column, before=before, commit_id=commit_id)]
    action.deletions = [f"rows with {column} before {before} in {len(doomed)} data file(s), one delete snapshot "
                        "(the files stay for time travel until their snapshots are expired): " + ", ".join(sorted(doomed))]
    return action


def plan_upkeep(publisher: Any, job: str, datasets: list[str], request: UpkeepRequest,
                pending: list[PendingCommit]) -> list[UpkeepAction]:
    """The actions of `request` on each table of `datasets`; a table a pending commit touches is refused whole, named."""
    from gobblin_py.builtin.publishers.iceberg.catalog import load_table

    catalog = publisher.catalog()
    kind = type(publisher)
    base = {"publisher": f"{kind.__module__}:{kind.__qualname__}", "settings": publisher.settings.model_dump(mode="json")}
    asked = [(a, getattr(request, k)) for a, k in (("expire-snapshots", "expire_snapshots_older_than"),
                                                   ("remove-orphans", "remove_orphans_older_than"), ("retention", "retention"))]
    actions = []
    for name in dict.fromkeys(publisher.table_name(d) for d in datasets):
        table = load_table(catalog, name)
        if table is None:
            continue
        root = _local(table.location())
        blocker = blocking(name, root, publisher, pending)
        for what, value in asked:
            if value is None:
                continue
            if blocker is not None:
                actions.append(UpkeepAction(what, name, refused=[
                    f"table {name}: the pending commit {blocker.record!r} needs it as it is (recover it first: "
                    f"`gobblin-py recover JOB.yaml --dataset {blocker.record}`)"]))
            elif what == "expire-snapshots":
                actions.append(_expire(table, name, root, request, base))
            elif what == "remove-orphans":
                actions.append(_orphans(table, name, root, request, pending, _local(str(publisher.errors_root()))))
            else:
                actions.append(_retention(table, name, job, request, base))
    return actions
