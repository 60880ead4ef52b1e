"""The watermark keys of a table (no database): `high` extended through the `done` ranges that follow it, holes kept."""

from __future__ import annotations

from pathlib import Path

import pytest
from jdbc.jdbc_jobs import jdbc_job, read_output
from support.jobs import write_job

from gobblin_py.builtin.sources.jdbc.ranges import FirstLoad, KeyRange, Range, WatermarkKind, committed
from gobblin_py.config import load_job
from gobblin_py.errors import SourceError
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import JobRunner
from gobblin_py.state.store import StateStore

INT = WatermarkKind.INTEGER


def _done(lo, hi, planned) -> str:
    return Range(lo, hi).done_value(planned)


def test_a_run_that_fully_committed_chains_to_its_upper_bound() -> None:
    marks = {"high": 100, "done.1": _done(100, 200, 0), "done.2": _done(200, 300, 0), "done.3": _done(300, 400, 0)}
    state = committed(INT, marks, "t")
    assert (state.high, state.islands, state.holes(), state.top) == (400, {}, [], 400)


def test_a_failed_sub_range_stays_a_hole_and_its_neighbours_are_not_redone() -> None:
    marks = {"high": 100, "done.1": _done(0, 50, None), "done.2": _done(200, 300, 0), "done.3": _done(300, 400, 0)}
    state = committed(INT, marks, "t")  # done.1 is an old range below high: its slot is free again
    assert state.high == 100 and state.holes() == [Range(100, 200)] and state.top == 400
    assert sorted(state.islands) == [2, 3]
    slots = state.free_slots()
    assert [next(slots), next(slots)] == [1, 4]


def test_the_first_sub_range_of_a_first_load_failing_leaves_the_start_open() -> None:
    marks = {"done.1": _done(100, 200, None), "done.2": _done(200, 300, None)}
    state = committed(INT, marks, "t")
    assert state.high is None and state.holes() == [Range(None, 100)] and state.top == 300


def test_a_reset_below_the_planning_position_ignores_the_ranges_planned_above_it() -> None:
    marks = {"high": 50, "done.1": _done(200, 300, 100), "done.2": _done(300, 400, 100)}  # reset from 100 to 50
    state = committed(INT, marks, "t")
    assert (state.high, state.islands, state.holes(), state.top) == (50, {}, [], 50)


def test_a_value_of_another_type_names_the_key() -> None:
    with pytest.raises(SourceError, match=r"dataset t key 'high': committed watermark 'x' is not a integer value"):
        committed(INT, {"high": "x"}, "dataset t")
    with pytest.raises(SourceError, match=r"key 'done.1': 'oops' is not `\(lo, hi\] planned at high=F`"):
        committed(INT, {"done.1": "oops"}, "dataset t")


def test_commit_policy_successful_never_skips_a_failed_sub_range(tmp_path: Path, pg, db) -> None:
    """One sub-range fails (a row the writer cannot encode, bad_records FAIL); the others commit. The next run
    extracts only the failed range and the new rows: every row once."""
    with pg.connect(db) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, amount numeric(8,2), version bigint NOT NULL)")
        conn.execute("INSERT INTO t SELECT i, i, i FROM generate_series(1, 400) i")
        conn.execute("UPDATE t SET amount = 'NaN' WHERE id = 150")  # NaN has no Avro decimal
    job = jdbc_job(tmp_path, pg, db, [{"table": "public.t", "watermark_column": "version", "primary_key": "id"}])
    job["job"]["commit_policy"] = "successful"
    job["quality"] = {"bad_records": "FAIL"}
    run = lambda: JobRunner(load_job(write_job(tmp_path, job)), InProcessExecutor()).run()  # noqa: E731
    first = run()
    assert not first.succeeded
    ids = sorted(r["id"] for r in read_output(tmp_path / "output", "public.t"))
    assert ids == list(range(1, 101)) + list(range(201, 401))
    marks = StateStore(tmp_path / "work", "j").watermarks()["public.t"]
    assert marks["high"] == 100 and committed(INT, marks, "t").holes() == [Range(100, 200)]
    with pg.connect(db) as conn:
        conn.execute("UPDATE t SET amount = 150 WHERE id = 150")  # fixed, same version: still in the hole
        conn.execute("INSERT INTO t SELECT i, i, i FROM generate_series(401, 500) i")
    assert run().succeeded
    ids = sorted(r["id"] for r in read_output(tmp_path / "output", "public.t"))
    assert ids == list(range(1, 501))
    state = committed(INT, StateStore(tmp_path / "work", "j").watermarks()["public.t"], "t")
    assert (state.high, state.holes()) == (500, [])


