"""The commit step of a Delta table partition's compaction (`gobblin-py compact` on a job publishing to Delta): ONE
Delta commit that removes the partition's merged files and adds the merged ones, so readers see either set, never
both nor neither.

Why our merge and not delta-rs's `optimize.compact`: optimize writes its files and commits in one call, so the commit
log could only hold "optimize this partition", and the files it writes are named by delta-rs, not by what they hold;
a kill between its write and its commit leaves unnamed orphans. Through `TableCompaction` the partition is merged by
the writer's own merge (dedup included) into files named by the compaction's identity, published by the no-replace
steps as any run's files, and only then committed, as the Iceberg compaction is: the report's counts are the
Compactor's, and a replay publishes the same names and commits once. Exactly once because the commit carries a Delta
transaction (app id `gobblin-py.compact/<job>/<partition>`, its version pinned in the record when the sequence is
built): `verify()` is "the table's transaction version of that app id reaches the pinned one". Files added to the
partition since (late data) stay and are merged by the next compaction; a merged file gone from the table since
(another writer removed it) stops the commit, naming it."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from gobblin_py.api.commit_step import CommitStep
from gobblin_py.builtin.publishers.delta import table as t
from gobblin_py.errors import CommitError


def compaction_app_id(job: str, partition: str) -> str:
    """The Delta transaction's application id of the compactions of one partition of one job's table."""
    return f"gobblin-py.compact/{job}/{partition or '-'}"


@dataclass
class DeltaReplaceCommitStep(CommitStep):
    """Replace `replaced` (paths relative to `table`) with `added` (published merged files) in one Delta commit tagged
    (app_id, version); done when the table's transaction version of `app_id` reaches `version`."""

    type_name: ClassVar[str] = "delta_replace"
    table: str
    app_id: str
    version: int
    commit_id: str
    partition: dict[str, str] = field(default_factory=dict)
    replaced: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    keeps_data: bool = True
    """The merged files hold exactly the replaced files' records (data_change false, as Delta's OPTIMIZE); False after
    a dedup."""
    metadata: dict[str, str] = field(default_factory=dict)
    record: str = ""
    storage_options: dict[str, str] = field(default_factory=dict)

    def _open(self) -> Any:
        table = t.open_table(self.table, self.storage_options)
        if table is None:
            raise CommitError(f"table {self.table} no longer exists; its compaction {self.commit_id} cannot be committed: "
                              f"abandon it (`gobblin-py recover JOB.yaml --dataset {self.record} --abandon`)")
        return table

    def verify(self) -> bool:
        return (self._open().transaction_version(self.app_id) or 0) >= self.version

    def execute(self) -> None:
        from deltalake import CommitProperties, Transaction
        from deltalake.transaction import RemoveAction

        table = self._open()
        if t.transaction_done(table, self.app_id, self.version, self.table,
                              f"compaction {self.commit_id} was planned: another compaction of the partition committed "
                              f"since. Nothing was replaced: abandon it (`gobblin-py recover JOB.yaml --dataset {self.record} "
                              "--abandon`); its merged files are removed by a vacuum"):
            return
        live = {p: s for p, s in zip(*_paths_and_sizes(table))}
        gone = [p for p in self.replaced if p not in live]
        if gone:
            raise CommitError(f"table {self.table}: {len(gone)} file(s) compaction {self.commit_id} merged are no longer in "
                              f"the table ({gone[0]} …): another writer removed them since. Nothing was replaced: abandon "
                              f"it (`gobblin-py recover JOB.yaml --dataset {self.record} --abandon`) and compact again")
        now = int(time.time() * 1000)
        adds = [t.read_file(p, t.relative(self.table, p), None, self.table) for p in self.added]
        actions: list[Any] = [RemoveAction(p, not self.keeps_data, now, live[p], dict(self.partition)) for p in self.replaced]
        actions += t.add_actions(adds, None, now, data_change=not self.keeps_data, values=dict(self.partition))
        props = CommitProperties(custom_metadata={**self.metadata, t.COMMIT_ID: self.commit_id},
                                 app_transactions=[Transaction(self.app_id, self.version)])
        table.create_write_transaction(actions, "append", table.schema(), list(table.metadata().partition_columns),
                                       commit_properties=props)

    def describe(self) -> str:
        return (f"replace {len(self.replaced)} file(s) of table {self.table} with {len(self.added)} merged file(s) in one "
                f"Delta commit ({self.commit_id})")

    def paths(self) -> list[str]:
        """The merged files it adds (and reads the footers of); the replaced ones are only removed from the log."""
        return list(self.added)


def _paths_and_sizes(table: Any) -> tuple[list[str], list[int]]:
    actions = table.get_add_actions(flatten=True)
    return list(actions.column("path").to_pylist()), list(actions.column("size_bytes").to_pylist())


def table_state(table: Any, partition_columns: list[str]) -> list[dict[str, Any]]:
    """Each file of the table's current version: its relative path, size, records, partition values (by column),
    when it was added (ms), and whether it carries a deletion vector."""
    actions = table.get_add_actions(flatten=True)
    columns = actions.column_names
    data = {c: actions.column(c).to_pylist() for c in columns}
    absent = [None] * len(data["path"])
    records = data.get("num_records", absent)
    parts = {c: data.get(f"partition.{c}", absent) for c in partition_columns}
    vectors = [data[c] for c in columns if c.startswith("deletionVector")]
    out = []
    for i, path in enumerate(data["path"]):
        added = data["modification_time"][i]
        out.append({"path": path, "size": data["size_bytes"][i], "records": records[i],
                    "partition": {c: values[i] for c, values in parts.items()},
                    "added_ms": int(added.timestamp() * 1000) if hasattr(added, "timestamp") else int(added or 0),
                    "deletion_vector": any(v[i] is not None for v in vectors)})
    return out


def counts_json(counts: dict[str, Any]) -> str:
    return json.dumps(counts, sort_keys=True, default=str)
