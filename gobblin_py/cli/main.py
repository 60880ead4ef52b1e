"""`gobblin-py`: run, validate, recover and inspect ingestion jobs. Exit codes: 0 ok, 1 job failed,
2 bad job file or command line, 3 commits pending (inspect-commits), 4 internal error (a bug: one line,
the traceback with --verbose)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from gobblin_py.cli.compact_command import compact_command
from gobblin_py.cli.infer_command import infer_command
from gobblin_py.cli.maintain_command import maintain_command
from gobblin_py.cli.new_command import new_command
from gobblin_py.cli.plan_command import plan_command
from gobblin_py.cli.snapshot_command import snapshot_command
from gobblin_py.errors import ConfigError, GobblinError

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  context_settings={"help_option_names": ["-h", "--help"]},
                  help="Gobblin-style ingestion jobs on Spark, published exactly once.\n\n"
                       "Example: gobblin-py run jobs/example.yaml")


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            print(f"gobblin-py {version('gobblin-py')}")
        except PackageNotFoundError:
            print("gobblin-py (not installed: running from a checkout)")
        raise typer.Exit(0)


@app.callback()
def _top(version_: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                 help="print the version and exit")] = False) -> None:
    """Gobblin-style ingestion jobs on Spark, published exactly once.

    Example: gobblin-py run jobs/example.yaml
    """

JobFile = Annotated[Path, typer.Argument(help="the job file (YAML, or an Apache Gobblin .pull/.job/.properties/.conf)", show_default=False)]
Strict = Annotated[bool, typer.Option("--strict", help="a Gobblin job file's unused keys are errors, not warnings")]


def _fail(exc: GobblinError) -> None:
    from gobblin_py.cli.output import fail
    fail(exc)


@app.command()
def run(
    job_file: JobFile,
    master: Annotated[str | None, typer.Option(help="Spark master URL; overrides spark.master")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="show the run's log lines (planning, progress, commits), debug lines and Spark's own logs")] = False,
    in_process: Annotated[bool, typer.Option("--in-process", help="run tasks in this process instead of Spark (debugging)")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="silent on success: only warnings, errors, and the summary of a run that failed")] = False,
    metrics_json: Annotated[Path | None, typer.Option("--metrics-json", help="write the run's metrics to this JSON file")] = None,
    metrics_prom: Annotated[Path | None, typer.Option("--metrics-prom", help="write the run's metrics, and each dataset's lag measured after it, in Prometheus' text format (node_exporter textfile collector)")] = None,
    continuous: Annotated[bool, typer.Option("--continuous", help="checkpoint every job.checkpoint_interval until SIGTERM or Ctrl-C (as job.mode: continuous)")] = False,
    force_takeover: Annotated[bool, typer.Option("--force-takeover", help="take the job's lease although another driver's is live: safe only when that driver is surely stopped (its commit steps are refused from then on, but a step it had already begun may finish)")] = False,
    strict: Strict = False,
) -> None:
    """Run a job once: lock, recover pending commits, extract, publish exactly once. With --continuous (or
    job.mode: continuous) the run goes on, one checkpoint every job.checkpoint_interval, until stopped.

    Example: gobblin-py run jobs/example.yaml
    """
    from gobblin_py.cli.output import check_metrics_path, print_summary, setup_logging, write_metrics
    from gobblin_py.cli.progress import progress_for
    from gobblin_py.config import load_job
    from gobblin_py.runtime import interrupt
    from gobblin_py.runtime.executors.in_process import InProcessExecutor
    from gobblin_py.runtime.executors.spark import SparkExecutor
    from gobblin_py.runtime.runner import JobRunner

    interrupt.install()
    try:
        job = load_job(job_file, master=master, strict=strict)
        for metrics_path, flag in ((metrics_json, "--metrics-json"), (metrics_prom, "--metrics-prom")):
            if metrics_path is not None:
                check_metrics_path(metrics_path, flag)
        ongoing = continuous or job.job.mode == "continuous"  # a service: one INFO line per checkpoint is its output
        level = "WARNING" if quiet and not verbose else job.logging.level or ("INFO" if ongoing else "WARNING")
        setup_logging(level, verbose)
        executor = InProcessExecutor() if in_process else SparkExecutor(job, verbose=verbose, announce=None if quiet else _say)
        runner = JobRunner(job, executor, progress_for(quiet))
        runner.force_takeover = force_takeover
        try:
            result = _run_continuously(runner, metrics_json) if ongoing else runner.run()
        finally:
            _stop_quietly(executor, verbose)
    except KeyboardInterrupt:
        from gobblin_py.cli.output import say_or_drop

        say_or_drop("interrupted: datasets not yet committed were not published, nothing half-done stays; "
                    "the next run resumes from the committed watermarks (the run is recorded as cancelled)")
        raise typer.Exit(130) from None
    except GobblinError as exc:
        _fail(exc)
        return
    except Exception as exc:  # a bug, not bad input: one line, the traceback only with --verbose
        if verbose:
            raise
        _internal(exc)
    if not (quiet and result.succeeded):  # --quiet: silent unless something failed (cron mails only those runs)
        print_summary(result)
    if metrics_json is not None:
        write_metrics(result, metrics_json)
    if metrics_prom is not None:
        from gobblin_py.operating.lag import measure_lag
        from gobblin_py.state.store import StateStore

        write_metrics(result, metrics_prom, prometheus=StateStore(job.job.records_root, job.name), lags=measure_lag(job))
    raise typer.Exit(0 if result.succeeded else 2 if result.bad_config else 1)


def _say(line: str) -> None:
    """One line on stderr, above the progress bar on a terminal (Spark starting: the wait that follows is its)."""
    from gobblin_py.cli.output import err

    err.print(line, markup=False)


def _run_continuously(runner: object, metrics_json: Path | None) -> object:
    """A continuous run: the first SIGTERM or Ctrl-C stops it after the checkpoint in flight commits, a second at once;
    `--metrics-json` is rewritten after each checkpoint."""
    import threading

    from gobblin_py.cli.output import write_metrics
    from gobblin_py.runtime import interrupt
    from gobblin_py.scheduling.continuous import run_continuous

    stop = threading.Event()
    interrupt.install_graceful(stop, lambda name: print(f"{name}: stopping after the checkpoint in flight commits "
                                                        "(send it again to stop at once)", file=sys.stderr, flush=True))
    after = (lambda result: write_metrics(result, metrics_json)) if metrics_json is not None else None
    return run_continuous(runner, stop, after)  # type: ignore[arg-type]


def _stop_quietly(executor: object, verbose: bool) -> None:
    """Stop the executor; after Ctrl-C Spark's teardown may raise again or log py4j errors: not the user's business."""
    import logging

    try:
        executor.stop(exiting=True)  # type: ignore[attr-defined]
    except (Exception, KeyboardInterrupt):  # noqa: BLE001 - the run's own outcome is what matters
        if verbose:
            raise
        logging.getLogger(__name__).debug("executor stop failed", exc_info=True)


@app.command()
def validate(job_file: JobFile, strict: Strict = False) -> None:
    """Check a job file and every plugin's settings without running anything (exit 0 or 2).

    Example: gobblin-py validate jobs/example.yaml
    """
    from gobblin_py.cli.output import out
    from gobblin_py.config import load_job

    try:
        job = load_job(job_file, strict=strict)
    except GobblinError as exc:
        _fail(exc)
        return
    out.print(f"{job_file}: valid job {job.name!r} (source {job.source.name}, {len(job.converters)} converter{'' if len(job.converters) == 1 else 's'}, "
              f"{len(job.branches)} branch{'es' if len(job.branches) != 1 else ''})", markup=False)


@app.command()
def recover(
    job_file: JobFile,
    dataset: Annotated[list[str] | None, typer.Option("--dataset", "-d", help="a dataset URN (repeatable)")] = None,
    all_: Annotated[bool, typer.Option("--all", help="every pending dataset of the job")] = False,
    abandon: Annotated[bool, typer.Option("--abandon", help="drop the sequence instead of replaying it (prints what is lost)")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="do not ask before abandoning")] = False,
) -> None:
    """Replay (or abandon) pending commit sequences now, quarantined ones included; takes the job lock.

    Exit 0 when nothing selected is left pending, 1 otherwise.

    Example: gobblin-py recover jobs/example.yaml --dataset clicks
    """
    from gobblin_py.cli import commits

    if not dataset and not all_:
        from gobblin_py.cli.output import err
        err.print("error: name the datasets to recover with --dataset URN, or pass --all", markup=False)
        raise typer.Exit(2)
    try:
        code = commits.recover(job_file, None if all_ else list(dataset or []), abandon, yes)
    except GobblinError as exc:
        _fail(exc)
        return
    raise typer.Exit(code)


@app.command("inspect-commits")
def inspect_commits(
    job_file: Annotated[Path | None, typer.Argument(help="the job file; omit it with --work-dir", show_default=False)] = None,
    dataset: Annotated[list[str] | None, typer.Option("--dataset", "-d", help="only this dataset URN (repeatable)")] = None,
    work_dir: Annotated[str | None, typer.Option("--work-dir", help="inspect every job under this work directory (a path, or s3://… with credentials and endpoint from the environment)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of a table")] = False,
) -> None:
    """List pending commit sequences and the state of each step (done / pending / lost).

    Exit 0 when nothing is pending, 3 when something is (so cron can alert on it).

    Example: gobblin-py inspect-commits jobs/example.yaml --json
    """
    from gobblin_py.cli import commits

    if (job_file is None) == (work_dir is None):
        from gobblin_py.cli.output import err
        err.print("error: give either a job file or --work-dir DIR", markup=False)
        raise typer.Exit(2)
    try:
        code = commits.inspect(job_file, work_dir, list(dataset or []) or None, as_json)
    except GobblinError as exc:
        _fail(exc)
        return
    raise typer.Exit(code)


@app.command()
def schedule(
    paths: Annotated[list[Path], typer.Argument(help="job files, or directories of job files", show_default=False)],
    grace: Annotated[float, typer.Option("--grace", help="seconds to let running jobs finish after SIGTERM")] = 300.0,
    isolated: Annotated[bool, typer.Option("--isolated", help="run each firing as a `gobblin-py run` child process, each starting Spark, "
                                                             "instead of on the scheduler's one warm Spark session")] = False,
    in_process: Annotated[bool, typer.Option("--in-process", help="run each job's tasks without Spark (debugging)")] = False,
    metrics_port: Annotated[int | None, typer.Option("--metrics-port", min=0, max=65535, show_default=False,
                                                        help="serve the runs' Prometheus metrics at http://HOST:PORT/metrics (0: a free port, logged)")] = None,
    metrics_host: Annotated[str, typer.Option("--metrics-host", help="the address --metrics-port listens on")] = "127.0.0.1",
) -> None:
    """Run every job that has job.schedule (a cron expression) on time, until SIGTERM; never two runs of a job at once.

    A job's compaction.schedule and maintenance.schedule fire as `<job>:compact` and `<job>:maintain` (deleting, as
    `maintain --yes`). The runs share one Spark session, started by the first run with work; --isolated runs each as a
    child process.

    Example: gobblin-py schedule jobs/ --metrics-port 9464
    """
    import logging
    import os

    from gobblin_py.cli.output import print_summary, setup_logging
    from gobblin_py.scheduling.scheduler import RunEnded, Scheduler

    def summary(ended: RunEnded) -> None:  # a child prints its own
        if ended.job_result is not None:
            print_summary(ended.job_result)

    setup_logging("INFO", False)
    server = None
    try:
        scheduler = Scheduler(paths, grace_s=grace, isolated=isolated, in_process=in_process)
        scheduler.run_listeners.append(summary)
        if metrics_port is not None:
            from gobblin_py.cli.prometheus import ScheduleMetrics

            metrics = ScheduleMetrics(scheduler.jobs)
            scheduler.run_listeners.append(metrics.run_ended)
            url, server = metrics.serve(metrics_host, metrics_port)
            logging.getLogger("gobblin_py.cli.schedule").info("serving the runs' metrics at %s", url)
    except GobblinError as exc:
        _fail(exc)
        return
    try:
        code = scheduler.run_forever()
    finally:
        if server is not None:
            server.shutdown()
    if scheduler.abandoned:  # runs that ignored the cancel: exit now rather than wait on their threads
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    raise typer.Exit(code)


@app.command()
def convert(
    job_file: Annotated[Path, typer.Argument(help="an Apache Gobblin job file: .pull, .job, .properties or .conf", show_default=False)],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="write the YAML job here (default: print it)")] = None,
    strict: Strict = False,
) -> None:
    """Translate an Apache Gobblin job file into a gobblin-py YAML job, validated; warnings go to stderr.

    Derived Avro schemas (from source.schema) are written beside the output as <name>.<table>-<hash>.avsc, named
    from the YAML file (${JOB_FILE_DIR}/…), so it runs from any directory; one topic is `topics: [x]`.
    gobblin-py also runs the Gobblin file unchanged (gobblin-py run JOB.pull); convert is for moving on to YAML.

    Example: gobblin-py convert jobs/kafka-to-avro.pull -o my/kafka.yaml
    """
    from gobblin_py.cli.output import err, out
    from gobblin_py.config.gobblin import convert_job

    try:
        converted = convert_job(job_file, output, strict=strict)
    except GobblinError as exc:
        _fail(exc)
        return
    for warning in converted.warnings:
        err.print(f"warning: {warning}", markup=False)
    if output is None:
        print(converted.text, end="")
        return
    schemas = "".join(f", {p}" for p in converted.schema_files)
    out.print(f"{job_file}: wrote {output}{schemas}", markup=False)


from gobblin_py.cli.demo_command import demo_app  # noqa: E402
from gobblin_py.cli.state_commands import history_app, state_app  # noqa: E402
from gobblin_py.cli.status_commands import serve_command, status_command  # noqa: E402

app.command("plan")(plan_command)
app.command("compact")(compact_command)
app.command("maintain")(maintain_command)
app.command("infer")(infer_command)
app.command("new")(new_command)
app.command("status")(status_command)
app.command("serve")(serve_command)
app.command("snapshot")(snapshot_command)
app.add_typer(state_app, name="state")
app.add_typer(history_app, name="history")
app.add_typer(demo_app, name="demo")


INTERNAL_ERROR = 4


def _internal(exc: BaseException) -> None:
    """An error no command expected: one line; exit 1 for a fault of the machine (a full disk, a permission, a name
    too long: the operator can fix it), else exit 4 (a bug); `--verbose` shows the traceback."""
    if isinstance(exc, OSError):
        where = f": {exc.filename}" if exc.filename else ""
        print(f"error: {exc.strerror or type(exc).__name__}{where} (the machine refused: fix it and run again; committed "
              "state is consistent, pending commits are recovered by the next run)", file=sys.stderr)
        raise SystemExit(1)
    print(f"error: internal error {type(exc).__name__}: {exc} (run again with --verbose for the traceback; "
          "committed state is consistent, pending commits are recovered by the next run)", file=sys.stderr)
    raise SystemExit(INTERNAL_ERROR)


def main() -> None:
    """Entry point of the `gobblin-py` script."""
    try:
        app()
    except ConfigError as exc:  # pragma: no cover - commands handle their own
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except Exception as exc:  # noqa: BLE001 - any command's unexpected error: one line unless --verbose
        if "--verbose" in sys.argv or "-v" in sys.argv[1:]:
            raise
        _internal(exc)


if __name__ == "__main__":
    main()
