"""The commit step of a table partition's compaction (`gobblin-py compact` on a job publishing to Iceberg): ONE
snapshot that removes the partition's merged data files and adds the merged ones, so readers see either set, never
both nor neither (atomic by construction). Exactly once as the publisher's table commit is: the snapshot carries the
compaction's commit id, and `verify()` looks for it among the snapshots of the table's current state, so a replay
after a crash never replaces twice. The step removes exactly the files it merged; files added to the partition since
(late data) stay in the table and are merged by the next compaction."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from gobblin_py.api.commit_step import CommitStep
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
        from gobblin_py.builtin.publishers.iceberg.tables import load_table

        table = load_table(catalog, self.table)
        if table is None:
            raise CommitError(f"table {self.table} no longer exists; its compaction {self.commit_id} cannot be committed: "
                              f"abandon it (`gobblin-py recover JOB.yaml --dataset {self.record} --abandon`)")
        return table

    def verify(self) -> bool:
        from gobblin_py.builtin.publishers.iceberg.tables import has_commit

        return has_commit(self._table(self._publisher().catalog()), self.commit_id)

    def execute(self) -> None:
        from gobblin_py.builtin.publishers.iceberg import tables as t

        publisher = self._publisher()
        catalog = publisher.catalog()

        def attempt() -> None:
            table = self._table(catalog)
            if t.has_commit(table, self.commit_id):
                return  # a conflict's retry after the commit went through
            t.replace_files(table, self.table, self.replaced, self.added, {**self.properties, t.COMMIT_ID: self.commit_id},
                            self.keeps_data, self.record)

        t.with_retries(f"table {self.table}: compaction {self.commit_id}", publisher.settings.commit_attempts, attempt)

    def describe(self) -> str:
        return (f"replace {len(self.replaced)} data file(s) of table {self.table} with {len(self.added)} merged file(s) "
                f"in one snapshot ({self.commit_id})")

    def paths(self) -> list[str]:
        """The merged files it adds (and reads the statistics of); the replaced ones are only dropped from the table."""
        return list(self.added)
