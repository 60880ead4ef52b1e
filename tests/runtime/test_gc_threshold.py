"""A task collects garbage less often while it runs, and puts the process's threshold back after."""

from __future__ import annotations

import gc

import pytest

from gobblin_py.runtime.task.gc_threshold import GC_YOUNG_THRESHOLD, fewer_collections


def test_threshold_raised_while_reading_and_restored_after() -> None:
    before = gc.get_threshold()
    with fewer_collections():
        assert gc.get_threshold() == (max(before[0], GC_YOUNG_THRESHOLD), *before[1:])
    assert gc.get_threshold() == before


def test_overlapping_readers_restore_once_the_last_is_done() -> None:
    before = gc.get_threshold()
    first, second = fewer_collections(), fewer_collections()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)  # the first to start ends first: the second still reads
    assert gc.get_threshold()[0] == max(before[0], GC_YOUNG_THRESHOLD)
    second.__exit__(None, None, None)
    assert gc.get_threshold() == before


def test_restored_when_the_read_fails() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), fewer_collections():
        raise RuntimeError("broker gone")
    assert gc.get_threshold() == before
