"""The `iceberg` publisher: each dataset's Parquet files of one run become ONE snapshot of an Apache Iceberg table,
appended through pyiceberg, exactly once.

How, in the commit sequence (`runtime/publish.py`): the per-file steps publish each data file with the `fs`
publisher's no-replace rename (copy-then-verify on object stores) to `<warehouse>/<namespace>/<name>/data/<rel_path>`,
beside the table's metadata (a table the publisher creates lives at `<warehouse>/<namespace>/<name>`, whatever the
catalog's own default, so it holds its own files); error files go to
`<errors_dir>/<rel_path>` (default `<warehouse>/_errors`), outside every table's directory, because an Iceberg
orphan-file cleanup deletes whatever the table does not reference, and they are never added to a table. Then the
GlobalCommitStep calls `commit`: in one transaction it creates the table when missing (its schema from the files'
Parquet footers, partitioned by `partition`: `day(ts)`/`hour(ts)`…), evolves its schema by union by name when the
output gained an optional field, and adds the published files (`add_files`: the files are referenced where they
are, nothing is rewritten) as one snapshot whose summary carries `gobblin-py.commit-id`, `.job`, `.run-id`,
`.dataset` and `.watermarks` (JSON). `is_committed` (the step's `verify()`) looks for that commit id among the
snapshots of the table's current state, as Flink's Iceberg committer looks for its max committed checkpoint id, so a
replay after a crash never appends twice; once snapshots were expired (the current one's ancestry no longer reaches
the table's first), by the commit's files instead: all of them live in the table means committed, some of them is a
CommitError naming the table. A range read again (`state reset`) writes files of the names the table already lists,
which publishing found byte-identical: those are not added again, only the rest, and an abandon of that commit leaves
them (their publish steps record that they found them there). The watermark step still comes after.

The table's identities are recorded and checked. The files carry no Iceberg field ids (`add_files` takes none), so
readers map their columns to the table's by name (its name mapping); each snapshot records the field id of every
column of its files (`gobblin-py.field-ids`), and before each commit the table's current schema is compared with
it and with the name mapping: a column another writer renamed or dropped since is refused naming the column, the
table and the fix, as adding files that still use the old name would make readers resolve the earlier files' values
to a new column (NULL under the new name, dropped values back). A dataset the state store holds nothing of (a new,
lost or moved work directory, the catalog kept) resumes from the watermarks the job's snapshots of it carry (each
holds its run's keys, and how many the dataset then held: `.watermark-keys`), which the run's summary says; when
expiry removed some of those, so that they no longer add up, the run refuses it naming the table. A commit that conflicts with a
concurrent one (several datasets into one table, a busy SQLite file) is retried on a reloaded table with backoff,
`commit_attempts` times; then CommitError, the sequence stays pending and the next run recovers it.

`mode: upsert` (with `key`, `order_by`, `delete_when`; `upsert.py`) keeps a table equal to its source by key
instead: the data files are not published but read from task output as changes, the last per key wins, and ONE
snapshot rewrites the table's files that hold a changed key (copy-on-write) and adds the new rows, in the same
transaction as creation and schema evolution, tagged and checked as above; see docs/publishers/iceberg.md.

Names: `table: db.{dataset}` gives a table per dataset; a '.' in a dataset's name (`public.orders` of a database
source) becomes '_' (`db.public_orders`) unless the catalog is REST, whose nested namespaces took the name as it is
(other catalogs refused it, so no existing table changes name); two datasets meeting in one table are refused.

Settings are written into every commit record, so they must hold no secret (the job loader refuses one): the catalog
takes its credentials from the environment, e.g. `PYICEBERG_CATALOG__<NAME>__URI` / `__CREDENTIAL` with
`catalog: {name: <name>, type: rest}`, and the warehouse's store from `job.filesystems` and its own environment
(AWS_ACCESS_KEY_ID …). The default catalog is pyiceberg's SQL catalog `gobblin_py` in the SQLite file
`<job.work_dir>/iceberg/catalog.db` (filled in by the job loader, shared by the jobs of that work directory; Iceberg's
JDBC catalog of that name reads it too), with the warehouse `./warehouse`; the loader also takes `partition` from `writer.partition` and refuses any
writer but `parquet`.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import string
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar

from pydantic import Field, StrictBool, StrictInt, field_validator, model_validator

from gobblin_py.api import (CommitStep, Committer, DatasetCommit, GlobalCommitter, OutputFile, PendingCommit, PublishContext, Settings, TableCompaction,
                            TableFile, TableReplace, TableUpkeep, TargetWatermarks, UpkeepAction, UpkeepRequest)
from gobblin_py.errors import CommitError
from gobblin_py.fs import Location
from gobblin_py.fs.paths import FsLocation
from gobblin_py.fs.publish_steps import publish_step
from gobblin_py.builtin.extras import require
from gobblin_py.builtin.publishers.iceberg import catalog as icat
from gobblin_py.builtin.publishers.iceberg import schema as isch
from gobblin_py.builtin.publishers.iceberg import snapshots as isnap
from gobblin_py.builtin.publishers.iceberg.catalog import catalog_faults, catalog_label, load_catalog, load_table, table_uri
from gobblin_py.builtin.publishers.iceberg.compaction import IcebergReplaceCommitStep
from gobblin_py.builtin.publishers.iceberg.snapshots import WATERMARKS, latest_marks, live_files
from gobblin_py.builtin.publishers.iceberg.upkeep import UPKEEP_STEPS, plan_upkeep

log = logging.getLogger(__name__)

DEFAULT_WAREHOUSE = "./warehouse"

F = TypeVar("F", bound=Callable[..., Any])


def _still_pinned(table: Any, name: str, commit: DatasetCommit) -> None:
    """At the table commit (a replay after a crash too): the table is still the one `pin` found when the sequence
    was built; a table dropped or re-created in between fails the step, the sequence pending, never a new table
    holding only this commit's rows."""
    pinned = commit.pinned.get("table_uuid")
    if pinned is None:
        return
    now = str(table.metadata.table_uuid) if table is not None else None
    if now == pinned and "follows" in commit.pinned:
        newest = _newest_commit(table, name, commit)
        if newest is not None and newest not in (commit.pinned["follows"], commit.commit_id):
            raise CommitError(_another_driver(name, commit, newest,
                                              f"when this commit was built it was {commit.pinned['follows']}", pending=True))
    if now != pinned:
        raise CommitError(f"table {name} is {'gone' if now is None else f'Iceberg table uuid {now}'}, not Iceberg table "
                          f"uuid {pinned}, which commit {commit.commit_id} was built for: dropped or created again since. "
                          f"Nothing was appended. Put the old table back and run again, or give the commit up with "
                          f"`gobblin-py recover JOB.yaml --dataset {commit.dataset} --abandon`, then `state reset` the dataset")


