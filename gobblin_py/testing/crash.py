"""The crash harness: run the real CLI in a child process, kill it with SIGKILL at a named point or a
random time, run again, and check that the output holds every expected record exactly once."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gobblin_py.crashpoints import COPY_POINTS, ENV, POINTS, WINDOW_ENV
from gobblin_py.testing.outputs import read_avro_dir, read_error_files

SIGKILLED = -signal.SIGKILL


def cli(args: list[str], cwd: Path, crash_at: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`gobblin-py ARGS` in a child process; `crash_at` makes it SIGKILL itself at that point."""
    env = {k: v for k, v in os.environ.items() if k != ENV}
    if crash_at:
        env[ENV] = crash_at
    return subprocess.run([sys.executable, "-m", "gobblin_py.cli.main", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def each_point(points: Sequence[str], check: Callable[[int, str], None], workers: int = 2) -> None:
    """`check(n, point)` for every named point, `workers` at a time: each kill at a named point is deterministic and
    each check works in directories of its own, so the children of two checks can run side by side (a 2-core machine
    then runs the harness's child processes twice as fast). Raises the failure of the first point, in order, that
    failed, naming it."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="crash-point") as pool:
        futures = [pool.submit(check, n, point) for n, point in enumerate(points)]
        failures = [(point, f.exception()) for point, f in zip(points, futures)]
    for point, exc in failures:
        if exc is not None:
            raise AssertionError(f"at {point}: {exc}") from exc


def kill_at_random(args: list[str], cwd: Path, after_s: float, window_s: float = 0.0) -> int:
    """Start `gobblin-py ARGS`, SIGKILL it `after_s` seconds later (if still running); its return code.

    `window_s` pauses the run at every crash point, so the commit path is long enough to be hit.
    """
    env = {k: v for k, v in os.environ.items() if k != ENV}
    if window_s:
        env[WINDOW_ENV] = str(window_s)
    proc = subprocess.Popen([sys.executable, "-m", "gobblin_py.cli.main", *args], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(after_s)
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    return proc.wait()


def commit_points(steps: int, copies: int = 0) -> list[str]:
    """Every named crash point, with `commit.after_step` expanded to each of `steps` steps
    and, where files are published by copy-then-verify, `commit.copy_verified` to each of `copies` copies."""
    out = [f"{point}:{n}" for point in COPY_POINTS for n in range(1, copies + 1)]
    for point in POINTS:
        if point == "commit.after_step":
            out.extend(f"{point}:{n}" for n in range(1, steps + 1))
        elif not point.startswith("recovery."):
            out.append(point)
    return out


def recovery_points() -> list[str]:
    return [p for p in POINTS if p.startswith("recovery.")]


def snapshot(output: Path) -> dict[str, Any]:
    """What a user checks: every data record (by dataset, partition and content) and every error entry, counted."""
    records: Counter[tuple[str, str, str]] = Counter()
    for rec in read_avro_dir(output):
        where = rec.pop("_file")
        dataset, _, rest = where.partition("/")
        records[(dataset, rest.rsplit("/", 1)[0], repr(sorted(rec.items())))] += 1
    errors = Counter(repr(sorted((k, Path(str(v)).name if k == "location" else str(v)) for k, v in e.items()))
                     for e in read_error_files(output))  # locations compared by file name:line
    return {"records": records, "errors": errors}


def duplicates(snap: dict[str, Any]) -> int:
    return sum(n - 1 for n in snap["records"].values() if n > 1)


def random_delay(rng: random.Random, typical_s: float) -> float:
    return rng.uniform(0.05, typical_s)


def time_to_point(args: list[str], cwd: Path, point: str) -> float:
    """Seconds from start until a run reaches `point` (it is killed there): where the commit path begins."""
    t0 = time.monotonic()
    done = cli(args, cwd, crash_at=point)
    assert done.returncode == SIGKILLED, f"{point} was never reached"
    return time.monotonic() - t0
