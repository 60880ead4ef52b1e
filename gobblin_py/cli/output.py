"""How commands print: logging setup, the run summary table, one-line errors."""

from __future__ import annotations

import errno
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import NoReturn

import orjson
import typer
from rich.console import Console

from gobblin_py import durable
from gobblin_py.api.lag import DatasetLag
from gobblin_py.errors import ConfigError, GobblinError
from gobblin_py.runtime.runner import DatasetStatus, JobResult
from gobblin_py.state.store import StateStore

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


class ConsoleLogHandler(logging.Handler):
    """On a terminal, log lines go through the console the live progress bar draws on (`err`), so rich prints each
    above the bar instead of the line landing inside it."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            err.print(self.format(record), markup=False, highlight=False, soft_wrap=True)
        except Exception:  # noqa: BLE001 - as logging.StreamHandler: a failed log line never fails the run
            self.handleError(record)


def setup_logging(level: str, verbose: bool) -> None:
    """The log's level and format; on a terminal through `err`, elsewhere (cron, pipes) plain lines on stderr."""
    handler = ConsoleLogHandler() if sys.stderr.isatty() else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.DEBUG if verbose else getattr(logging, level), handlers=[handler], force=True)
    for noisy in ("py4j", "py4j.clientserver", "py4j.java_gateway"):  # after Ctrl-C py4j logs every broken call
        logging.getLogger(noisy).setLevel(logging.WARNING if verbose else logging.CRITICAL)
    if not verbose:  # py4j also logs through the root logger ("KeyboardInterrupt while sending command" + a traceback)
        for handler in logging.getLogger().handlers:
            handler.addFilter(lambda record: "py4j" not in record.pathname)
    # kafka-python logs every connection error with a traceback; our own messages name broker, topic and
    # partition, so its log stays quiet unless --verbose
    logging.getLogger("kafka").setLevel(logging.INFO if verbose else logging.CRITICAL)
    # the schema registry client's HTTP library logs every request at INFO: our messages name the registry and subject
    for http in ("httpx", "httpx2"):
        logging.getLogger(http).setLevel(logging.INFO if verbose else logging.WARNING)
    # pyiceberg logs "Loaded FileIO" at INFO each time a catalog loads: table commits say what they did themselves
    logging.getLogger("pyiceberg").setLevel(logging.DEBUG if verbose else logging.WARNING)


def say_or_drop(line: str) -> None:
    """One line to stderr, unless its reader is gone (Ctrl-C in `run … 2>&1 | tee log` ends tee first): then that
    stream points at /dev/null, so neither this line nor Python's flush at exit fails the command."""
    for stream, text in ((sys.stdout, None), (sys.stderr, line)):
        try:
            if text is not None:
                print(text, file=stream)
            stream.flush()
        except (BrokenPipeError, ValueError):  # ValueError: the stream is already closed
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stream.fileno())
            os.close(devnull)


def print_summary(result: JobResult) -> None:
    """The last lines of a run: one aligned row per dataset, then the verdict (plain text, for cron logs too)."""
    header = ("dataset", "status", "extracted", "written", "rejected", "files", "error_files", "watermark")
    rows = [header] + [
        (d.dataset, d.status.value, str(d.records_extracted), str(d.records_written), str(d.records_rejected),
         str(d.files_published), str(d.error_files), d.watermark)
        for d in result.datasets
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    numeric = {2, 3, 4, 5, 6}
    out.print(f"job {result.job} run {result.run_id}", markup=False)
    for r in rows:
        cells = [c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))]
        out.print("  " + "  ".join(cells).rstrip(), markup=False)
    for d in result.datasets:
        if d.message:
            out.print(f"  {d.dataset}: {d.message}", markup=False)
        for problem in d.input_problems:
            out.print(f"  {d.dataset}: {problem}", markup=False)
        for note in d.notices:
            out.print(f"  {d.dataset}: {note}", markup=False)
        for name, c in d.counters.items():
            examples = f" ({', '.join(c['examples'])})" if c["examples"] else ""
            out.print(f"  {d.dataset}: {name} {c['count']}{examples}", markup=False)
    for r in result.recovery.datasets:  # a killed run's commit, finished before this run read anything
        if r.outcome.value == "recovered":
            out.print(f"  {r.dataset}: recovered the pending commit of run {r.run_id} (an earlier run stopped mid-commit)",
                      markup=False)
    unlisted = [d.dataset for d in result.datasets if d.status is DatasetStatus.NOT_IN_SOURCE]
    if unlisted:
        out.print(f"  in state, not in the source: {', '.join(unlisted)}. Another job with this name? `job.name` keys "
                  f"the state (job {result.job!r}); rename the job, or `gobblin-py state reset` them", markup=False)
    verdict = "SUCCEEDED" if result.succeeded else "FAILED"
    out.print(f"{verdict} job {result.job} run {result.run_id} in {result.duration_s:.1f}s"
              + (f": {result.error}" if result.error and not result.succeeded else ""), markup=False)


def check_metrics_path(path: Path, flag: str = "--metrics-json") -> None:
    """Refuse, before anything runs, a metrics path that cannot be written (exit 2)."""
    try:
        if path.is_dir():
            raise IsADirectoryError(errno.EISDIR, "is a directory")
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path.parent):
            pass
    except OSError as exc:
        raise ConfigError(f"{flag} {path}: cannot write there ({exc.strerror or exc}); nothing was run") from None


def write_metrics(result: JobResult, path: Path, prometheus: StateStore | None = None,
                  lags: list[DatasetLag] | None = None) -> None:
    """The run's metrics (job, datasets, tasks) as JSON, or in Prometheus' text format (with the datasets' `lags`
    measured after the run), for a monitoring system.
    A failure to write them is reported on stderr; it never changes what the run committed, nor its exit code."""
    try:
        if prometheus is not None:  # the job's state store: last success times outlive a failed run
            from gobblin_py.cli.prometheus import write_prometheus

            write_prometheus(result, path, prometheus, lags)
        else:
            durable.atomic_write(path, orjson.dumps(result.to_json(), option=orjson.OPT_INDENT_2))
    except OSError as exc:
        err.print(f"error: could not write the metrics to {path}: {exc.strerror or exc} "
                  f"(the run's outcome stands; its metrics are also in `gobblin-py history show`)", markup=False)


def fail(exc: GobblinError) -> NoReturn:
    """One line on stderr and the exit code of the error's branch (2 bad input, 1 the job failed)."""
    err.print(f"error: {exc}", markup=False)
    raise typer.Exit(exc.exit_code)
