"""`gobblin-py compact`: merge each selected partition's small files into files near the target size, exactly once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import orjson
import typer

from gobblin_py.errors import ConfigError, GobblinError

SHOWN_SKIPPED = 20
"""Partitions left alone listed one a line; the rest are counted (all in --json)."""


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def compact_command(
    job_file: Annotated[Path, typer.Argument(help="the job file (YAML)", show_default=False)],
    dataset: Annotated[list[str] | None, typer.Option("--dataset", "-d", help="only this dataset (repeatable)")] = None,
    partition: Annotated[str | None, typer.Option("--partition", help="only partitions under this path prefix, e.g. 2026/01 (a table's by its partition value: 2026/01 or 2026-01)")] = None,
    older_than: Annotated[str | None, typer.Option("--older-than", help="only partitions not written to for this long (1h, 2d): closed ones")] = None,
    target_size: Annotated[str | None, typer.Option("--target-size", help="size of the merged files (256MB) [default: compaction.target_size, else 256MB]")] = None,
    min_files: Annotated[int | None, typer.Option("--min-files", min=1, help="leave partitions with fewer files alone [default: compaction.min_files, else 2]")] = None,
    dedup_key: Annotated[str | None, typer.Option("--dedup-key", help="keep one record per value of this field in each partition")] = None,
    keep: Annotated[str | None, typer.Option("--keep", help="with --dedup-key: latest or first by --order-by [default: latest]")] = None,
    order_by: Annotated[str | None, typer.Option("--order-by", help="with --dedup-key: the field that orders a key's records (else the order files were written in)")] = None,
    master: Annotated[str | None, typer.Option(help="Spark master URL; overrides spark.master")] = None,
    in_process: Annotated[bool, typer.Option("--in-process", help="merge in this process instead of Spark tasks (debugging)")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="silent on success: only warnings, errors, and the report of a compaction that failed")] = False,
    metrics_json: Annotated[Path | None, typer.Option("--metrics-json", help="write the run's metrics (as `run` does) to this JSON file")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="show Spark's own logs and debug lines")] = False,
) -> None:
    """Merge each partition's small Avro or Parquet files (for a job publishing to Iceberg, each table partition's)
    into files near the target size, one Spark task per partition, and publish them exactly once: readers see a
    partition's old files or its merged files, never both nor neither (a table: in one replace snapshot).
    Takes the job lock, so it never runs beside an ingestion run of the job. Settings not given come from the job
    file's `compaction:` section. Exit 0 when every selected partition is compacted (or none needed it), 1 when one
    failed or the job is running, 2 on a bad job file or option.

    Example: gobblin-py compact jobs/example.yaml --dataset clicks --older-than 1d --target-size 256MB
    """
    from gobblin_py.cli.output import check_metrics_path, fail, out, setup_logging, write_metrics
    from gobblin_py.compaction.compactor import Compactor
    from gobblin_py.compaction.plan import compaction_options
    from gobblin_py.config import load_job
    from gobblin_py.runtime.executors.in_process import InProcessExecutor
    from gobblin_py.runtime.executors.spark import SparkExecutor
    from gobblin_py.runtime.runner import JobRunner

    try:
        job = load_job(job_file, master=master)
        options = compaction_options(job, datasets=dataset, partition=partition, older_than=older_than,
                                     target_size=target_size, min_files=min_files, dedup_key=dedup_key, keep=keep,
                                     order_by=order_by)
        if metrics_json is not None:
            check_metrics_path(metrics_json)
        setup_logging("WARNING" if quiet and not verbose else job.logging.level or "INFO", verbose)
        executor = InProcessExecutor() if in_process else SparkExecutor(job, verbose=verbose)
        try:
            report = Compactor(JobRunner(job, executor)).run(options)
        finally:
            executor.stop(exiting=True)
        if report.result is not None and report.result.bad_config:  # found planning (a dedup field): exit 2
            raise ConfigError(report.result.error or "bad option")
    except GobblinError as exc:
        fail(exc)
    if metrics_json is not None and report.result is not None:
        write_metrics(report.result, metrics_json)
    if as_json:
        print(orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2).decode())
    elif quiet and report.succeeded:  # silent on success, as `run --quiet`
        pass
    else:
        result = report.result
        assert result is not None
        out.print(f"job {job.name} compaction {result.run_id}", markup=False)
        for p in report.partitions:
            dedup = f", {p.duplicates_removed} duplicates removed" if options.dedup is not None else ""
            line = (f"  {p.partition}  {p.status}  {_n(p.files_in, 'file')} ({p.bytes_in} bytes) → {_n(p.files_out, 'file')} "
                    f"({p.bytes_out} bytes), {_n(p.records_out, 'record')}{dedup}")
            out.print(line + (f": {p.message}" if p.message else ""), markup=False)
        skipped = sorted(report.skipped.items())
        for rel, why in skipped[:SHOWN_SKIPPED]:
            out.print(f"  {rel}  left alone: {why}", markup=False)
        if len(skipped) > SHOWN_SKIPPED:
            out.print(f"  … and {len(skipped) - SHOWN_SKIPPED} more partitions left alone (--json lists them all)", markup=False)
        verdict = "SUCCEEDED" if report.succeeded else "FAILED"
        out.print(f"{verdict} compaction of job {job.name}: {sum(p.status == 'compacted' for p in report.partitions)} "
                  f"partitions compacted in {result.duration_s:.1f}s" + (f": {result.error}" if result.error and not report.succeeded else ""),
                  markup=False)
    raise typer.Exit(0 if report.succeeded else 1)
