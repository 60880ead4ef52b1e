"""`gobblin-py maintain`: table upkeep (snapshot expiry, orphan files, retention), dry by default, never breaking a
pending commit."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import orjson
import typer

from gobblin_py.errors import GobblinError


def maintain_command(
    job_file: Annotated[Path, typer.Argument(help="the job file (YAML)", show_default=False)],
    expire_snapshots_older_than: Annotated[str | None, typer.Option("--expire-snapshots-older-than", help="Iceberg: expire snapshots older than this (7d) and delete the files only they referenced; Delta: checkpoint, then delete the log entries below it older than this [default: maintenance.expire_snapshots_older_than]")] = None,
    keep_last: Annotated[int | None, typer.Option("--keep-last", help="Iceberg: always keep this many newest snapshots [default: maintenance.keep_last, else 1]")] = None,
    remove_orphans_older_than: Annotated[str | None, typer.Option("--remove-orphans-older-than", help="Iceberg: delete files under the table's location no snapshot lists, last written this long ago (at least 1h; 3d is safe); Delta: vacuum (files removed from the log or unreferenced this long ago) [default: maintenance.remove_orphans_older_than]")] = None,
    retention: Annotated[str | None, typer.Option("--retention", help="delete whole time partitions that ended this long ago (30d) [default: maintenance.retention]")] = None,
    below_table_retention: Annotated[bool, typer.Option("--below-table-retention", help="Delta: honour an age shorter than the table's own delta.deletedFileRetentionDuration / delta.logRetentionDuration (refused otherwise)")] = False,
    dataset: Annotated[list[str] | None, typer.Option("--dataset", "-d", help="only this dataset (repeatable)")] = None,
    yes: Annotated[bool, typer.Option("--yes", help="delete; without it, only list what would be deleted")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="silent on success: only warnings, errors, and the report of a maintenance that failed")] = False,
    metrics_json: Annotated[Path | None, typer.Option("--metrics-json", help="with --yes: write the run's metrics (as `run` does) to this JSON file")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="show debug lines")] = False,
) -> None:
    """Keep the job's tables and directories in shape: expire old Iceberg snapshots (never the newest --keep-last, never
    in a table a pending commit needs) or checkpoint a Delta table and expire its old log entries, delete orphan files
    under a table's location (a Delta vacuum), and delete whole time partitions
    older than --retention. Without --yes it only lists every file, partition and snapshot it would delete; with --yes
    it deletes them through the commit log under the job lock (a kill anywhere is completed by the next `maintain` or
    `run`). Settings not given come from the job file's `maintenance:` section (with `maintenance.schedule`,
    `schedule` and continuous runs run it with --yes on that cron). Exit 0 when every action is done (or
    listed), 1 when one failed or the job is running, 2 on a bad job file or option.

    Example: gobblin-py maintain jobs/example.yaml --retention 30d --expire-snapshots-older-than 7d --keep-last 10 --yes
    """
    from gobblin_py.cli.output import check_metrics_path, fail, out, setup_logging, write_metrics
    from gobblin_py.config import load_job
    from gobblin_py.maintenance.maintainer import Maintainer
    from gobblin_py.maintenance.options import maintenance_options
    from gobblin_py.runtime.executors.in_process import InProcessExecutor
    from gobblin_py.runtime.runner import JobRunner

    try:
        job = load_job(job_file)
        options = maintenance_options(job, datasets=dataset, expire_snapshots_older_than=expire_snapshots_older_than,
                                      keep_last=keep_last, remove_orphans_older_than=remove_orphans_older_than,
                                      retention=retention, below_table_retention=below_table_retention)
        if metrics_json is not None:
            check_metrics_path(metrics_json)
        setup_logging("WARNING" if quiet and not verbose else job.logging.level or "INFO", verbose)
        report = Maintainer(JobRunner(job, InProcessExecutor())).run(options, apply=yes)
    except GobblinError as exc:
        fail(exc)
    if metrics_json is not None and report.result is not None:
        write_metrics(report.result, metrics_json)
    if as_json:
        print(orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2).decode())
    elif quiet and report.succeeded:  # silent on success, as `run --quiet`
        pass
    else:
        verb = "would delete" if report.dry_run else "deleted"
        head = f"job {job.name} maintenance" + (" (dry run: nothing is deleted without --yes)" if report.dry_run else
                                                 f" {report.result.run_id}" if report.result else "")
        out.print(head, markup=False)
        for a in report.actions:
            out.print(f"  {a.action} {a.target}: {a.status}" + (f": {a.message}" if a.message else ""), markup=False)
            for d in a.deletions:
                out.print(f"    {verb if a.status != 'failed' else 'not deleted'}: {d}", markup=False)
            for r in a.refused:
                out.print(f"    refused: {r}", markup=False)
        error = report.error or (report.result.error if report.result else None)
        verdict = "SUCCEEDED" if report.succeeded else "FAILED"
        deleted = sum(len(a.deletions) for a in report.actions if a.status in ("done", "planned"))
        out.print(f"{verdict} maintenance of job {job.name}: {deleted} deletion(s) {'listed' if report.dry_run else 'done'}"
                  + (f": {error}" if error and not report.succeeded else ""), markup=False)
    raise typer.Exit(0 if report.succeeded else 1)