def _newest_commit(table: Any, name: str, commit: DatasetCommit) -> str | None:
    """The commit id of the job's newest snapshot of the dataset in the table (None: none, or all expired)."""
    mark = isnap.latest_marks(table, name, commit.job).get(commit.dataset)
    return mark.commit_id if mark is not None else None


def _another_driver(name: str, commit: DatasetCommit, newest: str, expected: str, pending: bool) -> str:
    """Why a commit is refused when the job's newest commit of its dataset in the table is another work directory's."""
    give_up = (f"give this commit up (`gobblin-py recover JOB.yaml --dataset {commit.dataset} --abandon`), then "
               if pending else "")
    return (f"table {name}: the newest commit of dataset {commit.dataset} by job {commit.job} is {newest}, and "
            f"{expected}: another driver of this job (another host or work directory, the same job name) commits to "
            f"the table, and each would add again what the other committed. Nothing of commit {commit.commit_id} was "
            f"appended and its watermarks did not move. Run the job from one work directory: {give_up}set the dataset's "
            f"watermarks to what the table holds (the `{WATERMARKS}` summaries of the job's snapshots carry them): "
            f"`gobblin-py state reset JOB.yaml --dataset {commit.dataset} --to KEY=VALUE … --yes`")


def _catalog_faults(doing: str) -> Callable[[F], F]:
    """A publisher method in which the catalog unreachable or refusing access is a CatalogUnavailableError naming it
    and `doing` (`catalog.catalog_faults`): retried after job.commit_retry_backoff, never an internal error."""
    def wrap(method: F) -> F:
        @functools.wraps(method)
        def guarded(self: IcebergPublisher, *args: Any, **kwargs: Any) -> Any:
            with catalog_faults(catalog_label(self.settings.catalog), doing):
                return method(self, *args, **kwargs)
        return guarded  # type: ignore[return-value]
    return wrap


class TablePartition(Settings):
    """The table's time partitioning: `{column: ts, granularity: DAY}` is `day(ts)`. The loader fills it from
    `writer.partition`, whose files hold one partition each (as `add_files` requires)."""

    column: str = Field(description="the timestamp column the table is partitioned by")
    granularity: Literal["HOUR", "DAY", "MONTH", "YEAR"] = Field(default="DAY", description="the transform: hour, day, month or year")


def default_catalog(work_dir: Any) -> dict[str, str]:
    """The embedded catalog: pyiceberg's SQL catalog in a SQLite file under the job's work directory."""
    return {"name": "gobblin_py", "type": "sql", "uri": f"sqlite:///{Location(work_dir) / 'iceberg' / 'catalog.db'}"}


class DeleteWhen(Settings):
    """Which changes delete their key's row (upsert mode): those whose `column` holds one of `equals`
    (`{column: op, equals: [d]}`, or a boolean column: `{column: _deleted, equals: [true]}`)."""

    column: str = Field(description="the column that marks a change as a delete (kept in the table, as every column)")
    equals: list[StrictBool | StrictInt | str] = Field(min_length=1, description="the values of `column` that mean the key's row is deleted")


class IcebergPublisherSettings(Settings):
    table: str = Field(description="`<namespace>.<name>`; `{dataset}` is replaced by the dataset's name (a '.' in it as '_' "
                                   "unless the catalog is REST: `db.{dataset}` names `db.public_orders` for `public.orders`)")
    warehouse: FsLocation = Field(default=DEFAULT_WAREHOUSE, validate_default=True,
                                  description="where data files are published and new tables are created (a path or a URL)")
    catalog: dict[str, str] = Field(default_factory=dict,
                                    description="pyiceberg catalog properties (load_catalog); unset: SQLite under the work directory")
    errors_dir: FsLocation | None = Field(default=None, description="where error files go (unset: <warehouse>/_errors)")
    partition: TablePartition | None = Field(default=None, description="filled from writer.partition by the loader: leave it out")
    commit_attempts: int = Field(default=8, ge=1, description="tries of a commit that conflicts with concurrent commits")
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
    def _installed(self) -> IcebergPublisherSettings:
        require("pyiceberg.catalog.sql", "the iceberg publisher needs pyiceberg", "tables")
        return self

    @model_validator(mode="after")
    def _upsert(self) -> IcebergPublisherSettings:
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

    def upsert_spec(self) -> Any:
        """The key, order and delete marker of upsert mode, for `upsert.py`."""
        from gobblin_py.builtin.publishers.iceberg.upsert import UpsertSpec

        d, t = self.delete_when, self.truncate_when
        return UpsertSpec(tuple(self.key), tuple(self.order_by), d.column if d else None, tuple(d.equals) if d else (),
                          t.column if t else None, tuple(t.equals) if t else ())

    @field_validator("table")
    @classmethod
    def _table(cls, value: str) -> str:
        fields = {f for _, f, _, _ in string.Formatter().parse(value) if f is not None}
        if fields - {"dataset"}:
            raise ValueError(f"only {{dataset}} may be substituted in the table name; got {value!r}")
        if not re.fullmatch(r"[A-Za-z0-9_{}-]+(\.[A-Za-z0-9_{}-]+)+", value):
            raise ValueError(f"expected <namespace>.<name> of letters, digits, '_' and '-' (with {{dataset}}); got {value!r}")
        return value


