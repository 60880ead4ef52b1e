"""`gobblin-py demo postgres --cdc` as a user runs it: a child process that starts PostgreSQL with logical decoding,
captures the orders into an Iceberg upsert table round after round, and prints "equal: N rows"; stopped by SIGINT or
SIGTERM, it ends the round in flight, prints the last comparison and leaves no PostgreSQL behind. The table read back
here with pyiceberg equals `SELECT * FROM orders` by key while the demo pauses between rounds."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support.jobs import REPO

pytestmark = pytest.mark.postgres

COLUMNS = ("id", "version", "customer", "amount", "status", "updated_at")


class Demo:
    """The demo in a child process, its stdout read line by line on a thread."""

    def __init__(self, cwd: Path, *args: str) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GOBBLIN_PY_DEFAULTS")}
        env["PYTHONPATH"] = str(REPO)  # the package only: tests/support is not importable from the child
        self.proc = subprocess.Popen([sys.executable, "-m", "gobblin_py.cli.main", "demo", "postgres", "--cdc",
                                      "--dir", "demo", *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, pattern: str, timeout: float = 240) -> re.Match[str]:
        """The first line from now on matching `pattern`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=1)
            except queue.Empty:
                continue
            if line is None:
                break
            self.lines.append(line)
            if found := re.search(pattern, line):
                return found
        self.stop(signal.SIGKILL)
        raise AssertionError(f"no line matching {pattern!r}:\n" + "\n".join(self.lines))

    def stop(self, sig: int) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=120)

    @property
    def port(self) -> int:
        return int(next(m for line in self.lines if (m := re.search(r"PostgreSQL 16 on 127\.0\.0\.1:(\d+)", line)))[1])


def postgres_on(port: int) -> list[str]:
    """The command lines of running postgres processes listening on `port`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if args and args[0].endswith(b"postgres") and f"-p {port} ".encode() in b" ".join(args) + b" ":
            found.append(b" ".join(args).decode(errors="replace"))
    return found


def table_and_source(directory: Path, port: int) -> tuple[dict[Any, tuple[Any, ...]], dict[Any, tuple[Any, ...]]]:
    """The Iceberg table read with pyiceberg, and `SELECT * FROM orders` read with psycopg, both by key."""
    import psycopg
    from pyiceberg.catalog import load_catalog

    from gobblin_py.demo.pg_server import PASSWORD, USER

    with psycopg.connect(host="127.0.0.1", port=port, user=USER, password=PASSWORD, dbname="shop") as conn:
        source = {r[0]: tuple(r) for r in conn.execute(f"SELECT {', '.join(COLUMNS)} FROM orders").fetchall()}
    catalog = load_catalog("gobblin_py", type="sql", uri=f"sqlite:///{directory / 'cdc-work' / 'iceberg' / 'catalog.db'}")
    rows = catalog.load_table("shop.orders").scan(selected_fields=COLUMNS).to_arrow().to_pylist()
    return {r["id"]: tuple(r[c] for c in COLUMNS) for r in rows}, source


def needs() -> None:
    pytest.importorskip("pgserver", reason="needs pgserver (pip install -e '.[demo]')")
    pytest.importorskip("pyiceberg", reason="needs pyiceberg (pip install -e '.[tables]')")


def test_rounds_of_changes_keep_the_table_equal_to_the_source_until_ctrl_c(tmp_path: Path) -> None:
    needs()
    started = time.monotonic()
    demo = Demo(tmp_path, "--rows", "300", "--rate", "40", "--every", "6")
    first = demo.wait_for(r"^equal: (\d+) rows")
    first_at = time.monotonic() - started
    assert int(first[1]) == 300
    demo.wait_for(r"^round 1: equal: (\d+) rows")
    table, source = table_and_source(tmp_path / "demo", demo.port)  # in the quiet pause after the round
    assert len(source) > 300 and table == source
    assert demo.stop(signal.SIGINT) == 0, "\n".join(demo.lines)
    last = demo.wait_for(r"^stopped after (\d+) rounds: equal: (\d+) rows")
    assert int(last[1]) >= 1 and int(last[2]) > 0
    assert postgres_on(demo.port) == []
    print(f"first equal line {first_at:.1f} s after start")


def test_sigterm_during_the_first_run_lets_it_finish_and_stops_the_server(tmp_path: Path) -> None:
    needs()
    demo = Demo(tmp_path, "--rows", "200")
    demo.wait_for(r"^running: ")
    assert demo.stop(signal.SIGTERM) == 0, "\n".join(demo.lines)
    demo.wait_for(r"^equal: 200 rows")
    demo.wait_for(r"^stopped after 0 rounds: equal: 200 rows")
    assert postgres_on(demo.port) == []


def test_a_second_ctrl_c_stops_at_once_and_leaves_no_server_and_no_run_behind(tmp_path: Path) -> None:
    needs()
    demo = Demo(tmp_path, "--rows", "200")
    demo.wait_for(r"^running: ")  # the first run in flight, in a session of its own
    demo.proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    assert demo.stop(signal.SIGINT) != 0, "\n".join(demo.lines)
    demo.wait_for(r"^stopped at once")
    assert postgres_on(demo.port) == []
    job = str(tmp_path / "demo" / "postgres-cdc-demo.yaml").encode()
    assert not [p for p in Path("/proc").glob("[0-9]*/cmdline") if job in _read(p)]


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def test_a_missing_extra_is_named_with_its_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from typer.testing import CliRunner

    from gobblin_py.cli.main import app

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyiceberg" else real(name, *a))
    done = CliRunner().invoke(app, ["demo", "postgres", "--cdc", "--once"])
    assert done.exit_code == 2, done.output
    assert "pyiceberg (tables extra)" in done.output and "pip install 'gobblin-py[demo,tables]'" in done.output


def test_a_directory_holding_an_earlier_cdc_demo_is_refused_before_a_server_starts(tmp_path: Path) -> None:
    from gobblin_py.demo.postgres_cdc import CdcDemoOptions, demo
    from gobblin_py.errors import ConfigError

    (tmp_path / "cdc-work").mkdir()
    with pytest.raises(ConfigError, match=r"earlier `demo postgres --cdc`.*delete .*cdc-work and .*warehouse"):
        demo(CdcDemoOptions(directory=tmp_path))
