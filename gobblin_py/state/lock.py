"""The job lock (Gobblin's job.lock.enabled): one run of a job at a time on this host's work_dir.

An fcntl lock on `<work_dir>/locks/<job>.lock`: the kernel releases it when the holder dies,
so a lock left by a killed run is taken over safely; the file says who holds it.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import os
import socket
from pathlib import Path
from types import TracebackType

from gobblin_py.errors import JobLockedError


def holder_alive(work_dir: Path, job: str) -> bool | None:
    """Whether a live process holds the job's lock, read without taking it (a reader that took it, however briefly,
    could turn a starting run away): False when the lock file names no holder (released) or a process of this host
    that is gone (killed: the kernel released its lock), True when it names a live one, None for another host's."""
    try:
        text = (work_dir / "locks" / f"{job}.lock").read_text(encoding="utf-8", errors="replace").split()
    except FileNotFoundError:
        return False
    if len(text) < 4 or text[0] != "pid" or not text[1].isdigit() or text[2] != "on":
        return False if not text else None
    if text[3] != socket.gethostname():
        return None
    try:
        os.kill(int(text[1]), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class JobLock:
    """Context manager holding the job's lock; JobLockedError names the current holder."""

    def __init__(self, work_dir: Path, job: str, enabled: bool = True) -> None:
        self.path = work_dir / "locks" / f"{job}.lock"
        self.job = job
        self.enabled = enabled
        self._fd: int | None = None

    def __enter__(self) -> JobLock:
        if not self.enabled:
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip() or "unknown holder"
            os.close(fd)
            raise JobLockedError(
                f"job {self.job!r} is already running ({holder}); lock file {self.path}. "
                "Wait for that run to finish; a lock of a killed run is released automatically."
            ) from None
        now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        try:  # who holds it is a note for operators; the lock is the flock, so a full disk does not stop the run
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since {now}\n".encode(), 0)
        except OSError:
            pass
        self._fd = fd
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._fd is not None:
            try:
                os.ftruncate(self._fd, 0)
            except OSError:
                pass
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