class IcebergPublisher(Committer, GlobalCommitter, TableCompaction, TableUpkeep):
    """Appends each dataset's Parquet files of one run to an Iceberg table as one snapshot, or (`mode: upsert`) applies
    them as changes by key, copy-on-write; exactly-once with the commit store (the snapshot carries the commit id, so
    a replay finds it and changes nothing)."""

    Settings = IcebergPublisherSettings
    step_types = (IcebergReplaceCommitStep, *UPKEEP_STEPS)
    """`gobblin-py compact` of a table partition commits through the first, `gobblin-py maintain` through the others."""

    @classmethod
    def complete_settings(cls, settings: IcebergPublisherSettings, context: PublishContext) -> tuple[IcebergPublisherSettings, list[tuple[str, str]]]:
        """The `parquet` writer's files only; `partition` from `writer.partition`, `catalog` (unset) as the embedded
        SQLite catalog under `job.work_dir`, which lives on the driver's disk: commits that may run on a cluster's
        executors need a shared catalog."""
        from gobblin_py.builtin.writers.parquet import ParquetWriter

        pub, wri = context.publisher_key, context.writer_key
        if not issubclass(context.writer, ParquetWriter):
            return settings, [(f"{pub}.class", f"the iceberg publisher appends Parquet files to a table, and {wri}.class is "
                                               f"{context.writer_name!r}: set {wri}: {{class: parquet}}")]
        update: dict[str, Any] = {}
        if not settings.catalog and context.work_store is not None:
            return settings, [(f"{pub}.catalog", f"the work directory is on an object store ({context.work_store}), shared "
                                                 "by drivers on many hosts, and the embedded SQLite catalog would be a "
                                                 "file on each host's disk, each with tables of its own: name a shared "
                                                 "catalog (SQL on PostgreSQL, REST, Hive, Glue)")]
        if not settings.catalog:
            update["catalog"] = default_catalog(context.work_dir)
        sqlite = (update.get("catalog") or settings.catalog).get("uri", "").startswith("sqlite:")
        if sqlite and not context.spark_master.startswith("local") and context.commit_on_executors_from != 0:
            return settings, [(f"{pub}.catalog", f"a SQLite catalog is a file on the driver's disk, and on the cluster "
                                                 f"{context.spark_master} commits may run on the executors: set "
                                                 "job.commit_on_executors_from: 0 (commits on the driver) or name a shared "
                                                 "catalog (REST, Hive, Glue, SQL on PostgreSQL)")]
        written = getattr(context.writer_settings, "partition", None)
        if settings.partition is None and written is not None:
            if written.granularity == "MINUTE":
                return settings, [(f"{wri}.partition.granularity", "an Iceberg table is partitioned by HOUR, DAY, MONTH or "
                                                                    f"YEAR, not MINUTE (the {pub} publisher partitions the "
                                                                    "table as the writer does)")]
            update["partition"] = {"column": written.column, "granularity": written.granularity}
        if settings.mode == "upsert" and (settings.partition or update.get("partition")):
            from gobblin_py.builtin.publishers.iceberg.upsert import PARTITIONED_NEEDS, partitioned_writes

            if not partitioned_writes():
                return settings, [(f"{pub}.mode", f"{PARTITIONED_NEEDS} (drop {wri}.partition)")]
        if not update:
            return settings, []
        return type(settings).model_validate({**settings.model_dump(), **update}), []

    # --- where files go ------------------------------------------------------------------------------------------

    def table_name(self, dataset: str) -> str:
        """`table` with `{dataset}` replaced; a dataset's '.' (a database table `public.orders`) becomes '_' in a
        catalog with one-level namespaces (all but REST): `db.public_orders`, a name every catalog and engine takes."""
        return self.settings.table.replace("{dataset}", dataset if self._nested_namespaces() else dataset.replace(".", "_"))

    def _nested_namespaces(self) -> bool:
        """Whether the catalog takes `db.public.orders` as a table in namespace `db.public` (REST). Exactly the
        catalogs where such a name was allowed before dotted datasets were mapped, so no existing job changes table."""
        catalog = self.settings.catalog or {}
        return catalog.get("type", "rest" if "uri" in catalog else "?") == "rest"

    def _check_no_table_there(self, catalog: Any, dataset: str, name: str, job: str | None = None,
                              pinned: Mapping[str, Any] | None = None) -> None:
        """The catalog has no table `name`, yet its location holds a table's metadata: the catalog was lost or replaced
        (a new SQLite file) or the table dropped without purge. Creating it anew there would leave every row committed
        before out of what readers see, so it is refused, naming the metadata to register (the `pinned` table's newest,
        where the dataset's last commit pinned one).

        With `job`, metadata that only `job`'s own creating transactions wrote (each file the first version of a table
        its property names a commit of `job` as creating, with no snapshot but that commit's) is let through: a run
        killed inside the commit creating the table, after its metadata file and before the catalog row, and that
        commit abandoned. No reader ever saw that table; `pin` still refuses it where the dataset's last commit went to
        a table (a lost catalog then)."""
        from pyiceberg.io import load_file_io

        from gobblin_py.fs import filesystem_for

        metadata = self.table_dir(dataset) / "metadata"
        fs = filesystem_for(metadata)
        found = sorted(str(p) for p in fs.listdir(metadata) if str(p).endswith(".metadata.json")) if fs.exists(metadata) else []
        if not found:
            return
        io = load_file_io(catalog.properties, table_uri(found[0]))
        read = {p: isnap.read_metadata(io, table_uri(p)) for p in found}
        creators = {isnap.creating_commit(m) if m is not None else None for m in read.values()}
        if job is not None and None not in creators and all(str(c).startswith(f"{job}/") for c in creators):
            log.warning("table %s is not in the catalog, and its location holds only metadata the commit(s) %s of this "
                        "job wrote while creating it, which never reached the catalog (a run killed inside the "
                        "creating commit, which was then abandoned): no reader saw that table. This commit creates "
                        "the table anew; those %d file(s) under %s are left, unused", name, ", ".join(sorted(map(str, creators))),
                        len(found), metadata)
            return
        pinned = pinned or {}

        def newest(p: str) -> tuple[bool, int, str]:  # the pinned table's first, then the latest written
            m = read[p]
            if m is None:
                return False, -1, p
            ours = str(m.table_uuid) == pinned.get("table_uuid") or m.properties.get(isnap.CREATED_BY) == pinned.get("created_by")
            return ours, m.last_updated_ms, p

        latest = max(found, key=newest)
        raise CommitError(f"table {name} is not in the catalog, but its location holds a table's metadata ({latest}, "
                          f"{len(found)} version(s)): the catalog was lost or replaced, or the table dropped without "
                          "purging it. Nothing of dataset " + dataset + " was published and its watermarks did not move. "
                          "Register the table again (pyiceberg: catalog.register_table("
                          f"{name!r}, {latest!r})) and run again, or, to start the table over, move {self.table_dir(dataset)} "
                          "away (and `gobblin-py state reset JOB.yaml --dataset " + dataset + "` to load it from the input's start)")

    def _check_one_dataset(self, table: Any, dataset: str, name: str) -> None:
        """Under `{dataset}` a table holds one dataset: two datasets whose names map to one table (`public.a_b` and
        `public_a.b` both to `db.public_a_b`) are refused naming both, never mixed in one table."""
        if table is None or "{dataset}" not in self.settings.table:
            return
        other = isnap.other_dataset(table, dataset)
        if other is not None:
            raise CommitError(f"table {name} holds dataset {other!r}, and publisher.table {self.settings.table!r} names it "
                              f"for dataset {dataset!r} too (a '.' in a dataset's name becomes '_' in a catalog with "
                              "one-level namespaces): nothing of it goes into the table, and its watermarks do not move. "
                              "Capture the two in jobs of their own with other publisher.table names (a commit already "
                              f"pending: `gobblin-py recover JOB.yaml --dataset {dataset} --abandon`)")

    def table_dir(self, dataset: str) -> Location:
        """`<warehouse>/<namespace>/<name>`: where a table this publisher creates lives (its metadata, and its data
        files under `data/`)."""
        namespace, _, name = self.table_name(dataset).rpartition(".")
        return Location(self.settings.warehouse) / namespace / name

    def data_location(self, dataset: str, f: OutputFile) -> Location:
        return self.table_dir(dataset) / "data" / f.rel_path

    def compacted_dir(self, dataset: str, partition: str) -> str:
        """Where a compaction publishes the merged files of a table partition (`ts_day=2026-01-01`): beside the
        table's other data files, under `data/<partition>/`."""
        return str(self.table_dir(dataset) / "data" / (partition or "_unpartitioned"))

    def errors_root(self) -> Location:
        return Location(self.settings.errors_dir) if self.settings.errors_dir else Location(self.settings.warehouse) / "_errors"

    def commit_steps(self, dataset: str, files: list[OutputFile]) -> list[CommitStep]:
        """Each file published (append mode); in upsert mode the error files only: the data files are changes the
        table commit reads from task output (kept while the sequence is pending) and applies, never table files."""
        upsert = self.settings.mode == "upsert"
        return [publish_step(f.path, self.errors_root() / f.rel_path if f.kind == "errors" else self.data_location(dataset, f),
                             f.size, f.checksum) for f in files if not (upsert and f.kind == "data")]

    def output_roots(self) -> list[str]:
        return [str(self.settings.warehouse), *([str(self.settings.errors_dir)] if self.settings.errors_dir else [])]

    # --- the table commit ----------------------------------------------------------------------------------------

    def catalog(self) -> Any:
        """The configured catalog, its warehouse and FileIO defaulting to this publisher's (the job's filesystems)."""
        from gobblin_py.builtin.publishers.iceberg.io import IO_IMPL
        props = dict(self.settings.catalog)
        if not props:
            raise CommitError("publisher.catalog is empty: run the job through its job file (the loader sets the "
                              "embedded SQLite catalog under job.work_dir) or name a catalog")
        uri = props.get("uri", "")
        with catalog_faults(catalog_label(props), "opening it"):
            if uri.startswith("sqlite:///"):
                Location(uri.removeprefix("sqlite:///")).parent.path.mkdir(parents=True, exist_ok=True)
            props.setdefault("warehouse", table_uri(self.settings.warehouse))
            props.setdefault("py-io-impl", IO_IMPL)
            return load_catalog(props)

    def _data_uris(self, commit: DatasetCommit) -> list[str]:
        return [table_uri(self.data_location(commit.dataset, f)) for f in commit.files if f.kind == "data"]

    @_catalog_faults("looking for a commit in its table")
    def is_committed(self, commit: DatasetCommit) -> bool:
        """The table's current state has the snapshot tagged with this commit id or, once that was expired, every
        file the commit adds (trivially: no data files)."""
        paths = self._data_uris(commit)
        if not paths:
            return True
        name = self.table_name(commit.dataset)
        table = icat.load_table(self.catalog(), name)
        if self.settings.mode == "upsert":
            return table is not None and _upsert_committed(table, name, commit.commit_id)
        return table is not None and isnap.is_committed(table, name, commit.commit_id, paths)

    def unapplied_changes(self, markers: Mapping[str, tuple[str, str]]) -> list[tuple[str, str]]:
        """Upsert mode: a source's deletes not matched by `delete_when` (they would be upserted as rows of nulls, the
        deleted key kept) and truncates not matched by `truncate_when` (every snapshot starts with one)."""
        if self.settings.mode != "upsert":
            return []
        found = []
        for kind, setting in (("delete", "delete_when"), ("truncate", "truncate_when")):
            if kind not in markers:
                continue
            column, value = markers[kind]
            given = getattr(self.settings, setting)
            if given is not None and given.column == column and value in given.equals:
                continue
            what = ("would be upserted as rows holding only the key, the deleted row kept" if kind == "delete" else
                    "would be upserted as rows without a key (every snapshot starts with one, so that a table "
                    "snapshotted again loses the rows the source deleted meanwhile)")
            found.append((setting, f"the source's {kind}s ({column} = {value}) {what}: set {setting}: "
                                   f"{{column: {column}, equals: [{value}]}}"
                                   + (", with order_by (e.g. [_lsn, _seq])" if kind == "truncate" and not self.settings.order_by else "")))
        return found

    @_catalog_faults("checking the table before the commit")
    def check(self, commit: DatasetCommit) -> None:
        """Before any file is published: the files' schema (read from their footers in task output) must fit the
        table if it exists; a breaking change fails the dataset here, naming the field, with nothing moved."""
        from pyiceberg.io import load_file_io

        paths = [table_uri(f.path) for f in commit.files if f.kind == "data"]
        if not paths:
            return
        name = self.table_name(commit.dataset)
        catalog = self.catalog()
        table = icat.load_table(catalog, name)
        self._check_one_dataset(table, commit.dataset, name)
        io = load_file_io(catalog.properties, paths[0])
        if self.settings.mode == "upsert":  # a null key or a tie refused before anything moves (read again to commit)
            from gobblin_py.builtin.publishers.iceberg.upsert import read_changes

            read_changes(io, [(table_uri(f.path), f.rel_path) for f in commit.files if f.kind == "data"],
                         self.settings.upsert_spec(), f"table {name} (dataset {commit.dataset})")
        if table is None:  # the job's own abandoned creation goes on here; `pin` refuses it where the dataset pins a table
            self._check_no_table_there(catalog, commit.dataset, name, job=commit.job)
            return
        output = isch.read_schemas(io, paths)
        problem = self._key_moved(table, name) or self._cannot_write(table, name) or \
            isch.changed_identity(table, output, name) or isch.breaking_change(table.schema(), output, name)
        if problem is not None:
            raise CommitError(f"{problem}. Nothing of dataset {commit.dataset} was published or appended, and its "
                              "watermarks did not move: change the table so the records fit (Spark's ALTER TABLE), or the "
                              "job's schema so they fit the table, and run again")

    @_catalog_faults("checking the table is the one committed to")
    def pin(self, commit: DatasetCommit, last: dict[str, Any]) -> dict[str, Any]:
        """The table's uuid (or, before the table exists, this commit id, which the creating transaction sets as a
        property), after checking that the table is the one the dataset's last commit went to: a table dropped, or
        dropped and created again, since would leave the rows committed before out of what readers see while the
        watermarks are past them, so it is refused, naming what changed."""
        if not any(f.kind == "data" for f in commit.files):
            return {}  # nothing for the table: what the last commit pinned stays
        name = self.table_name(commit.dataset)
        catalog = self.catalog()
        table = icat.load_table(catalog, name)
        uuid, created = last.get("table_uuid"), last.get("created_by")
        fix = (f"Nothing of dataset {commit.dataset} was published and its watermarks did not move. If the table as it "
               f"is now is meant, start the dataset over or set its watermarks to what the table holds: `gobblin-py state "
               f"reset JOB.yaml --dataset {commit.dataset} [--to KEY=VALUE …]` (which forgets the pinned table); else put "
               "the old table back")
        if table is None:
            if uuid is not None or created is not None:
                self._check_no_table_there(catalog, commit.dataset, name, pinned=last)  # a lost catalog: register it
                which = f"Iceberg table uuid {uuid}" if uuid is not None else f"created by commit {created}"
                raise CommitError(f"table {name} ({which}, which this job's last commit of dataset {commit.dataset} went to) "
                                  f"is gone: dropped or renamed by another writer, or publisher.table now names another table. {fix}")
            return {"created_by": commit.commit_id, "commit_id": commit.commit_id}
        now = str(table.metadata.table_uuid)
        ours = created is None or table.properties.get(isnap.CREATED_BY) == created or any(  # made by our commit, or by
            s.summary is not None and s.summary.get(isnap.COMMIT_ID) == created for s in table.snapshots())  # another dataset's
        if (uuid is not None and now != uuid) or (uuid is None and not ours):
            was = f"uuid {uuid}" if uuid is not None else f"the table commit {created} created"
            raise CommitError(f"table {name} is Iceberg table uuid {now}, not {was}, which this job's last commit of "
                              f"dataset {commit.dataset} went to: it was dropped and created again. {fix}")
        newest = _newest_commit(table, name, commit)
        mine = last.get("commit_id")
        if mine is not None and newest is not None and newest != mine:
            raise CommitError(_another_driver(name, commit, newest, f"this work directory's last commit of it is {mine}",
                                              pending=False))
        return {"table_uuid": now, "commit_id": commit.commit_id, "follows": newest}

    def _key_moved(self, table: Any, name: str) -> str | None:
        """Upsert mode: why the table's columns no longer hold the key the job's commits were applied by (a key column
        renamed or dropped, or dropped and added again, by another writer); None in append mode or when they do."""
        if self.settings.mode != "upsert":
            return None
        by_name = {f.name: f for f in table.schema().fields}
        by_id = {f.field_id: f for f in table.schema().fields}
        recorded = isnap.recorded_field_ids(table)
        for column in self.settings.key:
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

    def _cannot_write(self, table: Any, name: str) -> str | None:
        """Upsert mode: why pyiceberg cannot write the table's files here (a partitioned table, pyiceberg-core missing)."""
        from gobblin_py.builtin.publishers.iceberg.upsert import PARTITIONED_NEEDS, partitioned_writes

        if self.settings.mode != "upsert" or table.spec().is_unpartitioned() or partitioned_writes():
            return None
        return f"table {name} is partitioned ({table.spec()}): {PARTITIONED_NEEDS}".replace("\n", " ")

    @_catalog_faults("committing to the table")
    def commit(self, commit: DatasetCommit) -> None:
        """One transaction: create the table if missing, evolve its schema by name, add the files as one snapshot
        (upsert mode: apply them as changes by key, `_commit_upsert`)."""
        from pyiceberg.io import load_file_io

        paths = self._data_uris(commit)
        if not paths:
            return  # only error files: nothing for the table
        if self.settings.mode == "upsert":
            self._commit_upsert(commit)
            return
        name = self.table_name(commit.dataset)
        catalog = self.catalog()
        output = isch.read_schemas(load_file_io(catalog.properties, paths[0]), paths)
        properties = _summary(commit, name)

        def attempt() -> None:
            table = icat.load_table(catalog, name)
            if table is not None and isnap.is_committed(table, name, commit.commit_id, paths):
                return  # a conflict's retry after the commit went through
            _still_pinned(table, name, commit)
            self._check_one_dataset(table, commit.dataset, name)
            fresh = paths
            if table is not None:  # a re-read of a range the table holds (`state reset`) writes files of the same
                live = isnap.live_data_paths(table)  # names, which publishing found byte-identical: they are in already
                fresh = [p for p in paths if p not in live]
                if not fresh:
                    log.info("table %s: the %d file(s) of commit %s are in the table already (a range read again); "
                             "nothing to add", name, len(paths), commit.commit_id)
                    return
            if table is None:
                tx = self._create_transaction(catalog, name, output, commit)
            else:
                problem = isch.changed_identity(table, output, name) or isch.breaking_change(table.schema(), output, name)
                if problem is not None:
                    d = commit.dataset
                    raise CommitError(
                        f"{problem}. Nothing was appended: this run's files of dataset {d} are published under "
                        f"{self.table_dir(d) / 'data'} but not in the table. Either change the table so they fit (Spark's "
                        f"ALTER TABLE) and run `gobblin-py recover JOB.yaml --dataset {d}`, or give up on them with "
                        f"`recover JOB.yaml --dataset {d} --abandon`, delete those files and fix the schema: the next run "
                        "re-extracts their range")
                tx = _evolving_transaction(table, output)
            _add(tx, fresh, {**properties, isnap.FIELD_IDS: isnap.field_ids(tx.table_metadata.schema(), output.names)}, name)

        icat.with_retries(f"table {name}: commit {commit.commit_id}", self.settings.commit_attempts, attempt)

    def _create_transaction(self, catalog: Any, name: str, output: Any, commit: DatasetCommit) -> Any:
        """The transaction creating table `name` (and its namespace) with the files' schema and the partition spec,
        marked with the commit that created it (`pin`)."""
        namespace, _ = icat.split_identifier(name)
        icat.ensure_namespace(catalog, namespace)
        schema = isch.to_iceberg_schema(output)
        kwargs: dict[str, Any] = {}
        if self.settings.partition is not None:
            p = self.settings.partition
            kwargs["partition_spec"] = isch.partition_spec(schema, p.column, p.granularity, name)
        return catalog.create_table_transaction(name, schema=schema, location=table_uri(self.table_dir(commit.dataset)),
                                                properties={isnap.CREATED_BY: commit.commit_id}, **kwargs)

    def _commit_upsert(self, commit: DatasetCommit) -> None:
        """Upsert mode: the commit's files (in task output) are changes, reduced to the last per key; ONE snapshot
        rewrites the table's data files holding a changed key without it and adds the upserted rows, in the same
        transaction as table creation and schema evolution. Retried from a fresh read on a conflict."""
        from pyiceberg.io import load_file_io

        from gobblin_py.builtin.publishers.iceberg import upsert as u

        name, d = self.table_name(commit.dataset), commit.dataset
        catalog = self.catalog()
        sources = [(table_uri(f.path), f.rel_path) for f in commit.files if f.kind == "data"]
        io = load_file_io(catalog.properties, sources[0][0])
        output = isch.read_schemas(io, [uri for uri, _ in sources])
        spec = self.settings.upsert_spec()
        changes = u.read_changes(io, sources, spec, f"table {name} (dataset {d})")
        properties = _summary(commit, name)
        written: set[str] = set()
        committed: list[str] = []

        def attempt() -> None:
            table = icat.load_table(catalog, name)
            if table is not None and _upsert_committed(table, name, commit.commit_id):
                return  # a conflict's retry after the commit went through
            _still_pinned(table, name, commit)
            self._check_one_dataset(table, commit.dataset, name)
            if table is None:
                tx = self._create_transaction(catalog, name, output, commit)
                table_io = io
            else:
                problem = self._key_moved(table, name) or self._cannot_write(table, name) or \
                    isch.changed_identity(table, output, name) or isch.breaking_change(table.schema(), output, name)
                if problem is not None:
                    raise CommitError(
                        f"{problem}. Nothing of this run's changes of dataset {d} was applied (they wait in task "
                        f"output). Either change the table so they fit and run `gobblin-py recover JOB.yaml --dataset {d}`, "
                        f"or give up on them with `recover JOB.yaml --dataset {d} --abandon` and fix the job: the next "
                        "run re-extracts their range")
                tx = _evolving_transaction(table, output)
                table_io = table.io
            applied = u.rewrite(tx, table, changes, spec, table_io, commit.commit_id, name, written.add)
            u.commit_snapshot(tx, table_io, applied, {**properties, isnap.FIELD_IDS: isnap.field_ids(tx.table_metadata.schema(), output.names),
                                                      u.UPSERT: u.counts(changes, applied)}, name)
            committed.extend(f.file_path for f in applied.added)
            log.info("table %s: commit %s applied %d change(s) of %d key(s) (%d deleted), rewriting %d data file(s)",
                     name, commit.commit_id, changes.received, changes.keys.num_rows, changes.deleted, len(applied.deleted))

        try:
            icat.with_retries(f"table {name}: commit {commit.commit_id}", self.settings.commit_attempts, attempt)
        finally:  # what an attempt that lost a conflict wrote and the one that won did not: never in the table
            _remove_unreferenced(io, sorted(written - set(committed)) if committed else [], name)

    # --- what the table says ---------------------------------------------------------------------------------------

    @_catalog_faults("reading the watermarks its tables carry")
    def committed_watermarks(self, job: str, datasets: list[str]) -> dict[str, Any]:
        """dataset → the TableMark of its newest snapshot by `job` (datasets the table has none for are left out)."""
        catalog = self.catalog()
        out: dict[str, Any] = {}
        by_table: dict[str, list[str]] = {}
        for d in datasets:
            by_table.setdefault(self.table_name(d), []).append(d)
        for name, names in sorted(by_table.items()):
            table = load_table(catalog, name)
            marks = latest_marks(table, name, job) if table is not None else {}
            out.update({d: marks[d] for d in names if d in marks})
        return out

    @_catalog_faults("reading the watermarks its tables carry")
    def resume_watermarks(self, job: str, datasets: list[str]) -> dict[str, TargetWatermarks]:
        """dataset → the watermarks `job`'s snapshots of it in its table carry (merged, newest first), for datasets the
        state store lost. CommitError naming the table when they do not add up to the whole (see `resumable_marks`),
        or when snapshots were expired, none of the job's for the dataset is left and the table still lists files this
        publisher wrote for it: starting over would add them twice."""
        import datetime as dt

        catalog = self.catalog()
        out = {}
        by_table: dict[str, list[str]] = {}
        for d in datasets:
            by_table.setdefault(self.table_name(d), []).append(d)
        for name, names in sorted(by_table.items()):
            table = icat.load_table(catalog, name)
            if table is None:
                continue
            for d, (m, watermarks) in isnap.resumable_marks(table, name, job, names).items():
                at = dt.datetime.fromtimestamp(m.committed_at_ms / 1000, dt.timezone.utc).isoformat(timespec="seconds")
                out[d] = TargetWatermarks(watermarks, f"table {m.table}, the job's snapshots of it up to {m.snapshot_id} "
                                                      f"of run {m.run_id} (commit {m.commit_id}, at {at})")
            if isnap.history_complete(table):
                continue
            for d in sorted(set(names) - set(out)):
                found = isnap.live_file_under(table, table_uri(self.table_dir(d) / "data" / d) + "/")
                if found is not None:
                    raise CommitError(
                        f"table {name}: the state store holds nothing of dataset {d} (a new or lost work directory), and "
                        f"the table's snapshots of job {job} were expired, so its watermarks cannot be read, while the "
                        f"table still lists files the job published for it ({found} …): extracting from the start would "
                        f"add their records again. Restore the work directory, or set the dataset's watermarks to what "
                        f"the table holds (`gobblin-py state reset JOB.yaml --dataset {d} --to KEY=VALUE …`), then run again")
        return out

    # --- compaction (`gobblin-py compact`) -------------------------------------------------------------------------

    @_catalog_faults("listing a table's files")
    def table_files(self, table: str) -> list[TableFile] | None:
        """Every file the table's current snapshot lists, read from its manifests; None when there is no such table."""
        found = load_table(self.catalog(), table)
        return None if found is None else live_files(found)

    def changed_since_written(self, table: str) -> str | None:
        """A column the job's commits recorded (by field id) that another writer renamed or dropped since: merged
        files carry the job's names, as its runs' files do, so the table is refused as a run's commit would be. And a
        table kept by key: its files are pyiceberg's (with field ids, without the parquet writer's footer), which the
        writer's merge cannot rewrite as written."""
        from types import SimpleNamespace

        if self.settings.mode == "upsert":
            return ("it is kept by key (publisher.mode: upsert): its data files are written by pyiceberg, which the "
                    "merge cannot rewrite (not built yet); each upsert commit already rewrites the files holding a "
                    "changed key")

        found = icat.load_table(self.catalog(), table)
        recorded = isnap.recorded_field_ids(found) if found is not None else {}
        return isch.changed_identity(found, SimpleNamespace(names=list(recorded)), table) if recorded else None

    @_catalog_faults("planning its upkeep")
    def upkeep(self, job: str, datasets: list[str], request: UpkeepRequest, pending: list[PendingCommit]) -> list[UpkeepAction]:
        """Expiry, orphan files and retention of the tables `datasets` go to (`upkeep.py`); none in a table a pending
        commit touches."""
        return plan_upkeep(self, job, datasets, request, pending)

    def replace_step(self, replace: TableReplace) -> CommitStep:
        """One snapshot replacing the merged files with the published merged ones, tagged with the compaction's commit
        id; the step names this publisher by `module:Class` with its settings, to rebuild it on a replay."""
        return IcebergReplaceCommitStep(
            publisher=f"{type(self).__module__}:{type(self).__qualname__}", settings=self.settings.model_dump(mode="json"),
            table=replace.table, commit_id=replace.commit_id, replaced=list(replace.replaced),
            added=[table_uri(p) for p in replace.added], keeps_data=replace.keeps_data, record=replace.record,
            properties={isnap.JOB: replace.job, isnap.RUN_ID: replace.run_id, isnap.COMPACTION: json.dumps(replace.counts, sort_keys=True)})



