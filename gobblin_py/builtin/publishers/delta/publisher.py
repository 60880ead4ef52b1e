"""The `delta` publisher: each dataset's Parquet files of one run become ONE commit of a Delta Lake table, through
delta-rs (the `deltalake` package), exactly once.

How, in the commit sequence (`runtime/publish.py`): the per-file steps publish each data file with the `fs`
publisher's no-replace rename (copy-then-verify on object stores) to `<table>/data/<rel_path>`, a name that is a pure
function of what the file holds, so a replay publishes the same names; error files go to `<errors_dir>/<rel_path>`
(default `_errors` beside the table, outside it: a vacuum deletes what the table does not reference). Then the
GlobalCommitStep calls `commit`: delta-rs's low-level API (`DeltaTable.create_write_transaction` with `AddAction`s)
adds the published files where they are, nothing rewritten, as one
commit whose `txn` action carries app id `gobblin-py/<job>/<dataset>` and the dataset's next transaction version,
and whose commitInfo carries the commit id, run, dataset, watermarks and the table version `pin` read (what the
next commit's RESTORE check reads the history from, so `maintain` keeps the log entries after it). delta-rs records a `txn` without skipping
a duplicate (delta-io/delta-rs#2580), so the step's `verify()` (`is_committed`) is the application's own check: the
table's `transaction_version(app_id)` ≥ this commit's version, AND a commit since the pinned read version whose
commitInfo carries this commit's id, mean the files are in, and a replay after a crash adds nothing twice. The version
alone is a counter any driver of the job moves: another host's commit of the same version fails the dataset closed,
named, where it used to be taken for ours (its rows were then added again). The watermark step still comes after.

The version is pinned when the sequence is built (`pin`, in the commit record, so the same on every replay): the
version the dataset's last commit pinned (kept in its state) + 1. What the commit assumes is checked there, and again
in `commit`: the table at `table_uri` is the one the last commit went to (its Delta `metadata().id` recorded with
each commit; a table deleted and re-created fails closed naming both ids; a missing table is created empty, with the
files' columns and the partition column, when the sequence is built, so its id is pinned before anything is published), its transaction version for the app id
is the one the last commit left (lower: the log was rewritten or the table replaced; higher: another job commits
under this job's name), no RESTORE was committed since the last commit (delta-rs's restore keeps `txn` versions, so
only the history tells), and the columns fit: new columns are added as nullable ones (one metadata commit before the
add, `alter.add_columns`), a column dropped or of another type fails the dataset naming it (upsert mode: a dropped
one stays, NULL where the merge writes; a commit whose changes begin with a truncate replaces the columns with its own).

`mode: upsert` (with `key`, `order_by`, `delete_when`, `truncate_when`; `upsert.py`) keeps the table equal to its
source by key: the data files are changes, read in task output (never published), reduced to the last per key and
applied as ONE delta-rs `merge` whose commit carries the same transaction and commitInfo, so a replay is known by its
commit id the same way. It pins the mode and the key with each commit, and refuses another, or a key column the table
lost. It does not partition the table.

Partitioning: the writer's `partition` (`{column: ts, granularity: DAY}`) becomes the table's string partition
column `ts_day` ("2026-01-01"), each file's value read from its time column (one per file, as the writer writes).
Settings are written into every commit record: credentials come from the environment (AWS_ACCESS_KEY_ID …), only
non-secret `storage_options` (an endpoint, a region) are settings.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from gobblin_py.api import (
    CommitStep,
    Committer,
    DatasetCommit,
    Delivery,
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
from gobblin_py.builtin.publishers.delta import table as t
from gobblin_py.builtin.publishers.delta import upsert as u
from gobblin_py.builtin.publishers.delta.compaction import (
    DeltaReplaceCommitStep,
    compaction_app_id,
    counts_json,
    table_state,
)
from gobblin_py.builtin.publishers.delta.settings import DeltaPublisherSettings
from gobblin_py.builtin.publishers.delta.upkeep import UPKEEP_STEPS, plan_upkeep
from gobblin_py.crashpoints import crash_point
from gobblin_py.errors import CommitError
from gobblin_py.fs import Location
from gobblin_py.fs.publish_steps import publish_step

log = logging.getLogger(__name__)
COLUMNS_POINT = "delta.columns_added"
"""The crash point between a commit's metadata commit adding the output's new columns and its data's commit."""


