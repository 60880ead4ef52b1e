"""`gobblin-py`: run, validate, recover and inspect ingestion jobs. Exit codes: 0 ok, 1 job failed,
2 bad job file or command line, 3 commits pending (inspect-commits)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from gobblin_py.errors import ConfigError, GobblinError

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Gobblin-style ingestion jobs on Spark, published exactly once.")

JobFile = Annotated[Path, typer.Argument(help="the job file (YAML)", show_default=False)]


def _fail(exc: GobblinError) -> None:
    from gobblin_py.cli.output import err
    err.print(f"error: {exc}", markup=False)
    raise typer.Exit(exc.exit_code)


@app.command()
def run(
    job_file: JobFile,
    master: Annotated[Optional[str], typer.Option(help="Spark master URL; overrides spark.master")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="show Spark's own logs and debug lines")] = False,
    in_process: Annotated[bool, typer.Option("--in-process", help="run tasks in this process instead of Spark (debugging)")] = False,
) -> None:
    """Run a job once: lock, recover pending commits, extract, publish exactly once.

    Example: gobblin-py run jobs/example.yaml
    """
    from gobblin_py.cli.output import print_summary, setup_logging
    from gobblin_py.config import load_job
    from gobblin_py.runtime.executors import InProcessExecutor
    from gobblin_py.runtime.runner import JobRunner
    from gobblin_py.runtime.spark_executor import SparkExecutor

    try:
        job = load_job(job_file, master=master)
        setup_logging(job.logging.level, verbose)
        executor = InProcessExecutor() if in_process else SparkExecutor(job, verbose=verbose)
        try:
            result = JobRunner(job, executor).run()
        finally:
            executor.stop()
    except GobblinError as exc:
        _fail(exc)
        return
    print_summary(result)
    raise typer.Exit(0 if result.succeeded else 1)


@app.command()
def validate(job_file: JobFile) -> None:
    """Check a job file and every plugin's settings without running anything (exit 0 or 2).

    Example: gobblin-py validate jobs/example.yaml
    """
    from gobblin_py.cli.output import out
    from gobblin_py.config import load_job

    try:
        job = load_job(job_file)
    except GobblinError as exc:
        _fail(exc)
        return
    out.print(f"{job_file}: valid job {job.name!r} (source {job.source.path}, {len(job.converters)} converters, "
              f"{len(job.branches)} branch{'es' if len(job.branches) != 1 else ''})", markup=False)


def main() -> None:
    """Entry point of the `gobblin-py` script."""
    try:
        app()
    except ConfigError as exc:  # pragma: no cover - commands handle their own
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