def _evolving_transaction(table: Any, output: Any) -> Any:
    """A transaction on `table` that first gains the columns the commit's files add (in the commit's own snapshot)."""
    tx = table.transaction()
    if isch.needs_evolution(table.schema(), output):
        with tx.update_schema() as update:
            update.union_by_name(isch.evolvable(output, table.schema()))
    return tx


def _summary(commit: DatasetCommit, table: str) -> dict[str, str]:
    """What a commit's snapshot summary carries: its identity, the watermarks, and what the source keeps with it."""
    properties = {isnap.COMMIT_ID: commit.commit_id, isnap.JOB: commit.job, isnap.RUN_ID: commit.run_id, isnap.DATASET: commit.dataset,
                  isnap.WATERMARKS: json.dumps(commit.watermarks, sort_keys=True, default=str)}
    if commit.epoch is not None:
        properties[isnap.EPOCH] = str(commit.epoch)
    if commit.watermark_keys is not None:
        properties[isnap.WATERMARK_KEYS] = str(commit.watermark_keys)
    if commit.source_state:
        kept = json.dumps(commit.source_state, sort_keys=True, default=str)
        if len(kept) <= isnap.SOURCE_STATE_MAX:
            properties[isnap.SOURCE_STATE] = kept
        else:
            log.info("table %s: commit %s keeps %d bytes of source state, more than a snapshot summary holds here; it "
                     "is in the dataset's state only", table, commit.commit_id, len(kept))
    return properties

