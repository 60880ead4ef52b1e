"""The model-based test of MariaDB tables extracted by the `jdbc` source into Avro or Parquet files
(tests/support/world_jdbc.py), for fixed seeds and a bounded number of steps (its long soak:
`scripts/soak_world.py --world jdbc`): inserts with uneven keys, updates, deletes, runs SIGKILLed at commit points, at
random and mid-read, rows changed while a first load is in progress, a run under `commit_policy: successful` with one
slice's tasks failing, `state reset`, `recover` and `recover --abandon`, a driver paused past its lease while a second host takes the job over
(leased histories), with first loads split on the key and on the
watermark, on MariaDB and (one history) PostgreSQL; after every run that exits 0 each row with a version up to its table's committed high is published, and no
(id, ver) is ever published twice. Bounded to about a minute on two cores: its cost is its runs of the real CLI."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.world import drew

pytestmark = [pytest.mark.crash]
pytest.importorskip("pymysql")


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    """A MariaDB on a free 127.0.0.1 port, stopped and deleted after the module."""
    from jdbc_mysql.mariadb_server import INSTALL_HINT, LocalMariaDB, binaries
    from support.world_jdbc import PASSWORD_ENV

    if binaries() is None:
        pytest.skip(f"needs a MariaDB server binary (mariadbd or mysqld) and mariadb-install-db: {INSTALL_HINT}")
    saved = os.environ.get(PASSWORD_ENV)  # histories set it
    with LocalMariaDB() as maria:
        yield maria
    if saved is None:
        os.environ.pop(PASSWORD_ENV, None)
    else:
        os.environ[PASSWORD_ENV] = saved


@pytest.fixture(scope="module")
def postgres() -> Iterator[Any]:
    """A PostgreSQL on a free 127.0.0.1 port for the PostgreSQL history, stopped and deleted after the module."""
    pytest.importorskip("psycopg")
    from support.world_jdbc import PG_PASSWORD_ENV

    from gobblin_py.demo.pg_server import LocalPostgres

    saved = os.environ.get(PG_PASSWORD_ENV)  # a PostgreSQL history sets it
    with LocalPostgres() as pg:
        yield pg
    if saved is None:
        os.environ.pop(PG_PASSWORD_ENV, None)
    else:
        os.environ[PG_PASSWORD_ENV] = saved


STEPS = 12
# Histories whose steps are mostly forced (`include`), so that every rule is taken in CI at a bounded cost; their seeds
# draw the key split and the watermark split.
HISTORIES = (
    (1, ("run_killed_mid_read", "changed_mid_first_load", "update", "run_job", "run_task_fails", "state_reset",
         "run_job", "delete", "run_killed_at_point", "abandon", "recover")),
    (7, ("changed_mid_first_load", "run_killed_at_random", "update", "run_killed_at_point", "run_task_fails",
         "concurrent_runs", "produce", "state_reset", "run_killed_mid_read", "run_job", "delete")),
)
PAUSES = {1: (5,)}
"""Steps after which a history also takes `paused_past_lease` (seed 1 is leased: a second host takes its job over)."""
PG_STEPS = 8
PG_HISTORY = (13, ("changed_mid_first_load", "update", "run_killed_at_point", "delete", "run_killed_mid_read",
                   "state_reset", "run_job"))  # seed 13 draws PostgreSQL (its first loads split on the watermark)


def test_jdbc_histories_publish_every_row_up_to_the_committed_high_once(tmp_path: Path, server: Any,
                                                                        postgres: Any) -> None:
    from support.world_jdbc import JdbcHistory

    log: list[str] = []
    splits, leased = set(), set()
    for seed, include in HISTORIES:
        assert len(include) < STEPS
        history = JdbcHistory(seed, STEPS, server, include=include, pauses=PAUSES.get(seed, ()))
        leased.add(history.leased)
        splits.add(history.split)
        log += history.run(tmp_path / str(seed)).log
    seed, include = PG_HISTORY
    pg = JdbcHistory(seed, PG_STEPS, server, include=include, postgres=lambda: postgres)
    assert pg.engine == "postgres", "pick a seed that draws PostgreSQL"
    log += pg.run(tmp_path / f"pg{seed}").log
    print("\n".join(log))  # shown with -s: what the histories did
    assert splits == {"key", "watermark"}, "pick seeds that draw both first load splits"
    assert leased == {True, False}, "pick seeds that draw a leased history and a locked one"
    rules = [r"inserted \d+ row", r"updated \d+ row", r"deleted \d+ row", r"run killed mid-read: .* -> -9$",
             r"run killed: .*commit\..* -> -9$", r"run killed at random", r"run after rows changed mid-load: .* -> 0$",
             r"run, tasks of .* failing: .* -> [01]$", r"state reset: .* -> 0$", r"abandon: ", r"recover: ",
             r"concurrent runs -> ", r"oracle: committed highs \{.*\d+", r"first load of \S+ in progress: \['first\.",
             r"first load of \S+ in progress: \['done\.", r"^0 postgres tables", r"^0 mariadb tables",
             r"paused past its lease at .*woken -> 1, the lease lost"]
    drew(log, rules)
