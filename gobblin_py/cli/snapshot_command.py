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
    from gobblin_py.cli.output import fail, out
    from gobblin_py.config import load_job
    from gobblin_py.operating.resnapshot import request_snapshot
    from gobblin_py.runtime.runner import new_run_id

    try:
        out.print(request_snapshot(load_job(job_file), table, new_run_id()), markup=False)
    except GobblinError as exc:
        fail(exc)
