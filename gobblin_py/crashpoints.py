"""Named points on the commit path where a test can make the process die with SIGKILL.

Set GOBBLIN_PY_CRASH_AT=NAME (or NAME:N to die at the N-th time the point is reached).
GOBBLIN_PY_CRASH_WINDOW_S=SECONDS makes every point pause, widening the commit path so that
kills at random times land inside it. GOBBLIN_PY_PAUSE_AT=NAME[:N] stops the process there with SIGSTOP (a driver
frozen past its lease, until the test sends SIGCONT). `POINTS` lists the commit path's points so a test can enumerate
them; `COPY_POINTS`, `BATCH_POINTS` and `FENCE_POINTS` those of a cross-filesystem copy, of a batch of records
written together and of the lease's check before each step; `TASK_POINTS` those of a task, before the commit path.
"""

from __future__ import annotations

import os
import signal
import sys
import time

ENV = "GOBBLIN_PY_CRASH_AT"
WINDOW_ENV = "GOBBLIN_PY_CRASH_WINDOW_S"
PAUSE_ENV = "GOBBLIN_PY_PAUSE_AT"

POINTS: tuple[str, ...] = (
    "commit.before_store_write",     # tasks done, nothing logged yet
    "commit.store_write_midway",     # half the commit record's bytes are in the temp file
    "commit.after_store_write",      # the record is durable, no step run
    "commit.after_step",             # after each step (N-th hit = after the N-th step)
    "commit.before_record_removal",  # every step done, record still there
    "commit.after_record_removal",   # record gone, task output not yet cleaned
    "recovery.before_commit",        # a pending record loaded at start-up, nothing replayed
)

COPY_POINTS: tuple[str, ...] = (
    "commit.copy_verified",          # copy-then-verify: the copy checked, its source not yet deleted (N-th copy)
)

BATCH_POINTS: tuple[str, ...] = (
    "commit.store_batch_midway",     # the first record of a batch of several renamed in place, the others not yet
)                                    # (reached only where a commit task holds two datasets or more)
FENCE_POINTS: tuple[str, ...] = (
    "commit.step_fenced",            # the lease checked before a step (N-th step), the step not begun: where a paused
)                                    # driver wakes inside a step after losing its lease

TASK_POINTS: tuple[str, ...] = (
    "task.before_outputs_synced",    # every work unit of a task ran, its files moved into task output but not yet
)                                    # fsynced, no result handed on (`runtime.task.attempt.run_task`)

_hits: dict[str, int] = {}


def _target(env: str = ENV) -> tuple[str, int] | None:
    spec = os.environ.get(env)
    if not spec:
        return None
    name, _, nth = spec.partition(":")
    return name, int(nth or 1)


def crash_point(name: str) -> None:
    """Die here with SIGKILL when GOBBLIN_PY_CRASH_AT names this point (and hit count)."""
    window = os.environ.get(WINDOW_ENV)
    if window:
        time.sleep(float(window))
    pause = _target(PAUSE_ENV)
    if pause is not None and pause[0] == name:
        _hits["pause " + name] = _hits.get("pause " + name, 0) + 1
        if _hits["pause " + name] == pause[1]:
            sys.stdout.flush()
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGSTOP)
    target = _target()
    if target is None or target[0] != name:
        return
    _hits[name] = _hits.get(name, 0) + 1
    if _hits[name] == target[1]:
        sys.stdout.flush()
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)