def _add(tx: Any, paths: list[str], properties: dict[str, str], table: str) -> None:
    """Add the files and commit; a file the table cannot take (duplicate, several partitions, a schema it cannot
    read) is a CommitError naming the table; a conflict goes up to be retried."""
    from pyiceberg.exceptions import ValidationError

    try:
        tx.add_files(paths, snapshot_properties=properties)
    except (ValueError, TypeError, ValidationError) as exc:
        raise CommitError(f"table {table}: cannot add {len(paths)} file(s) ({paths[0]} …): {exc}") from exc
    tx.commit_transaction()


def _upsert_committed(table: Any, name: str, commit_id: str) -> bool:
    """Whether the table's current state holds the upsert commit `commit_id`: its snapshot among the current one's
    ancestors or, once some were expired, a live data file named with the commit's uuid. A commit that wrote no file
    (deletes only) and whose snapshot was expired is applied again, which leaves the same rows (idempotent by key)."""
    from gobblin_py.builtin.publishers.iceberg.upsert import committed_by_files

    if isnap.has_commit(table, commit_id):
        return True
    if isnap.history_complete(table):
        return False
    found = committed_by_files(isnap.live_data_paths(table), commit_id)
    if found:
        log.info("table %s: upsert commit %s found by its files (its snapshot was expired)", name, commit_id)
    return found


def _remove_unreferenced(io: Any, paths: list[str], table: str) -> None:
    """Delete the data files an upsert attempt wrote that its table does not reference (a retried attempt wrote
    fewer); best effort: one left is an orphan no reader sees, named with the commit's uuid."""
    for path in paths:
        try:
            io.delete(path)
        except OSError as exc:
            log.warning("table %s: could not remove %s, which no snapshot references: %s", table, path, exc)
