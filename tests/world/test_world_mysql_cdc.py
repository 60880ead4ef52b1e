"""The model-based test of MariaDB tables captured from the binlog by mysql_cdc into Iceberg upsert tables (and, in a
history of its own, Delta upsert tables) (tests/support/world_mysql_cdc.py, issue 45), for fixed seeds and a bounded number of steps (its long soak:
`scripts/soak_world.py --world mysql_cdc`): DML transactions, a transaction open across a run, key updates moving rows
between snapshot chunks, TRUNCATE, binlog rotation, ALTER TABLE, a table added to the job, one taken out of it and
added back, the binlog purged, changes written as compressed binlog events, `state reset`, `recover --abandon`, a run under `commit_policy: successful`, runs
SIGKILLed at commit points and at random, and (a leased history) a driver frozen past its lease while a second host
takes the job over; after every run that exits 0 each Iceberg table equals its source table by key, and a refused run names the table and
`state reset`, which the world runs. Bounded to about a minute on two cores: its cost is its runs of the real CLI."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.world import drew

pytestmark = [pytest.mark.crash]
pytest.importorskip("pymysql")
pytest.importorskip("pymysqlreplication")
pytest.importorskip("pyiceberg")


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    """A MariaDB writing a row-based binlog on a free 127.0.0.1 port, stopped and deleted after the module."""
    from jdbc_mysql.mariadb_server import INSTALL_HINT, LocalMariaDB, binaries
    from support.world_mysql_cdc import PASSWORD_ENV

    if binaries() is None:
        pytest.skip(f"needs a MariaDB server binary (mariadbd or mysqld) and mariadb-install-db: {INSTALL_HINT}")
    saved = os.environ.get(PASSWORD_ENV)  # histories set it
    with LocalMariaDB(binlog=True) as maria:
        yield maria
    if saved is None:
        os.environ.pop(PASSWORD_ENV, None)
    else:
        os.environ[PASSWORD_ENV] = saved


@pytest.fixture(scope="module")
def catalog() -> Iterator[Callable[[], Any]]:
    """A leased history's catalog service: a PostgreSQL on a free 127.0.0.1 port, started on first use, stopped and
    deleted after the module."""
    from gobblin_py.demo.pg_server import LocalPostgres

    saved = os.environ.get("PGPASSWORD")  # a leased history sets it
    started: list[Any] = []
    with contextlib.ExitStack() as stack:
        def start() -> Any:
            if not started:
                started.append(stack.enter_context(LocalPostgres()))
            return started[0]
        yield start
    if saved is None:
        os.environ.pop("PGPASSWORD", None)
    else:
        os.environ["PGPASSWORD"] = saved


STEPS = 15
# Two histories whose steps are mostly forced (`include`: steps 1–13, step 14 drawn), so that every rule is taken once
# in CI at a bounded cost; the world changes a run must refuse are each followed by a run or the final runs.
HISTORIES = (
    # leased (seed 14): a second host, a driver frozen past its lease at step 1
    (14, True, ("run_killed_at_point", "key_update", "run_job", "truncate", "add_column", "run_job", "add_table",
               "spanning", "run_killed_at_random", "run_successful", "state_reset", "drop_column", "remove_table")),
    # failing tasks while nothing waits to be refused, then a clean run, so that the purge right after it is past
    # committed positions whatever the later draws
    (8, False, ("run_task_fails", "run_job", "purge", "run_job", "key_update", "retype", "run_killed_at_point",
                "drop_column", "abandon", "rotate", "run_successful", "run_killed_at_random", "add_table", "compress")),
)

# A short history of DML and runs alone (steps 1–6 forced): the histories above remedy so many refusals with
# `state reset` that their tables are read again by snapshots, and the oracle must also hold rows the log wrote (the
# ENUM and SET labels of a latin1 table were '' from the log alone: a soak found it, these histories did not).
STREAMED = (5, 7, ("run_job", "dml", "run_job", "key_update", "dml", "run_job"))


def test_mysql_cdc_histories_keep_each_iceberg_table_equal_to_its_source_after_every_clean_run(
        tmp_path: Path, server: Any, catalog: Callable[[], Any]) -> None:
    from support.world_mysql_cdc import MysqlCdcHistory

    log: list[str] = []
    for seed, chunked, include in HISTORIES:
        assert len(include) < STEPS  # each forced at a step of its own
        leased = MysqlCdcHistory(seed, STEPS, server).leased
        log += MysqlCdcHistory(seed, STEPS, server, include=include, chunked=chunked, pauses=(1,) if leased else (),
                               catalog=catalog).run(tmp_path / str(seed)).log
    seed, steps, include = STREAMED
    log += MysqlCdcHistory(seed, steps, server, include=include, chunked=False, catalog=catalog).run(tmp_path / "streamed").log
    print("\n".join(log))  # shown with -s: what the histories did
    # every rule did something, runs were killed, refusals were remedied and the oracle held after clean runs
    rules = [r"spanning transaction committed", r"column c\d+ added to \S+$", r"column (c\d+|s|e) dropped", r"retype: ",
             r"truncate \S+ (alone|between changes)", r"created and added to the job", r"binlog purged to", r"binlog rotated to",
             r"run killed: .* -> -9$", r"run killed at random", r"run, commit_policy successful: .* -> [01]$",
             r"oracle: .* equal", r"oracle: .* equal \([1-9]\d* written from the log\)", r"said: .*ALTER TABLE", r"said: .*(no longer holds its committed position|PURGE BINARY LOGS|keep binlogs longer)",
             r"remedy: state reset", r"state reset: .* -> 0$", r"abandon: ", r"key update on .* -> -\d+",
             r"chunked snapshots: ", r"chunked snapshot of .* goes on", r"run, tasks of .* failing: .* -> [01]$",
             r"removed from the job's tables", r"0 leased: ", r"paused past its lease",
             r"compressed binlog events: ", r"said: .*event ending at \S+, which this source cannot read"]
    drew(log, rules)


# Into Delta upsert tables (`sink="delta"`, docs/publishers/delta.md "Upsert mode"): the histories above keep their
# Iceberg sink (drawn for what they cover); these take steps 1–11 forced: DML, clean runs whose oracle holds rows
# the log wrote, a key update, a truncate, a kill at a commit point, a column added, a column retyped (refused, then
# `state reset`, whose commit replaces the table's columns) and a column dropped.
DELTA_STEPS = 12
DELTA_HISTORIES = (
    (31, False, ("dml", "run_job", "key_update", "truncate", "run_killed_at_point", "run_job", "add_column", "retype",
                 "run_job", "drop_column", "state_reset")),
)


def test_mysql_cdc_histories_into_delta_keep_each_table_equal_to_its_source_after_every_clean_run(
        tmp_path: Path, server: Any) -> None:
    pytest.importorskip("deltalake")
    from support.world_mysql_cdc import MysqlCdcHistory

    log: list[str] = []
    for seed, chunked, include in DELTA_HISTORIES:
        assert len(include) < DELTA_STEPS
        log += MysqlCdcHistory(seed, DELTA_STEPS, server, include=include, chunked=chunked, sink="delta").run(
            tmp_path / str(seed)).log
    print("\n".join(log))  # shown with -s: what the histories did
    rules = [r"into delta", r"key update on", r"truncate \S+ (alone|between changes)", r"run killed: .* -> -9$",
             r"retype: ", r"column c\d+ added to \S+$", r"column (c\d+|s|e) dropped", r"remedy: state reset",
             r"oracle: .* equal \([1-9]\d* written from the log\)"]
    drew(log, rules)
