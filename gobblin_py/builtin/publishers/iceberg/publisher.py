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
which publishing found byte-identical: those are not added again, only the rest (all of them there: a snapshot adding
no file, so the table still names the dataset's last commit), and an abandon of that commit leaves them (their
publish steps record that they found them there). The watermark step still comes after.

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

This module is the plugin the job file names; each part of the above lives in a module of its own: `settings.py` (the
keys), `catalog.py` (the catalog, its faults, conflict retries), `snapshots.py` (what a commit's snapshot records, and
finding it again), `identity.py` (the table is the one committed to), `schema.py` (the files against the table's
schema), `table_commit.py` and `upsert_commit.py` (the commit of each mode; `first_snapshot.py`, upsert's first snapshot added as written), `compaction.py` and `upkeep.py`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from gobblin_py.api import (
    CommitStep,
    Committer,
    DatasetCommit,
    GlobalCommitter,
    OutputFile,
    PendingCommit,
    PublishContext,
    TableCompaction,
    TableFile,
    TableReplace,
    TableUpkeep,
    TargetWatermarks,
    UpkeepAction,
    UpkeepRequest,
)
from gobblin_py.builtin.publishers.iceberg import identity
from gobblin_py.builtin.publishers.iceberg import snapshots as s
from gobblin_py.builtin.publishers.iceberg.catalog import (
    catalog_faults,
    catalog_label,
    load_catalog,
    load_table,
    table_uri,
)
from gobblin_py.builtin.publishers.iceberg.compaction import IcebergReplaceCommitStep
from gobblin_py.builtin.publishers.iceberg.schema import breaking_change, changed_identity, read_schemas
from gobblin_py.builtin.publishers.iceberg.settings import IcebergPublisherSettings, default_catalog
from gobblin_py.builtin.publishers.iceberg.table_commit import commit_append
from gobblin_py.builtin.publishers.iceberg.upkeep import UPKEEP_STEPS, plan_upkeep
from gobblin_py.builtin.publishers.iceberg.upsert_commit import cannot_write, commit_upsert, key_moved, upsert_committed
from gobblin_py.errors import CommitError
from gobblin_py.fs import Location
from gobblin_py.fs.publish_steps import publish_step

F = TypeVar("F", bound=Callable[..., Any])


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


