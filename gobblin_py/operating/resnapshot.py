"""Marks a postgres_cdc table for a fresh chunked snapshot in the job's committed state (`gobblin-py snapshot`): the
slot and the table's stream position are left alone; the next run plans the table's chunks while its changes, and
the other tables', go on streaming."""

from __future__ import annotations

from gobblin_py.config.model import JobSpec
from gobblin_py.errors import ConfigError


def request_snapshot(job: JobSpec, table: str, run_id: str) -> str:
    """Records the request for `table` under the job's lock; what will happen, for the operator. ConfigError naming
    the job or the table where it cannot be done (not a postgres_cdc job with chunked snapshots, a table never
    committed, a commit pending for it)."""
    from gobblin_py.builtin.sources.postgres_cdc.chunks import RESNAPSHOT
    from gobblin_py.builtin.sources.postgres_cdc.slot import WATERMARK_KEY
    from gobblin_py.builtin.sources.postgres_cdc.source import PostgresCdcSource
    from gobblin_py.commit.guard import JobGuard
    from gobblin_py.commit.store import CommitStepStore
    from gobblin_py.state.events import EventLog
    from gobblin_py.state.store import DatasetStateFile, StateStore, WatermarkFile

    if not issubclass(job.source.cls(), PostgresCdcSource):
        raise ConfigError(f"job {job.name}: its source is not postgres_cdc; `snapshot` re-reads a table of a "
                          "postgres_cdc job (another job: `gobblin-py state reset`)")
    if job.source.create().settings.snapshot_chunk_rows is None:
        raise ConfigError(f"job {job.name}: source.snapshot_chunk_rows is not set, so a table can only be snapshotted "
                          "again in one transaction: set it, or use `gobblin-py state reset JOB.yaml --dataset "
                          f"{table} --yes`")
    store = StateStore(job.job.records_root, job.name)
    with JobGuard(job, run_id):
        if CommitStepStore(job.job.records_root).exists(job.name, table):
            raise ConfigError(f"a commit sequence is pending for {table}: finish it first with `gobblin-py recover "
                              f"JOB.yaml --dataset {table}`")
        if WatermarkFile(store.dir, table).read().get(WATERMARK_KEY) is None:
            known = ", ".join(store.dataset_names()) or "none"
            raise ConfigError(f"table {table} has no committed position in job {job.name} (known: {known}); a table "
                              "never committed is snapshotted by its first run anyway")
        file = DatasetStateFile(store.dir, table)
        state = file.read() or {}
        source = state.get("source") if isinstance(state.get("source"), dict) else {}
        file.write({**state, "source": {**source, RESNAPSHOT: run_id}})
        EventLog(job.job.records_root, job.name).emit("SnapshotRequested", dataset=table)
    return (f"table {table}: marked for a fresh chunked snapshot. The next run plans its chunks (of about "
            f"{job.source.create().settings.snapshot_chunk_rows} rows) and reads them over as many runs as it takes, "
            "while its changes and the other tables' keep streaming; the replication slot is not reset. Its rows are "
            "read again as `read` records (upserts in a table kept by key); rows deleted from the source while it was "
            "not captured stay in the output (delete them there).")
