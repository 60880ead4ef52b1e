"""`gobblin-py snapshot`: mark a postgres_cdc table for a fresh chunked snapshot, the slot left as it is."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gobblin_py.errors import GobblinError


def snapshot_command(
    job_file: Annotated[Path, typer.Argument(help="the job file (YAML)", show_default=False)],
    table: Annotated[str, typer.Option("--table", "-t", help="the table to read again, schema.table",
                                       show_default=False)],
) -> None:
    """Snapshot a table of a postgres_cdc job again, in chunks, without resetting the slot; takes the job lock.

    The next run reads the table's rows again (as `read` records) over as many runs as its chunks take, while its
    changes and the other tables' keep streaming. Needs source.snapshot_chunk_rows.

    Example: gobblin-py snapshot jobs/orders-cdc.yaml --table public.orders
    """
    from gobblin_py.builtin.sources.postgres_cdc.chunks import RESNAPSHOT
    from gobblin_py.builtin.sources.postgres_cdc.slot import WATERMARK_KEY
    from gobblin_py.builtin.sources.postgres_cdc.source import PostgresCdcSource
    from gobblin_py.cli.output import fail, out
    from gobblin_py.config import load_job
    from gobblin_py.errors import ConfigError
    from gobblin_py.operating.resnapshot import mark_kept
    from gobblin_py.runtime.runner import new_run_id

    try:
        job = load_job(job_file)
        if not issubclass(job.source.cls(), PostgresCdcSource):
            raise ConfigError(f"job {job.name}: its source is not postgres_cdc; `snapshot` re-reads a table of a "
                              "postgres_cdc job (another job: `gobblin-py state reset`)")
        rows = job.source.create().settings.snapshot_chunk_rows
        if rows is None:
            raise ConfigError(f"job {job.name}: source.snapshot_chunk_rows is not set, so a table can only be "
                              "snapshotted again in one transaction: set it, or use `gobblin-py state reset "
                              f"{job_file} --dataset {table} --yes`")
        run_id = new_run_id()
        mark_kept(job, table, RESNAPSHOT, run_id, run_id, WATERMARK_KEY)
    except GobblinError as exc:
        fail(exc)
        return
    out.print(f"table {table}: marked for a fresh chunked snapshot. The next run plans its chunks (of about {rows} "
              "rows) and reads them over as many runs as it takes, while its changes and the other tables' keep "
              "streaming; the replication slot is not reset. Its rows are read again as `read` records (upserts in a "
              "table kept by key); rows deleted from the source while it was not captured stay in the output "
              "(delete them there).", markup=False)
