"""`gobblin-py status` and `gobblin-py serve`: the overview of jobs in the terminal, and as a web page with a JSON API."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from gobblin_py.errors import ConfigError, GobblinError

Paths = Annotated[list[Path], typer.Argument(help="job files, or directories of job files (as `schedule` finds them)", show_default=False)]
MaxLagSeconds = Annotated[float, typer.Option("--max-lag-seconds", help="lag beyond this needs a person (red)")]
MaxLagRecords = Annotated[int, typer.Option("--max-lag-records", help="lag beyond this many records needs a person (red)")]
LagTimeout = Annotated[float, typer.Option("--lag-timeout", help="seconds to wait for a source when measuring a job's lag")]


def status_command(
    paths: Paths,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON (what the status page's /api/jobs serves)")] = False,
    max_lag_seconds: MaxLagSeconds = 3600.0,
    max_lag_records: MaxLagRecords = 1_000_000,
    lag_timeout: Annotated[float, typer.Option("--lag-timeout", min=0.1, help="the longest wait for each job's source when "
                                                                             "measuring its lag (the wait is announced, naming the source)")] = 5.0,
) -> None:
    """Each job at a glance: schedule and next firing, last run, failing streak, pending and quarantined commits,
    and each dataset's lag. Exit 0 when no job needs a person, 1 when one does (failing, a commit pending or
    quarantined, lag beyond the limits, a job file that does not load).

    Example: gobblin-py status jobs/ --json
    """
    from gobblin_py.cli.output import err, fail, out
    from gobblin_py.operating.overview import LagLimits, find_jobs, jobs_overview

    try:
        views = jobs_overview(find_jobs(paths), lag_timeout, limits=LagLimits(max_lag_seconds, max_lag_records),
                              on_wait=lambda line: err.print(line, markup=False))
    except GobblinError as exc:
        fail(exc)
        return
    if as_json:
        print(orjson.dumps([v.to_json() for v in views], option=orjson.OPT_INDENT_2).decode())
        raise typer.Exit(1 if any(v.attention for v in views) else 0)
    from rich.console import Console
    from rich.table import Table

    table = Table(show_lines=False)
    for column in ("job", "health", "schedule · next", "last run", "duration", "records", "failing", "commits", "lag"):
        table.add_column(column, justify="right" if column in ("duration", "records", "failing") else "left")
    for v in views:
        last = v.last_run
        waiting = len(v.pending) - len(v.quarantined)
        commits = ", ".join(x for x in (f"✖ {len(v.quarantined)} quarantined" if v.quarantined else "",
                                        f"⚠ {waiting} pending" if waiting else "") if x) or "none"
        table.add_row(v.name, "✖ needs a person" if v.attention else "✔ ok" if last else "⚠ no runs",
                      f"{v.schedule} · {v.next_fire}" if v.schedule else "-",
                      f"{last.status} {last.started}" if last else "never", f"{last.duration_s:.1f}s" if last else "",
                      f"{last.records_written:,}" if last else "", str(v.failing_streak), commits,
                      "\n".join(f"{d.dataset}: {_lag_text(d.lag)}" for d in v.datasets) or "-",
                      style="red" if v.attention else None)
    wide = out if out.is_terminal else Console(highlight=False, width=200)  # a pipe gets whole lines, not 80 columns
    wide.print(table)
    for v in views:
        if v.lease is not None and v.lease["state"] == "held":  # a run under way: who runs it, where
            lease = v.lease
            out.print(f"{v.name}: lease epoch {lease['epoch']} held by run {lease['run_id']} (pid {lease['pid']} on "
                      f"{lease['host']}) until {lease['expires_at']}", markup=False)
        for reason in v.attention:
            out.print(f"{v.name}: {reason}", markup=False)
    raise typer.Exit(1 if any(v.attention for v in views) else 0)


def _lag_text(lag: Any) -> str:
    if lag is None:
        return "-"
    if lag.error:
        return lag.error
    bits = [f"{lag.records:,} records" if lag.records is not None else "", f"{lag.seconds:,.0f} s" if lag.seconds is not None else "",
            f"{lag.files:,} file{'' if lag.files == 1 else 's'}" if lag.files is not None else "", f"{lag.bytes:,} bytes" if lag.bytes is not None else ""]
    return ", ".join(b for b in bits if b) or "0"


def serve_command(
    paths: Paths,
    host: Annotated[str, typer.Option("--host", help="the address to listen on (127.0.0.1: this machine only)")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="the port to listen on")] = 8080,
    allow_actions: Annotated[bool, typer.Option("--allow-actions", help="allow POST recover and run, each with the token of --token-env")] = False,
    token_env: Annotated[str | None, typer.Option("--token-env", help="the environment variable holding the actions' token", show_default=False)] = None,
    max_lag_seconds: MaxLagSeconds = 3600.0,
    max_lag_records: MaxLagRecords = 1_000_000,
    lag_timeout: LagTimeout = 10.0,
) -> None:
    """Serve the status page (overview, each job, each run) and its JSON API under /api (described at
    /api/openapi.json), with /metrics for Prometheus; read-only and on 127.0.0.1 unless told otherwise. Needs the
    `ui` extra (pip install 'gobblin-py[ui]').

    Example: gobblin-py serve jobs/ --port 8080
    """
    from gobblin_py.cli.output import fail, setup_logging
    from gobblin_py.cli.prometheus import last_runs_text
    from gobblin_py.operating.overview import LagLimits
    from gobblin_py.operating.server import serve

    token = None
    try:
        if allow_actions:
            if not token_env:
                raise ConfigError("--allow-actions needs --token-env VAR: the environment variable holding the token "
                                  "that each action must present (Authorization: Bearer TOKEN)")
            token = os.environ.get(token_env, "")
            if len(token) < 16:
                raise ConfigError(f"--token-env {token_env}: the variable is unset or shorter than 16 characters; "
                                  "set it to a long random token (python -c 'import secrets; print(secrets.token_urlsafe())')")
        elif token_env:
            raise ConfigError("--token-env is for --allow-actions; without it the server is read-only")
        setup_logging("INFO", False)
        _stop_like_ctrl_c()
        serve(paths, host, port, token=token, metrics=last_runs_text, limits=LagLimits(max_lag_seconds, max_lag_records),
              lag_timeout_s=lag_timeout)
    except GobblinError as exc:
        fail(exc)
    except KeyboardInterrupt:  # uvicorn shut the server down, and raised the signal again to end the process
        pass
    from gobblin_py.cli.output import say_or_drop

    say_or_drop("stopped: the server is stopped")


def _stop_like_ctrl_c() -> None:
    """SIGTERM and SIGHUP (a container stopping, a terminal closed) stop `serve` as Ctrl-C does: while it serves,
    uvicorn's own handler shuts the server down (SIGHUP is passed on as SIGTERM); the signal it then raises again ends
    the command as a KeyboardInterrupt: one line and exit 0, not a kill."""
    import signal

    def as_ctrl_c(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, as_ctrl_c)
    signal.signal(signal.SIGHUP, lambda signum, frame: os.kill(os.getpid(), signal.SIGTERM))