class IcebergPublisher(Committer, GlobalCommitter, TableCompaction, TableUpkeep):
    """Appends each dataset's Parquet files of one run to an Iceberg table as one snapshot, or (`mode: upsert`) applies
    them as changes by key, copy-on-write; exactly-once with the commit store (the snapshot carries the commit id, so
    a replay finds it and changes nothing)."""

    Settings = IcebergPublisherSettings
    step_types = (IcebergReplaceCommitStep, *UPKEEP_STEPS)
    knows_outputs_by_name = True  # a re-read after `state reset` adds no file the table already references;
    # and an upsert without order_by refuses a key in two files of one commit, which packing would hide
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
        table = load_table(self.catalog(), name)
        if self.settings.mode == "upsert":
            return table is not None and upsert_committed(table, name, commit.commit_id)
        return table is not None and s.is_committed(table, name, commit.commit_id, paths)

    def unapplied_changes(self, markers: Mapping[str, tuple[str, str]]) -> list[tuple[str, str]]:
        """Upsert mode: a source's deletes not matched by `delete_when` (they would be upserted as rows of nulls, the
        deleted key kept) and truncates not matched by `truncate_when` (every snapshot starts with one)."""
        return self.settings.unapplied_changes(markers)

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
        table = load_table(catalog, name)
        identity.check_one_dataset(table, commit.dataset, name, self.settings.table)
        io = load_file_io(catalog.properties, paths[0])
        if self.settings.mode == "upsert":  # a null key or a tie refused before anything moves (read whole to commit)
            from gobblin_py.builtin.publishers.iceberg.upsert import check_changes

            check_changes(io, [(table_uri(f.path), f.rel_path) for f in commit.files if f.kind == "data"],
                          self.settings.upsert_spec(), f"table {name} (dataset {commit.dataset})")
        if table is None:  # the job's own abandoned creation goes on here; `pin` refuses it where the dataset pins a table
            identity.check_no_table_there(catalog, commit.dataset, name, self.table_dir(commit.dataset), job=commit.job)
            return
        output = read_schemas(io, paths)
        problem = key_moved(table, name, self.settings) or cannot_write(table, name, self.settings) or \
            changed_identity(table, output, name) or breaking_change(table.schema(), output, name)
        if problem is not None:
            raise CommitError(f"{problem}. Nothing of dataset {commit.dataset} was published or appended, and its "
                              "watermarks did not move: change the table so the records fit (Spark's ALTER TABLE), or the "
                              "job's schema so they fit the table, and run again")

    @_catalog_faults("checking the table is the one committed to")
    def pin(self, commit: DatasetCommit, last: dict[str, Any]) -> dict[str, Any]:
        """What to record of the table with this commit (its uuid; before it exists, this commit id), once it is
        checked to be the table the dataset's last commit went to (`identity.pin`)."""
        if not any(f.kind == "data" for f in commit.files):
            return {}  # nothing for the table: what the last commit pinned stays
        name = self.table_name(commit.dataset)
        return identity.pin(self.catalog(), name, self.table_dir(commit.dataset), commit, last)

    @_catalog_faults("committing to the table")
    def commit(self, commit: DatasetCommit) -> None:
        """One transaction: create the table if missing, evolve its schema by name, add the files as one snapshot
        (`table_commit.py`; upsert mode: apply them as changes by key, `upsert_commit.py`)."""
        paths = self._data_uris(commit)
        if not paths:
            return  # only error files: nothing for the table
        name = self.table_name(commit.dataset)
        if self.settings.mode == "upsert":
            commit_upsert(self.catalog(), self.settings, name, self.table_dir(commit.dataset), commit)
        else:
            commit_append(self.catalog(), self.settings, name, self.table_dir(commit.dataset), commit, paths)

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
            marks = s.latest_marks(table, name, job) if table is not None else {}
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
            table = load_table(catalog, name)
            if table is None:
                continue
            for d, (m, watermarks) in s.resumable_marks(table, name, job, names).items():
                at = dt.datetime.fromtimestamp(m.committed_at_ms / 1000, dt.UTC).isoformat(timespec="seconds")
                out[d] = TargetWatermarks(watermarks, f"table {m.table}, the job's snapshots of it up to {m.snapshot_id} "
                                                      f"of run {m.run_id} (commit {m.commit_id}, at {at})")
            if s.history_complete(table):
                continue
            for d in sorted(set(names) - set(out)):
                found = s.live_file_under(table, table_uri(self.table_dir(d) / "data" / d) + "/")
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
        return None if found is None else s.live_files(found)

    def changed_since_written(self, table: str) -> str | None:
        """A column the job's commits recorded (by field id) that another writer renamed or dropped since: merged
        files carry the job's names, as its runs' files do, so the table is refused as a run's commit would be. And a
        table kept by key: its upsert commits rewrite files through pyiceberg (with field ids, without the parquet
        writer's footer) and add a first snapshot's files as the tasks wrote them, and no merge of those is built."""
        from types import SimpleNamespace

        if self.settings.mode == "upsert":
            return ("it is kept by key (publisher.mode: upsert): compaction does not merge such a table's files (not "
                    "built yet); each upsert commit already rewrites the files holding a changed key")

        found = load_table(self.catalog(), table)
        recorded = s.recorded_field_ids(found) if found is not None else {}
        return changed_identity(found, SimpleNamespace(names=list(recorded)), table) if recorded else None

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
            properties={s.JOB: replace.job, s.RUN_ID: replace.run_id, s.COMPACTION: json.dumps(replace.counts, sort_keys=True)})