def test_a_key_split_first_load_is_complete_only_when_its_slices_chain_over_the_whole_key() -> None:
    """`first.<n>` slices: `high` is their high once they chain from the least to the greatest key, never before; the
    slices missing are the gaps, whichever slices failed."""
    def value(lo: int | None, hi: int | None) -> str:
        return KeyRange(lo, hi).first_value("id", 50)

    partial = committed("integer", {"first.1": value(None, 10), "first.3": value(20, 30)}, "orders")
    assert partial.high is None and partial.first is not None and partial.first.high == 50
    assert partial.first.missing() == [KeyRange(10, 20), KeyRange(30, None)]
    assert list(zip(range(2), partial.first.free_slots())) == [(0, 2), (1, 4)]
    assert FirstLoad("id", 50, {}).missing() == [KeyRange(None, None)]
    assert FirstLoad("id", 50, {2: KeyRange(10, None)}).missing() == [KeyRange(None, 10)]
    whole = {"first.1": value(None, 10), "first.2": value(10, 30), "first.3": value(30, None)}
    done = committed("integer", whole, "orders")
    assert (done.high, done.first) == (50, None)
    later = committed("integer", {**whole, "high": 80}, "orders")  # an incremental run's high: the slices are history
    assert (later.high, later.first) == (80, None)


def test_slices_of_two_first_loads_or_a_bad_slice_value_fail_naming_the_key() -> None:
    mixed = {"first.1": KeyRange(None, 10).first_value("id", 50), "first.2": KeyRange(10, None).first_value("id", 60)}
    with pytest.raises(SourceError, match=r"first\.2"):
        committed("integer", mixed, "dataset orders")
    with pytest.raises(SourceError, match=r"'first\.1'.*reset the dataset"):
        committed("integer", {"first.1": "id 1 to 2"}, "dataset orders")


def test_the_missing_slices_and_the_published_ones_tile_the_key_once_whichever_were_published() -> None:
    """Random first loads (boundaries, then any subset of slices published, in any slot order, and the missing ones
    planned and published in turn): every key is in exactly one slice, and the load completes only when all are in."""
    import random

    rng = random.Random(47)
    probes = [-10**6, *range(-5, 120), 10**6]
    for _ in range(300):
        bounds = sorted(rng.sample(range(0, 100), rng.randint(0, 6)))
        edges = [None, *bounds, None]
        slices = [KeyRange(a, b) for a, b in zip(edges, edges[1:])]
        rng.shuffle(slices)
        published = {n + 1: s for n, s in enumerate(slices) if n == 0 or rng.random() < 0.5}  # none: a new plan
        marks = {f"first.{n}": s.first_value("id", 9) for n, s in published.items()}
        while True:
            state = committed("integer", marks, "t")
            if state.first is None:
                assert state.high == 9 and len(marks) >= 1
                break
            missing = state.first.missing()
            holders = [*published.values(), *missing]
            for k in probes:
                inside = [s for s in holders if (s.lo is None or k > s.lo) and (s.hi is None or k <= s.hi)]
                assert len(inside) == 1, (k, published, missing)
            slot = next(state.first.free_slots())
            assert slot not in published
            published[slot] = missing[0]
            marks[f"first.{slot}"] = missing[0].first_value("id", 9)
