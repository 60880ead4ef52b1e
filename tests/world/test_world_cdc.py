"""The model-based test of a PostgreSQL publication captured by postgres_cdc into Iceberg upsert tables (and, in a
history of its own, Delta upsert tables) (tests/support/world_cdc.py, issue 42), for fixed seeds and a bounded number of steps (its long soak:
`scripts/soak_world.py --world cdc`): DML of every kind, spanning and large transactions, TOAST values, key updates,
TRUNCATE, DDL (a column added with a DEFAULT and a column retyped among it), the publication and the slot changed
under runs that are SIGKILLed and recovered; after every run that exits 0 each Iceberg table equals its source table
by key, and a refused run names what changed and a documented remedy, which the world applies. In a file of its own,
so that pytest-xdist runs it beside the other worlds. Bounded to about a minute on two cores: its cost is its runs of
the real CLI."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.world import drew

pytestmark = [pytest.mark.crash, pytest.mark.postgres]
pytest.importorskip("pgserver")
pytest.importorskip("psycopg")
pytest.importorskip("pyiceberg")

STEPS = 13
# Two histories whose steps are mostly forced (`include`: steps 1–12, step 13 drawn), so that every rule is taken once
# in CI at a bounded cost: each step costs mostly its runs of the real CLI (≈ 1.5 s each), so the histories are few and
# the world changes that a run must refuse are each followed by a run or the final runs, which remedy them.
HISTORIES = (
    (11, False, ("toast", "run_killed_at_point", "spanning", "narrow_publish", "run_job", "recreate_slot", "run_job",
                 "add_column", "add_column_default", "key_update", "run_killed_at_random", "retype")),
    (14, False, ("large_transaction", "add_column", "truncate", "run_job", "row_filter", "run_killed_at_point",
                 "remove_table", "add_table", "drop_column", "replica_identity", "state_reset", "abandon")),
    # chunked snapshots spanning runs, under kills, key updates, truncates, a table added, a reset and failing tasks
    (21, True, ("run_killed_at_point", "key_update", "run_job", "truncate", "run_killed_at_point", "add_table",
                "spanning", "run_job", "state_reset", "run_task_fails", "run_killed_at_random", "run_job")),
)

# A short history of DML and runs alone (steps 1–6 forced, TOASTed values left unchanged among them): the histories
# above end in refusals remedied by `state reset`, so their oracle mostly holds rows a snapshot wrote (2–3 rows from
# the log in one of them); this one holds the pgoutput decode's rows.
STREAMED = (5, 7, ("run_job", "dml", "toast", "run_job", "key_update", "run_job"))

@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    """A PostgreSQL 16 with wal_level=logical on a free 127.0.0.1 port, stopped and deleted after the module."""
    from support.world_cdc import LOGICAL, PASSWORD_ENV

    from gobblin_py.demo.pg_server import LocalPostgres

    saved = {name: os.environ.get(name) for name in (PASSWORD_ENV, "PGPASSWORD")}  # histories set both
    with LocalPostgres(LOGICAL) as pg:
        yield pg
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def test_cdc_histories_keep_each_iceberg_table_equal_to_its_source_after_every_clean_run(tmp_path: Path, server: Any) -> None:
    from support.world_cdc import DISABLED, CdcHistory

    assert not DISABLED, f"rules off by default: {sorted(DISABLED)} (a rule found defective waits in KNOWN_DEFECTS)"
    log: list[str] = []
    for seed, chunked, include in HISTORIES:
        assert len(include) < STEPS  # each forced at a step of its own
        leased = CdcHistory(seed, STEPS, server).leased  # seed 14: a second host, frozen past its lease at step 1
        world = CdcHistory(seed, STEPS, server, include=include, pauses=(1,) if leased else (),
                           chunked=chunked).run(tmp_path / str(seed))
        log += world.log
    seed, steps, include = STREAMED
    streamed = CdcHistory(seed, steps, server, include=include, chunked=False).run(tmp_path / "streamed").log
    assert any(re.search(r"oracle: .* equal \([1-9]\d* written from the log\)", line) for line in streamed), streamed
    log += streamed
    # every rule did something, runs were killed, refusals were remedied and the oracle held after clean runs
    rules = [r"spanning transaction committed", r"toast: ", r"column c\d+ added to \S+$", r"DEFAULT 7$",
             r"slot .* dropped and created again", r"large transaction", r"truncate public", r"column c\d+ dropped",
             r"created and added|added back", r"run killed: .* -> -9$", r"run killed at random", r"oracle: .* equal", r"oracle: .* equal \([1-9]\d* written from the log\)",
             r"remedy: ", r"REPLICA IDENTITY (FULL|DEFAULT)$", r"state reset: .* -> 0$", r"abandon: ", r"key update on",
             r"narrowed to insert, update", r"row filter on", r"removed from pub", r"retype: ",
             r"said: .*without a change in the WAL", r"paused past its lease", r"chunked snapshots: ",
             r"chunked snapshot of .* goes on", r"run, tasks of .* failing: .* -> 1$"]
    print("\n".join(log))  # shown with -s: what the histories did
    drew(log, rules)


# Into Delta upsert tables (`sink="delta"`, docs/publishers/delta.md "Upsert mode"): the histories above keep their
# Iceberg sink (drawn for what they cover); these take steps 1–11 forced: DML, clean runs whose oracle holds rows
# the log wrote, a key update, a truncate, a kill at a commit point, a column added, `n` retyped (refused, then a
# `state reset`, whose commit replaces the table's columns) and a column dropped (kept in the table).
DELTA_STEPS = 12
DELTA_HISTORIES = (
    (31, False, ("dml", "run_job", "key_update", "truncate", "run_killed_at_point", "run_job", "add_column", "retype",
                 "run_job", "drop_column", "state_reset")),
)


def test_cdc_histories_into_delta_keep_each_table_equal_to_its_source_after_every_clean_run(tmp_path: Path,
                                                                                           server: Any) -> None:
    pytest.importorskip("deltalake")
    from support.world_cdc import CdcHistory

    log: list[str] = []
    for seed, chunked, include in DELTA_HISTORIES:
        assert len(include) < DELTA_STEPS
        log += CdcHistory(seed, DELTA_STEPS, server, include=include, chunked=chunked, sink="delta").run(
            tmp_path / str(seed)).log
    print("\n".join(log))  # shown with -s: what the histories did
    rules = [r"into delta", r"key update on", r"truncate public", r"run killed: .* -> -9$", r"retype: ",
             r"column c\d+ added to \S+$", r"column c\d+ dropped", r"remedy: state reset", r"state reset: .* -> 0$",
             r"oracle: .* equal \([1-9]\d* written from the log\)"]
    drew(log, rules)
