"""The commit step of a table partition's compaction (`gobblin-py compact` on a job publishing to Iceberg): ONE
snapshot that removes the partition's merged data files and adds the merged ones, so readers see either set, never
both nor neither (atomic by construction). Exactly once as the publisher's table commit is: the snapshot carries the
compaction's commit id, and `verify()` looks for it among the snapshots of the table's current state, so a replay
after a crash never replaces twice. The step removes exactly the files it merged; files added to the partition since
(late data) stay in the table and are merged by the next compaction. The replace itself (`replace_files`) lives here too:
only this step makes such a snapshot."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from gobblin_py.api.commit_step import CommitStep
from gobblin_py.builtin.publishers.iceberg.catalog import load_table, with_retries
from gobblin_py.builtin.publishers.iceberg.snapshots import COMMIT_ID, has_commit, live_entries
from gobblin_py.errors import CommitError
from gobblin_py.plugins import Kind, resolve


@dataclass
class IcebergReplaceCommitStep(CommitStep):
    """Replace `replaced` (data file URIs of `table`) with `added` (published merged files) in one snapshot tagged
    `commit_id`; done when the table's current state holds that snapshot."""

    type_name: ClassVar[str] = "iceberg_replace"

    publisher: str                      # `module:Class` of the iceberg publisher, whose settings name the catalog
    settings: dict[str, Any]
    table: str
    commit_id: str
    replaced: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)
    """The snapshot summary's gobblin-py keys (`commit_id` among them)."""
    keeps_data: bool = True
    """The merged files hold exactly the replaced files' records (a `replace` snapshot); False after a dedup."""
    record: str = ""
    """The name of the commit record (`<table>/<partition>`), for the message that says to abandon it."""

    def _publisher(self) -> Any:
        kind = resolve(Kind.PUBLISHER, self.publisher)
        return kind(kind.Settings.model_validate(self.settings))

    def _table(self, catalog: Any) -> Any:
        table = load_table(catalog, self.table)
        if table is None:
            raise CommitError(f"table {self.table} no longer exists; its compaction {self.commit_id} cannot be committed: "
                              f"abandon it (`gobblin-py recover JOB.yaml --dataset {self.record} --abandon`)")
        return table

    def verify(self) -> bool:
        return has_commit(self._table(self._publisher().catalog()), self.commit_id)

    def execute(self) -> None:
        publisher = self._publisher()
        catalog = publisher.catalog()

        def attempt() -> None:
            table = self._table(catalog)
            if has_commit(table, self.commit_id):
                return  # a conflict's retry after the commit went through
            replace_files(table, self.table, self.replaced, self.added, {**self.properties, COMMIT_ID: self.commit_id},
                          self.keeps_data, self.record)

        with_retries(f"table {self.table}: compaction {self.commit_id}", publisher.settings.commit_attempts, attempt)

    def describe(self) -> str:
        return (f"replace {len(self.replaced)} data file(s) of table {self.table} with {len(self.added)} merged file(s) "
                f"in one snapshot ({self.commit_id})")

    def paths(self) -> list[str]:
        """The merged files it adds (and reads the statistics of); the replaced ones are only dropped from the table."""
        return list(self.added)


def replace_files(table: Any, name: str, replaced: list[str], added: list[str], properties: dict[str, str],
                  keeps_data: bool, record: str) -> None:
    """One snapshot of `table` that removes the data files `replaced` and adds the Parquet files `added`: readers see
    all of the first or all of the second. Its operation is `replace` when `keeps_data` (the same records, as
    Iceberg's own rewrite makes it; incremental readers skip it), else `overwrite` (a dedup removed records).
    CommitError, with nothing changed, when a file to remove is no longer in the table or one to add already is
    (`record` names the commit record to abandon then)."""
    from pyiceberg.exceptions import ValidationError, ValidationException
    from pyiceberg.io.pyarrow import parquet_file_to_data_file
    from pyiceberg.manifest import DataFileContent
    from pyiceberg.table.snapshots import Operation, Summary
    from pyiceberg.table.update.snapshot import _OverwriteFiles

    live = {e.data_file.file_path: e.data_file for e in live_entries(table) if e.data_file.content == DataFileContent.DATA}
    gone = [p for p in replaced if p not in live]
    if gone:
        raise CommitError(f"table {name}: {len(gone)} of the {len(replaced)} files this compaction merged are no longer "
                          f"in the table ({gone[0]} …): another writer removed or rewrote them. Nothing was replaced, and "
                          "the merged files are not in the table: abandon this commit (`gobblin-py recover JOB.yaml "
                          f"--dataset {record} --abandon`) and compact again")
    there = [p for p in added if p in live]
    if there:
        raise CommitError(f"table {name}: the merged file {there[0]} is already in the table, without this compaction's "
                          "snapshot (a rolled-back table?); nothing was replaced")

    class _ReplaceFiles(_OverwriteFiles):
        """pyiceberg's file overwrite, its snapshot recorded as a `replace` (pyiceberg 0.12 computes the summary's
        totals only for append/overwrite/delete, so they are computed as an overwrite's, the same numbers)."""

        def _summary(self, snapshot_properties: Any = None) -> Any:
            summary = super()._summary(snapshot_properties or {})
            return Summary(Operation.REPLACE, **summary.additional_properties)

    tx = table.transaction()
    producer_cls = _ReplaceFiles if keeps_data else _OverwriteFiles
    producer = producer_cls(operation=Operation.OVERWRITE, transaction=tx, io=table.io, snapshot_properties=properties)
    try:
        for path in replaced:
            producer.delete_data_file(live[path])
        for path in added:
            producer.append_data_file(parquet_file_to_data_file(table.io, table.metadata, path))
        producer.commit()
    except (ValueError, TypeError, ValidationError, ValidationException) as exc:
        raise CommitError(f"table {name}: cannot replace {len(replaced)} file(s) with {len(added)} merged file(s) "
                          f"({added[0] if added else 'none'} …): {exc}") from exc
    tx.commit_transaction()
