"""`gobblin-py run` in a terminal (a pseudo-terminal here) with real local Spark: the live display, and none of
Spark's or the JVM's own lines unless `--verbose`."""

from __future__ import annotations

import fcntl
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from support.jobs import REPO, on_spark

SPARK_LINES = [
    re.compile(r"Using incubator modules"),
    re.compile(r"Setting default log level"),
    re.compile(r"To adjust logging level"),
    re.compile(r"log4j", re.IGNORECASE),
    re.compile(r"SparkContext"),
    re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (INFO|WARN|ERROR) ", re.MULTILINE),  # Spark's own log format
    re.compile(r"^\s+at [\w$.]+\(.*\)$", re.MULTILINE),  # a Java stack trace
    re.compile(r"Exception in thread|java\.lang\.|py4j"),
]
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def run_in_terminal(args: list[str], cwd: Path, timeout: float = 300) -> tuple[int, str]:
    """The real CLI with stdin, stdout and stderr on a 120x40 pseudo-terminal; its exit code and what the terminal got."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "CI", "TERM")} | {"TERM": "xterm-256color"}
    proc = subprocess.Popen([sys.executable, "-m", "gobblin_py.cli.main", *args], cwd=cwd, env=env,
                            stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if select.select([master], [], [], 1.0)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every writer closed the terminal
                    break
                if not chunk:
                    break
                out += chunk
        else:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"`gobblin-py {' '.join(args)}` did not finish in {timeout:.0f} s:\n{out.decode(errors='replace')}")
        return proc.wait(timeout=60), out.decode(errors="replace")
    finally:
        os.close(master)


def plain(screen: str) -> str:
    """What a person reads: no colour or cursor codes, one line per redraw."""
    return re.sub(r"\r+\n?|\n", "\n", _ANSI.sub("", screen))


@pytest.mark.spark
def test_the_live_display_shows_progress_and_no_spark_lines(tmp_path: Path) -> None:
    shutil.copytree(REPO / "jobs", tmp_path / "jobs")  # the example job as a user runs it from a checkout
    code, screen = run_in_terminal(["run", "jobs/example.yaml"], tmp_path)
    text = plain(screen)
    assert code == 0, text
    assert "\x1b[2K" in screen  # the live display redraws its line (the log-line progress for pipes does not)
    assert "planned 4 work units" not in text and " INFO " not in text  # the run's log lines wait behind -v
    assert "waiting for the first task" in text
    assert re.search(r"^tasks .* 4/4 0 running, 0 failed", text, re.MULTILINE), text  # ten files packed in 4 tasks
    assert "  clicks: committed (2000 records, 5 files)" in text and "  orders: committed (998 records, 5 files)" in text
    assert re.search(r"^SUCCEEDED job example run \S+ in [\d.]+s$", text, re.MULTILINE), text
    assert "INFO gobblin_py.progress: tasks:" not in text  # not the pipe's log lines
    shown = [p.pattern for p in SPARK_LINES if p.search(text)]
    assert not shown, f"Spark/JVM lines on the terminal without --verbose ({shown}):\n{text}"


@pytest.mark.spark
def test_verbose_shows_sparks_own_lines(tmp_path: Path) -> None:
    shutil.copytree(REPO / "jobs", tmp_path / "jobs")
    on_spark(tmp_path / "jobs" / "example.yaml")  # however small the run
    code, screen = run_in_terminal(["run", "jobs/example.yaml", "--verbose"], tmp_path)
    text = plain(screen)
    assert code == 0, text
    assert "waiting for the first task" in text
    assert "Setting default log level" in text  # what the quiet run keeps off the terminal is really there to keep off
    assert [p.pattern for p in SPARK_LINES if p.search(text)], text  # and the patterns above do see it


def test_log_lines_never_land_inside_the_progress_bar(tmp_path: Path) -> None:
    """Before the fix the log wrote to stderr behind rich's back: `… 0/10 starting the executors… 0:00:002026-11-26
    … INFO … running 10 task(s) in the driver` on one line, and "planned" printed twice."""
    shutil.copytree(REPO / "jobs", tmp_path / "jobs")  # small: its tasks run in the driver, Spark never starts
    code, screen = run_in_terminal(["run", "jobs/example.yaml", "-v"], tmp_path)  # -v: the run's log lines
    lines = [line for line in plain(screen).splitlines() if line.strip()]
    assert code == 0, lines
    assert any(re.match(r"tasks\W+4/4", line) for line in lines), lines  # the bar was drawn
    assert any("running 4 task(s) in the driver" in line for line in lines)  # a log line while it was
    assert not [line for line in lines if " INFO " in line and "/10 " in line], lines
    assert sum("planned 4 work units" in line for line in lines) == 1