class DeltaPublisher(Committer, GlobalCommitter, TableCompaction, TableUpkeep):
    """Adds each dataset's Parquet files of one run to a Delta table as one commit tagged with a Delta transaction
    (app id, version); exactly-once with the commit store, as a replay finds the transaction version and adds nothing.
    `compact` merges its tables' partitions and `maintain` vacuums, checkpoints and applies retention, each exactly once too."""

    Settings = DeltaPublisherSettings
    step_types = (DeltaReplaceCommitStep, *UPKEEP_STEPS)
    guarantee = Delivery.EXACTLY_ONCE
    knows_outputs_by_name = True  # a re-read after `state reset` adds no file the table already holds

    @classmethod
    def complete_settings(cls, settings: DeltaPublisherSettings, context: PublishContext) -> tuple[DeltaPublisherSettings, list[tuple[str, str]]]:
        """The `parquet` writer's files only; `partition` from `writer.partition`."""
        from gobblin_py.builtin.writers.parquet import ParquetWriter

        pub, wri = context.publisher_key, context.writer_key
        if not issubclass(context.writer, ParquetWriter):
            return settings, [(f"{pub}.class", f"the delta publisher adds Parquet files to a table, and {wri}.class is "
                                               f"{context.writer_name!r}: set {wri}: {{class: parquet}}")]
        written = getattr(context.writer_settings, "partition", None)
        if settings.mode == "upsert" and (settings.partition is not None or written is not None):
            return settings, [(f"{pub}.mode", f"upsert mode merges into an unpartitioned Delta table (a partitioned one is "
                                              f"not built yet): drop {wri}.partition")]
        if settings.partition is not None or written is None:
            return settings, []
        if written.granularity == "MINUTE":
            return settings, [(f"{wri}.partition.granularity", f"the {pub} publisher partitions the table by HOUR, DAY, "
                                                                "MONTH or YEAR of the writer's column, not MINUTE")]
        partition = {"column": written.column, "granularity": written.granularity, "unit": written.unit}
        return type(settings).model_validate({**settings.model_dump(), "partition": partition}), []

    # --- where files go ------------------------------------------------------------------------------------------

    def table_location(self, dataset: str) -> Location:
        return Location(self.settings.table_uri.replace("{dataset}", dataset))

    def _root(self) -> Location:
        """The directory every table of this publisher lies under: the part of table_uri before `{dataset}`, or the
        table's parent."""
        uri = self.settings.table_uri
        return Location(uri.split("/{dataset}", 1)[0]) if "{dataset}" in uri else Location(uri).parent

    def data_location(self, dataset: str, f: OutputFile) -> Location:
        return self.table_location(dataset) / "data" / f.rel_path

    def errors_root(self) -> Location:
        return Location(self.settings.errors_dir) if self.settings.errors_dir else self._root() / "_errors"

    def commit_steps(self, dataset: str, files: list[OutputFile]) -> list[CommitStep]:
        """Each file published under the table (data) or the errors directory; the table commit is the global step.
        In upsert mode the error files only: the data files are changes the merge reads from task output (kept while
        the sequence is pending), never table files."""
        upsert = self.settings.mode == "upsert"
        return [publish_step(f.path, self.errors_root() / f.rel_path if f.kind == "errors" else self.data_location(dataset, f),
                             f.size, f.checksum) for f in files if not (upsert and f.kind == "data")]

    def output_roots(self) -> list[str]:
        return [str(self._root()), *([str(self.settings.errors_dir)] if self.settings.errors_dir else [])]

    # --- the table -----------------------------------------------------------------------------------------------

    def _open(self, dataset: str) -> Any:
        return t.open_table(str(self.table_location(dataset)), self.settings.storage_options)

    def _files(self, commit: DatasetCommit, published: bool) -> list[t.DataFile]:
        """The commit's data files, read where they are published (or, before, in task output)."""
        table = str(self.table_location(commit.dataset))
        published = published and self.settings.mode != "upsert"  # upsert mode's changes stay in task output
        return [t.read_file(str(self.data_location(commit.dataset, f)) if published else f.path, f"data/{f.rel_path}",
                            self.settings.partition, table) for f in commit.files if f.kind == "data"]

    def _fits(self, table: Any, output: Any, name: str, truncated: Callable[[], bool] = lambda: False) -> list[str] | None:
        """The columns the table gains; None where this commit replaces the table's columns with the output's (an
        upsert commit whose changes begin with a truncate, `truncated()`: no row of the old columns stays, as after a
        `state reset` of a retyped source table); else CommitError naming a column retyped (in append mode also one
        dropped), or another partitioning."""
        expected = [self.settings.partition.name] if self.settings.partition else []
        if list(table.metadata().partition_columns) != expected:
            raise CommitError(f"table {name} is partitioned by {list(table.metadata().partition_columns)} and this job's "
                              f"files by {expected} (writer.partition): nothing was added; make them agree")
        upsert = self.settings.mode == "upsert"
        problem, new = t.schema_change(table.schema(), output, name, keeps_missing=upsert)
        if problem is None:
            return new
        if upsert and truncated():
            return None
        fix = (" (or, an upsert table, snapshot it again: `gobblin-py state reset JOB.yaml --dataset …`, whose first "
               "commit replaces every row and takes the new columns)") if upsert else ""
        raise CommitError(f"{problem}{fix}. Nothing was added to the table and the watermarks did not move")

    def check(self, commit: DatasetCommit) -> None:
        """Before any file is published: the files' columns (read from task output) must fit the table if it exists."""
        if not any(f.kind == "data" for f in commit.files):
            return
        table = self._open(commit.dataset)
        name = str(self.table_location(commit.dataset))
        if self.settings.mode == "upsert":  # a null key, a tie or a key column missing, refused before anything moves
            u.check_changes(*self._change_files(commit))
        if table is not None:
            output = t.output_schema(self._files(commit, published=False), self.settings.partition, name)
            if self._fits(table, output, name, lambda: self._changes(commit).truncated) is not None:
                self._keyed(table, name)  # (a table whose columns the commit replaces takes the output's key)

    def unapplied_changes(self, markers: Any) -> list[tuple[str, str]]:
        """Upsert mode: a source's deletes and truncates the settings do not mark (`UpsertSettings`)."""
        return self.settings.unapplied_changes(markers)

    def _changes(self, commit: DatasetCommit) -> Any:
        """Upsert mode: the commit's changes (in task output) reduced to the last per key."""
        return u.read_changes(*self._change_files(commit))

    def _change_files(self, commit: DatasetCommit) -> tuple[list[tuple[str, str]], Any, str]:
        """Upsert mode: the commit's change files (task output, name for messages), the spec, and where for messages."""
        return ([(f.path, f.rel_path) for f in commit.files if f.kind == "data"], self.settings.upsert_spec(),
                f"table {self.table_location(commit.dataset)} (dataset {commit.dataset})")

    def _keyed(self, table: Any, name: str) -> None:
        """Upsert mode: CommitError unless every key column is a column of the table."""
        problem = u.key_missing(table.schema(), tuple(self.settings.key), name) if self.settings.mode == "upsert" else None
        if problem is not None:
            raise CommitError(f"{problem}. Nothing was applied and the watermarks did not move")

    def _mode(self) -> dict[str, Any]:
        """What a commit pins of how the table is kept: the mode and, in upsert mode, the key."""
        return {"mode": self.settings.mode, **({"key": list(self.settings.key)} if self.settings.mode == "upsert" else {})}

    def _same_mode(self, name: str, dataset: str, last: dict[str, Any]) -> None:
        """CommitError unless the dataset's last commit kept the table as this one does (append mode's commits before
        the mode was pinned count as append)."""
        before = {"mode": last.get("mode", "append"), **({"key": last["key"]} if "key" in last else {})}
        if before == self._mode():
            return
        raise CommitError(
            f"table {name}: this job's last commit of dataset {dataset} kept it as {before}, and the job now says "
            f"{self._mode()}: rows added by another key (or appended, several per key) would not be matched by this one, "
            "and the table would hold a key twice. Nothing was published and the watermarks did not move. Put "
            "publisher.mode and publisher.key back, or start the table over (a new table_uri, or delete it and "
            f"`gobblin-py state reset JOB.yaml --dataset {dataset}`)")

    def pin(self, commit: DatasetCommit, last: dict[str, Any]) -> dict[str, Any]:
        """The table's id and the transaction version this commit adds as (the last one's + 1), after checking that the
        table is the one the dataset's last commit went to and that nothing rolled it back since."""
        name, app = str(self.table_location(commit.dataset)), t.app_id(commit.job, commit.dataset)
        table = self._open(commit.dataset)
        if table is None and last.get("table_id") is None and any(f.kind == "data" for f in commit.files):
            table = self._create(commit, name)  # never where a pinned table is gone: that fails below, naming it
        table_id = table.metadata().id if table is not None else None
        txn = table.transaction_version(app) if table is not None else None
        read = table.version() if table is not None else -1
        if not last:
            if txn is not None:
                log.warning("table %s holds commits of %s up to transaction version %d, and the dataset's state pins none "
                            "(reset): this commit continues at %d", name, app, txn, txn + 1)
            return {"table_id": table_id, "version": (txn or 0) + 1, "read_version": read, **self._mode()}
        self._unchanged(name, app, last.get("table_id"), last["version"], table_id, txn)
        self._same_mode(name, commit.dataset, last)
        if table is not None and read > last.get("read_version", read):
            since = table.history(read - last["read_version"])
            self._history_complete(name, commit.dataset, app, since, last["read_version"], read)
            for entry in since:
                if entry.get("operation") == "RESTORE" and entry.get("version", -1) > last["read_version"]:
                    restored = entry.get("operationParameters", {}).get("version", "?")
                    raise CommitError(
                        f"table {name} was restored to version {restored} (its version {entry.get('version')}) after this "
                        f"job's commit of transaction version {last['version']} of {app}: the rows of the commits after "
                        f"version {restored} may be gone from it, while the dataset's watermarks are past them. Nothing was "
                        "published and the watermarks did not move. Set the dataset's watermarks to what the table holds "
                        f"(the commitInfo of its last commit of {app} carries them): `gobblin-py state reset JOB.yaml "
                        f"--dataset {commit.dataset} --to KEY=VALUE …`, which also forgets the pinned table, then run again")
        return {"table_id": table_id, "version": last["version"] + 1, "read_version": read, **self._mode()}

    @staticmethod
    def _history_complete(name: str, dataset: str, app: str, since: list[dict[str, Any]], low: int, high: int) -> None:
        """CommitError unless `since` (the table's history) holds every version in (low, high]: the RESTORE check
        cannot see a restore whose log entry is gone, and would take the restored table for the one the watermarks
        describe. delta-rs's own log cleanup (`delta.enableExpiredLogCleanup`, after any writer's commit) deletes entries
        older than `delta.logRetentionDuration` below the latest checkpoint, whatever this job still reads."""
        missing = sorted(set(range(low + 1, high + 1)) - {int(h["version"]) for h in since if "version" in h})
        if not missing:
            return
        raise CommitError(
            f"table {name}: its log entries of version(s) {missing[0]}" + (f" to {missing[-1]}" if len(missing) > 1 else "")
            + f" are gone (expired: delta-rs's log cleanup after a checkpoint, delta.logRetentionDuration), and this "
            f"job's last commit of {app} read version {low}: whether the table was restored since cannot be checked, "
            "and a RESTORE would make this commit build on rows the watermarks are past. Nothing was published and the "
            f"watermarks did not move. Check the table holds every commit of {app} (its commitInfo carries the "
            f"watermarks); then `gobblin-py state reset JOB.yaml --dataset {dataset} --to KEY=VALUE …` (its watermarks, "
            "or what the table holds), which also forgets the pinned table, and run again")

    def _create(self, commit: DatasetCommit, name: str) -> Any:
        """The table created empty (the files' columns, read in task output, and the partition column), so that its id
        is known and pinned before anything is published; a table another commit created meanwhile is kept."""
        from deltalake import CommitProperties, DeltaTable, Schema

        output = t.output_schema(self._files(commit, published=False), self.settings.partition, name)
        DeltaTable.create(name, Schema.from_arrow(output), mode="ignore", storage_options=self.settings.storage_options or None,
                          partition_by=[self.settings.partition.name] if self.settings.partition else None,
                          commit_properties=CommitProperties(custom_metadata={t.COMMIT_ID: commit.commit_id, t.JOB: commit.job,
                                                                              "gobblin-py.operation": "create table"}))
        log.info("table %s: created for commit %s", name, commit.commit_id)
        return self._open(commit.dataset)

    @staticmethod
    def _unchanged(name: str, app: str, before: str | None, done: int, table_id: str | None, txn: int | None) -> None:
        """CommitError unless the table is Delta table `before` (when known) and its transaction version for `app` is
        `done`, the version of the dataset's last commit."""
        fix = ("Nothing was published and the watermarks did not move. If the new table is meant, start it over: "
               "`gobblin-py state reset JOB.yaml --dataset …` (to the start, or to what it holds); else put the old table back")
        if before is not None and table_id is None:
            raise CommitError(f"table {name} (Delta table id {before}, which this job's last commit went to) is gone: deleted, "
                              f"moved, or publisher.table_uri now names another place. {fix}")
        if before is not None and table_id != before:
            raise CommitError(f"table {name} is Delta table id {table_id}, not {before} which this job's last commit went "
                              f"to: it was deleted and created again. {fix}")
        if (txn or 0) < done:
            raise CommitError(f"table {name}: the transaction version of {app} is {txn}, lower than {done} which this job "
                              f"committed: the table's log was replaced or rolled back (not by RESTORE, which keeps it). {fix}")
        if (txn or 0) > done:
            raise CommitError(f"table {name}: the transaction version of {app} is {txn}, higher than {done} which this job "
                              "committed last: another job (another work directory, the same job name) commits to it, and "
                              "each would skip the other's commits. Give each job its own name or table")

    def is_committed(self, commit: DatasetCommit) -> bool:
        """This commit is in the table, known by its own id (trivially: no data files). The app's transaction version
        reaching this commit's says only that SOME commit got there: another driver's (another host, the same job
        name) would be taken for ours, and its rows added again after the watermarks moved past them."""
        if not any(f.kind == "data" for f in commit.files):
            return True
        table = self._open(commit.dataset)
        if table is None:
            return False
        return self._reached(table, commit)

    def _reached(self, table: Any, commit: DatasetCommit) -> bool:
        """Whether the app's transaction version reached this commit's: False when not; True when the commit that got
        it there is this one (its commit id in the commitInfo); a CommitError naming the other commit otherwise."""
        app, version = t.app_id(commit.job, commit.dataset), _version(commit)
        if (table.transaction_version(app) or 0) < version:
            return False
        read = commit.pinned.get("read_version")
        since = table.history(max(1, table.version() - read) if isinstance(read, int) else None)
        if any(h.get(t.COMMIT_ID) == commit.commit_id for h in since):
            return True
        others = [f"{h.get(t.COMMIT_ID)} (table version {h.get('version', '?')})" for h in reversed(since)
                  if h.get(t.JOB) == commit.job and h.get(t.DATASET) == commit.dataset and t.COMMIT_ID in h
                  and "gobblin-py.operation" not in h]
        name = str(self.table_location(commit.dataset))
        raise CommitError(
            f"table {name}: transaction version {version} of {app}, which commit {commit.commit_id} pinned, was committed "
            + (f"by another commit, {', '.join(others)}" if others else
               "by a commit this one cannot find in the table's history since it was pinned (the log expired?)")
            + ": another driver of this job (another host or work directory, the same job name) committed to the table "
            "while this commit was pending. Nothing of this commit was added and its watermarks did not move. Run the job "
            f"from one work directory: abandon this commit (`gobblin-py recover JOB.yaml --dataset {commit.dataset} "
            "--abandon`) and set the dataset's watermarks to what the table holds (its last commit's commitInfo carries "
            f"them: `gobblin-py state reset JOB.yaml --dataset {commit.dataset} --to KEY=VALUE …`)")

    def commit(self, commit: DatasetCommit) -> None:
        """One Delta commit adding the published files with the transaction (app id, version); a table created when
        missing, new columns added first. Retried on a conflicting concurrent commit."""
        from deltalake import CommitProperties, Transaction
        from deltalake.exceptions import CommitFailedError, DeltaError

        d, p = commit.dataset, self.settings.partition
        name, app, version = str(self.table_location(d)), t.app_id(commit.job, d), _version(commit)
        files = self._files(commit, published=True)
        if not files:
            return
        changes = self._changes(commit) if self.settings.mode == "upsert" else None
        output = t.output_schema(files, p, name)
        partition_by = [p.name] if p is not None else []
        metadata = {t.COMMIT_ID: commit.commit_id, t.JOB: commit.job, t.RUN_ID: commit.run_id, t.DATASET: d,
                    t.WATERMARKS: json.dumps(commit.watermarks, sort_keys=True, default=str),
                    **({t.READ_VERSION: commit.pinned["read_version"]} if "read_version" in commit.pinned else {}),
                    **({t.EPOCH: str(commit.epoch)} if commit.epoch is not None else {})}
        for attempt in range(1, self.settings.commit_attempts + 1):
            table = self._open(d)
            txn = table.transaction_version(app) if table is not None else None
            if table is not None and self._reached(table, commit):
                return  # a conflict's retry after the commit went through (ours: another driver's raises)
            self._unchanged(name, app, commit.pinned.get("table_id"), version - 1,
                            table.metadata().id if table is not None else None, txn)
            if table is None:  # pinned before it existed: a record not written by `pin`
                raise CommitError(f"table {name} does not exist, and commit {commit.commit_id} pinned none")
            upsert = {u.UPSERT: u.counts(changes, tuple(self.settings.key))} if changes is not None else {}
            props = CommitProperties(custom_metadata={**metadata, **upsert, t.TABLE_ID: table.metadata().id},
                                     app_transactions=[Transaction(app, version)])
            try:
                new = self._fits(table, output, name, lambda: changes is not None and changes.truncated)
                if new is None and changes is not None:
                    u.replace(table, changes, output, props)
                    log.info("table %s: commit %s replaced the table after a truncate with %d row(s) of the run's "
                             "columns as transaction version %d of %s", name, commit.commit_id,
                             changes.upserts.num_rows, version, app)
                    return
                if new:
                    self._add_columns(table, output, new, metadata)
                    crash_point(COLUMNS_POINT)  # the columns' commit done, the data's not: a replay finds none new
                    table = self._open(d)
                if changes is not None:
                    self._keyed(table, name)
                    metrics = u.merge(table, changes, tuple(self.settings.key), props)
                    log.info("table %s: commit %s merged %d change(s) of %d key(s) (%d deleted%s) as transaction version "
                             "%d of %s: %s", name, commit.commit_id, changes.received, changes.keys.num_rows,
                             changes.deleted, ", after a truncate" if changes.truncated else "", version, app, metrics)
                    return
                table.create_write_transaction(t.add_actions(files, p, _now_ms()), "append", output, partition_by,
                                               commit_properties=props)
                log.info("table %s: commit %s added %d file(s) as transaction version %d of %s", name, commit.commit_id,
                         len(files), version, app)
                return
            except (CommitFailedError, DeltaError) as exc:
                if attempt == self.settings.commit_attempts:
                    raise CommitError(f"table {name}: commit {commit.commit_id} failed: {exc}") from exc
                log.info("table %s: commit %s conflicted (%s); attempt %d of %d", name, commit.commit_id, exc, attempt + 1,
                         self.settings.commit_attempts)
                time.sleep(min(2.0, 0.1 * 2 ** attempt))

    @staticmethod
    def _add_columns(table: Any, output: Any, new: list[str], metadata: dict[str, Any]) -> None:
        """The new columns added to the table (nullable), in a metadata commit of their own before the add."""
        import pyarrow as pa
        from deltalake import CommitProperties, Schema

        fields = Schema.from_arrow(pa.schema([output.field(n) for n in new])).fields
        table.alter.add_columns(fields, commit_properties=CommitProperties(custom_metadata={**metadata, "gobblin-py.operation": "add columns"}))
        log.info("table %s: added column(s) %s for commit %s", table.table_uri, ", ".join(new), metadata[t.COMMIT_ID])

    def resume_watermarks(self, job: str, datasets: list[str]) -> dict[str, TargetWatermarks]:
        """A dataset the state store holds nothing of whose table holds this job's commits is refused, naming the
        watermarks of its last one: extracting from the start would add its records again."""
        for d in datasets:
            table = self._open(d)
            txn = table.transaction_version(t.app_id(job, d)) if table is not None else None
            if txn is None:
                continue
            last = next((h for h in table.history() if h.get(t.DATASET) == d and h.get(t.JOB) == job and t.WATERMARKS in h), {})
            raise CommitError(
                f"table {self.table_location(d)}: the state store holds nothing of dataset {d} (a new or lost work "
                f"directory), and the table holds this job's commits of it up to transaction version {txn}: extracting "
                f"from the start would add their records again. Restore the work directory, or set the dataset's "
                f"watermarks to what the table holds (its last commit carries {last.get(t.WATERMARKS, '?')}): "
                f"`gobblin-py state reset JOB.yaml --dataset {d} --to KEY=VALUE …`, then run again")
        return {}

    # --- compaction and upkeep -----------------------------------------------------------------------------------

    def table_name(self, dataset: str) -> str:
        """The table's location relative to the publisher's root (`clicks` for `lake/{dataset}`): a relative name,
        as compaction records and state are named by it."""
        return str(self.table_location(dataset))[len(str(self._root())):].strip("/")

    def _table_uri(self, name: str) -> str:
        return str(self._root() / name)

    def table_files(self, table: str) -> list[TableFile] | None:
        """Every file the table's current version lists (from its log, no file opened); None when there is no table."""
        uri = self._table_uri(table)
        found = t.open_table(uri, self.settings.storage_options)
        if found is None:
            return None
        columns = list(found.metadata().partition_columns)
        expected = [self.settings.partition.name] if self.settings.partition else []
        root = uri.rstrip("/") + "/"  # the log's paths are relative to it
        return [TableFile(path=root + f["path"], size=f["size"], records=f["records"] or 0,
                          partition="/".join(f"{c}={f['partition'][c]}" for c in columns), added_ms=f["added_ms"],
                          data=not f["deletion_vector"], current_spec=columns == expected,
                          compacted=f["path"].rsplit("/", 1)[-1].startswith("compacted-"))
                for f in table_state(found, columns)]

    def changed_since_written(self, table: str) -> str | None:
        """A table kept by key is left alone: its files are delta-rs's (the merge writes them, without the parquet
        writer's footer), which the writer's merge cannot rewrite as written."""
        if self.settings.mode == "upsert":
            return ("it is kept by key (publisher.mode: upsert): its data files are written by delta-rs's merge, which "
                    "the compaction's merge cannot rewrite (not built yet); each upsert commit already rewrites the "
                    "files holding a changed key")
        return None

    def compacted_dir(self, dataset: str, partition: str) -> str:
        """Beside the table's other data files: `<table>/data/<partition>/` (`ts_day=2026-01-01`)."""
        return str(self.table_location(dataset) / "data" / (partition or "_unpartitioned"))

    def replace_step(self, replace: TableReplace) -> CommitStep:
        """One Delta commit replacing the merged files with the published merged ones, tagged with a transaction of
        the partition's compaction app id at the next version (read now, pinned in the record)."""
        uri = self._table_uri(replace.table)
        table = t.open_table(uri, self.settings.storage_options)
        if table is None:
            raise CommitError(f"table {uri} no longer exists: partition {replace.record} is not compacted")
        partition = str(replace.counts.get("partition", ""))
        app = compaction_app_id(replace.job, partition)
        values = dict(part.split("=", 1) for part in partition.split("/") if part)
        return DeltaReplaceCommitStep(
            table=uri, app_id=app, version=(table.transaction_version(app) or 0) + 1, commit_id=replace.commit_id,
            partition=values, replaced=[t.relative(uri, p) for p in replace.replaced],
            added=[str(p) for p in replace.added], keeps_data=replace.keeps_data, record=replace.record,
            metadata={t.JOB: replace.job, t.RUN_ID: replace.run_id, "gobblin-py.operation": "compaction",
                      "gobblin-py.compaction": counts_json(replace.counts)},
            storage_options=dict(self.settings.storage_options))

    def upkeep(self, job: str, datasets: list[str], request: UpkeepRequest, pending: list[PendingCommit]) -> list[UpkeepAction]:
        """Vacuum, checkpoint and log expiry, and retention of the tables `datasets` go to (`upkeep.py`); nothing a
        pending commit names or needs."""
        return plan_upkeep(self, job, datasets, request, pending)


def _version(commit: DatasetCommit) -> int:
    version = commit.pinned.get("version")
    if not isinstance(version, int):
        raise CommitError(f"commit {commit.commit_id}: its record pins no Delta transaction version: it was not written "
                          "by this publisher's sequence; abandon it (`gobblin-py recover JOB.yaml --abandon`)")
    return version


def _now_ms() -> int:
    return int(time.time() * 1000)
