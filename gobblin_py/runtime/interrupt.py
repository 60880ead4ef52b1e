"""Ctrl-C (SIGINT) remembered, so a run sees it even where a library swallows the KeyboardInterrupt
(py4j turns one that lands mid-call into "Answer from Java side is empty", which looks like a failed Spark job)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable

_seen = threading.Event()


def install() -> None:
    """SIGINT sets the flag and raises KeyboardInterrupt as Python's default handler does; main thread only."""

    def handler(signum: int, frame: object) -> None:
        _seen.set()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)


def request() -> None:
    """Ask every run of this process to stop as after Ctrl-C (the scheduler cancelling its warm runs at shutdown)."""
    _seen.set()


def raise_if_interrupted() -> None:
    """Raise KeyboardInterrupt when SIGINT arrived: call it where a library may have swallowed one."""
    if _seen.is_set():
        raise KeyboardInterrupt


def install_graceful(stop: threading.Event, on_first: Callable[[str], None] | None = None) -> None:
    """For a continuous run: the first SIGINT or SIGTERM sets `stop` (the checkpoint in flight finishes and
    commits); a second one is Ctrl-C as `install` makes it (the run is cancelled at once, safely); main thread only."""

    def handler(signum: int, frame: object) -> None:
        if stop.is_set():
            _seen.set()
            raise KeyboardInterrupt
        stop.set()
        if on_first is not None:
            on_first(signal.Signals(signum).name)

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
