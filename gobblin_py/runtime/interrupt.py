"""Ctrl-C (SIGINT) remembered, so a run sees it even where a library swallows the KeyboardInterrupt
(py4j turns one that lands mid-call into "Answer from Java side is empty", which looks like a failed Spark job)."""

from __future__ import annotations

import signal
import threading

_seen = threading.Event()


def install() -> None:
    """SIGINT sets the flag and raises KeyboardInterrupt as Python's default handler does; main thread only."""

    def handler(signum: int, frame: object) -> None:
        _seen.set()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)


def raise_if_interrupted() -> None:
    """Raise KeyboardInterrupt when SIGINT arrived: call it where a library may have swallowed one."""
    if _seen.is_set():
        raise KeyboardInterrupt
