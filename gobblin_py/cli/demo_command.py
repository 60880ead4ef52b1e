"""`gobblin-py demo`: try-it paths that need only an install (the broker comes with the `demo` extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gobblin_py.errors import GobblinError

demo_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                       help="Try gobblin-py on local services it starts itself.\n\nExample: gobblin-py demo kafka")


@demo_app.command("kafka")
def kafka_command(
    directory: Annotated[Path, typer.Option("--dir", help="where the job file, its work directory and output go")] = Path("kafka-demo"),
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="the broker's port on 127.0.0.1 (a free one if taken)")] = 9092,
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
    try:
        code = demo(DemoOptions(directory=directory, port=port, rate=rate, seconds=seconds, once=once))
    except GobblinError as exc:
        from gobblin_py.cli.output import fail

        fail(exc)
        return
    raise typer.Exit(code)


@demo_app.command("postgres")
def postgres_command(
    directory: Annotated[Path, typer.Option("--dir", help="where the job file, its work directory and output go")] = Path("postgres-demo"),
    rows: Annotated[int, typer.Option("--rows", min=1, help="orders in the table before the first run")] = 1000,
    rate: Annotated[int, typer.Option("--rate", min=1, help="orders inserted per second after the first run (half as many shipped)")] = 50,
    seconds: Annotated[float, typer.Option("--seconds", min=0, help="stop writing after this long (0: at Ctrl-C)")] = 0.0,
    once: Annotated[bool, typer.Option("--once", help="stop after the first run instead of writing on")] = False,
) -> None:
    """Start a local PostgreSQL 16 (the pgserver wheel's, on a free 127.0.0.1 port), fill a table of orders, write a
    JDBC job file for it under --dir and run it once; then keep inserting and updating orders, so that each further run
    of the printed command extracts the row versions written since, exactly once. Needs pip install 'gobblin-py[demo]'.

    Example: gobblin-py demo postgres --dir postgres-demo
    """
    from gobblin_py.cli.output import fail, setup_logging
    from gobblin_py.errors import ConfigError

    setup_logging("WARNING", False)
    try:
        try:
            from gobblin_py.demo.postgres import DemoOptions, demo
        except ImportError as exc:
            raise ConfigError(f"the postgres demo needs the demo extra: pip install 'gobblin-py[demo]' ({exc})") from None
        code = demo(DemoOptions(directory=directory, rows=rows, rate=rate, seconds=seconds, once=once))
    except GobblinError as exc:
        fail(exc)
        return
    raise typer.Exit(code)
