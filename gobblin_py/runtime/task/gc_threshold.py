"""Garbage collection less often while a task runs: a task holds a batch's worth of records (a poll's Kafka
messages, a round trip's database rows) until they are written, and at Python's default young-generation threshold
(700 allocations) every batch was promoted and swept again by full collections: 13 % of a kafka-python task's CPU and
27 % of a confluent one's (scripts/bench_kafka_cpu.py). Records rarely hold reference cycles, so what is left
uncollected for longer is little; the threshold is the process's, put back when the last task in it is done."""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

GC_YOUNG_THRESHOLD = 50_000
"""Allocations between young-generation collections while a task runs (Python's default: 700)."""

_tasks = 0  # tasks running in this process: the first raises the threshold, the last puts it back
_saved: tuple[int, ...] = ()
_lock = threading.Lock()


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Raise the young-generation threshold for the block (tasks may overlap: in-process threads, a warm session)."""
    global _tasks, _saved
    with _lock:
        if _tasks == 0:
            _saved = gc.get_threshold()
            young, *older = _saved
            gc.set_threshold(max(young, GC_YOUNG_THRESHOLD), *older)
        _tasks += 1
    try:
        yield
    finally:
        with _lock:
            _tasks -= 1
            if _tasks == 0:
                gc.set_threshold(*_saved)
