"""The chunked snapshot's per-key filter and its kept plan (no server): which changes a stream keeps by its key's
chunk, a row moving between chunks, truncates, and a plan kept in and read from the state."""

from __future__ import annotations

import uuid

import pytest

from gobblin_py.builtin.sources.postgres_cdc.chunks import ChunkFilter, ChunkPlan
from gobblin_py.errors import SourceError

SEES_BELOW_100 = "100:100:"  # sees every transaction below 100, none from 100 on
SEES_BELOW_200 = "200:200:"


def rec(op: str, key: object) -> dict:
    return {"_op": op, "id": key}


def chunk_filter(done: list, again: bool = False) -> ChunkFilter:
    return ChunkFilter("public.t", {"key": ["id"], "bounds": [[10], [20]], "done": done, "again": again})


def test_a_change_is_kept_iff_its_chunk_is_committed_and_does_not_see_it() -> None:
    f = chunk_filter([SEES_BELOW_100, None, SEES_BELOW_200])
    assert f.keeps(rec("insert", 5), 150, "") is True  # chunk 0 committed, did not see 150
    assert f.keeps(rec("insert", 5), 50, "") is False  # chunk 0 saw it: its rows hold it
    assert f.keeps(rec("update", 15), 150, "") is False  # chunk 1 pending: its read holds it
    assert f.keeps(rec("delete", 25), 150, "") is False  # chunk 2 saw 150
    assert f.keeps(rec("delete", 25), 250, "") is True
    assert f.keeps(rec("insert", 10), 150, "") is False  # a boundary starts its chunk: 10 is in chunk 1


def test_a_row_moving_between_chunks_is_judged_by_each_key() -> None:
    """An update from key 5 (chunk 0, committed, not seeing it) to key 15 (chunk 1, pending): the delete of 5 is kept,
    the update of 15 dropped (chunk 1's read holds the row); the other way round, the reverse."""
    f = chunk_filter([SEES_BELOW_100, None, None])
    assert [f.keeps(rec("delete", 5), 150, ""), f.keeps(rec("update", 15), 150, "")] == [True, False]
    assert [f.keeps(rec("delete", 15), 150, ""), f.keeps(rec("update", 5), 150, "")] == [False, True]


def test_a_re_snapshot_keeps_deletes_of_pending_chunks() -> None:
    f = chunk_filter([None, None, None], again=True)
    assert f.keeps(rec("delete", 15), 150, "") is True
    assert f.keeps(rec("insert", 15), 150, "") is False


def test_truncates() -> None:
    assert chunk_filter([None, None, None]).keeps(rec("truncate", None), 150, "") is True
    assert chunk_filter([SEES_BELOW_100, None, SEES_BELOW_100]).keeps(rec("truncate", None), 150, "") is True
    assert chunk_filter([SEES_BELOW_200, None, None]).keeps(rec("truncate", None), 150, "") is False
    with pytest.raises(SourceError, match=r"public\.t was truncated .*state reset"):
        chunk_filter([SEES_BELOW_100, SEES_BELOW_200, None]).keeps(rec("truncate", None), 150, "at x")


def test_uuid_and_composite_keys_order_as_the_server_does() -> None:
    low, high = uuid.UUID(int=5), uuid.UUID(int=1 << 120)
    f = ChunkFilter("public.u", {"key": ["id"], "bounds": [[str(uuid.UUID(int=1 << 64))]],
                                 "done": [SEES_BELOW_100, None]})
    assert f.keeps({"_op": "insert", "id": low}, 150, "") is True
    assert f.keeps({"_op": "insert", "id": high}, 150, "") is False
    c = ChunkFilter("public.c", {"key": ["a", "b"], "bounds": [["m", 3]], "done": [SEES_BELOW_100, None]})
    assert c.keeps({"_op": "insert", "a": "m", "b": 2}, 150, "") is True
    assert c.keeps({"_op": "insert", "a": "m", "b": 3}, 150, "") is False
    assert c.keeps({"_op": "insert", "a": "Z", "b": 9}, 150, "") is True  # byte order: "Z" < "m"


def test_a_plan_round_trips_and_folds_in_committed_chunks() -> None:
    plan = ChunkPlan("p1", [["id", 23]], [[10], [20]])
    again = ChunkPlan.of_kept(plan.kept(), "public.t")
    assert again == plan and again.pending() == [0, 1, 2] and again.range(1) == ([10], [20])
    again.absorb({"lsn": 5, "chunk.0": "p1:2:7:9:", "chunk.1": "p0:1:1:2:", "chunk.2": "p1:0:3:4:"})
    assert again.done == ["3:4:", None, "7:9:"]
    with pytest.raises(SourceError, match=r"public\.t: its state's chunk plan"):
        ChunkPlan.of_kept(["chunked/0", {}], "public.t")


def test_a_transaction_no_change_of_which_is_kept_is_skipped_whole() -> None:
    """Not decoded at all (a reset table's changes of an older shape are then no error): every committed chunk sees
    it; never while a re-snapshot's pending chunks keep their deletes."""
    assert chunk_filter([None, None, None]).skips(150) is True
    assert chunk_filter([SEES_BELOW_200, None, SEES_BELOW_200]).skips(150) is True
    assert chunk_filter([SEES_BELOW_100, None, SEES_BELOW_200]).skips(150) is False
    assert chunk_filter([SEES_BELOW_200, None, None], again=True).skips(150) is False
    assert chunk_filter([SEES_BELOW_200, SEES_BELOW_200, SEES_BELOW_200], again=True).skips(150) is True
