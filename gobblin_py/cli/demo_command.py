"""`gobblin-py demo`: try-it paths that need only an install (the broker comes with the `demo` extra)."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from gobblin_py.errors import GobblinError

demo_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                       help="Try gobblin-py on local services it starts itself.\n\nExample: gobblin-py demo kafka")


@demo_app.command("kafka")
def kafka_command(
    directory: Annotated[Path, typer.Option("--dir", help="where the job file, its work directory and output go")] = Path("kafka-demo"),
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="the broker's port on 127.0.0.1 (0: any free one); taken: an error naming who holds it")] = 9092,
    rate: Annotated[int, typer.Option("--rate", min=1, help="events per second produced after the first run")] = 200,
    seconds: Annotated[float, typer.Option("--seconds", min=0, help="stop producing after this long (0: at Ctrl-C)")] = 0.0,
    once: Annotated[bool, typer.Option("--once", help="stop after the first run instead of producing on")] = False,
) -> None:
    """Start a local Kafka-compatible broker (Tansu, in memory, on 127.0.0.1), produce sample events to topics events
    and clicks, write a job file for them under --dir and run it once; then keep producing, so that each further run
    of the printed command ingests what arrived since, exactly once. Needs pip install 'gobblin-py[demo]'.

    Example: gobblin-py demo kafka --dir kafka-demo
    """
    from gobblin_py.cli.output import setup_logging
    from gobblin_py.demo.kafka import DemoOptions, demo

    setup_logging("WARNING", False)
    with stopped_like_ctrl_c("the broker"):
        try:
            code = demo(DemoOptions(directory=directory, port=port, rate=rate, seconds=seconds, once=once))
        except GobblinError as exc:
            from gobblin_py.cli.output import fail

            fail(exc)
            return
    raise typer.Exit(code)


@contextlib.contextmanager
def stopped_like_ctrl_c(what: str) -> Iterator[None]:
    """SIGTERM and SIGHUP (`kill PID`, a container stopping, a terminal closed) stop a demo as Ctrl-C does: `what` it
    started is stopped on the way out, never orphaned; then one line and exit 130."""
    from gobblin_py.cli.output import say_or_drop

    def as_ctrl_c(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    before = {sig: signal.signal(sig, as_ctrl_c) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    except KeyboardInterrupt:
        say_or_drop(f"interrupted: {what} is stopped")
        raise typer.Exit(130) from None
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


@demo_app.command("postgres")
def postgres_command(
    directory: Annotated[Path, typer.Option("--dir", help="where the job file, its work directory and output go")] = Path("postgres-demo"),
    rows: Annotated[int, typer.Option("--rows", min=1, help="orders in the table before the first run")] = 1000,
    rate: Annotated[int, typer.Option("--rate", min=1, help="orders inserted per second after the first run (half as many shipped; with --cdc a quarter also deleted)")] = 50,
    seconds: Annotated[float, typer.Option("--seconds", min=0, help="stop writing after this long (0: at Ctrl-C)")] = 0.0,
    once: Annotated[bool, typer.Option("--once", help="stop after the first run instead of writing on")] = False,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="where PostgreSQL's data directory goes (deleted when the demo stops; default: the temp directory); as root, one the pgserver user can enter", show_default=False)] = None,
    cdc: Annotated[bool, typer.Option("--cdc", help="capture changes (postgres_cdc, wal_level=logical) into an Iceberg upsert table, run and compare it with the source each round")] = False,
    rounds: Annotated[int, typer.Option("--rounds", min=0, help="with --cdc: stop after this many rounds of changes and runs (0: at Ctrl-C)")] = 0,
    every: Annotated[float, typer.Option("--every", min=0.5, help="with --cdc: seconds of quiet between rounds (a round: changes, a run, the comparison)")] = 5.0,
) -> None:
    """Start a local PostgreSQL 16 (the pgserver wheel's, on a free 127.0.0.1 port), fill a table of orders, write a
    JDBC job file for it under --dir and run it once; then keep inserting and updating orders, so that each further run
    of the printed command extracts the row versions written since, exactly once. Needs pip install 'gobblin-py[demo]'.

    With --cdc the server runs with wal_level=logical and the job (postgres_cdc) keeps an Iceberg table equal to the
    orders by key (upsert): every --every seconds the demo inserts, updates and deletes orders, runs the job, and prints
    "equal: N rows" (or the keys that differ) from the table read back with pyiceberg against SELECT * FROM orders,
    until Ctrl-C. Needs pip install 'gobblin-py[demo,tables]'.

    Example: gobblin-py demo postgres --dir postgres-demo (or: gobblin-py demo postgres --cdc)
    """
    from gobblin_py.cli.output import fail, setup_logging
    from gobblin_py.errors import ConfigError

    setup_logging("WARNING", False)
    with stopped_like_ctrl_c("the database"):
        try:
            if cdc:
                code = _cdc_demo(directory, rows, rate, seconds, rounds, every, once, data_dir)
            else:
                try:
                    from gobblin_py.demo.postgres import DemoOptions, demo
                except ImportError as exc:
                    raise ConfigError(f"the postgres demo needs the demo extra: pip install 'gobblin-py[demo]' ({exc})") from None
                code = demo(DemoOptions(directory=directory, rows=rows, rate=rate, seconds=seconds, once=once, data_dir=data_dir))
        except GobblinError as exc:
            fail(exc)
            return
        except OSError as exc:  # the machine refused (a permission, a full disk): named, nothing about commits
            fail(ConfigError(f"the demo could not start its database: {exc.strerror or exc}"
                             + (f": {exc.filename}" if exc.filename else "")))
            return
    raise typer.Exit(code)


def _cdc_demo(directory: Path, rows: int, rate: int, seconds: float, rounds: int, every: float, once: bool,
              data_dir: Path | None) -> int:
    """`demo postgres --cdc`, its extras checked first: each missing one named with the install that brings it."""
    import importlib.util

    from gobblin_py.errors import ConfigError

    missing = [f"{module} ({extra} extra)" for module, extra in
               (("pgserver", "demo"), ("psycopg", "demo"), ("pyiceberg", "tables"), ("pyarrow", "tables"))
               if importlib.util.find_spec(module) is None]
    if missing:
        raise ConfigError(f"the postgres CDC demo needs {', '.join(missing)}: pip install 'gobblin-py[demo,tables]'")
    from gobblin_py.demo.postgres_cdc import CdcDemoOptions, demo

    return demo(CdcDemoOptions(directory=directory, rows=rows, rate=rate, seconds=seconds,
                               rounds=rounds, every=every, once=once, data_dir=data_dir))
