"""The model-based test of a PostgreSQL publication captured by postgres_cdc into Iceberg upsert tables
(tests/support/world_cdc.py, issue 42), for fixed seeds and a bounded number of steps (its long soak:
`scripts/soak_world.py --world cdc`, with `--cdc-enable all` for the rules off by default): DML of every kind, spanning and
large transactions, TOAST values, TRUNCATE, DDL, the publication and the slot changed under runs that are SIGKILLed
and recovered; after every run that exits 0 each Iceberg table equals its source table by key, and a refused run
names what changed and a documented remedy, which the world applies. In a file of its own, so that pytest-xdist runs
it beside the other worlds."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.crash, pytest.mark.postgres]
pytest.importorskip("pgserver")
pytest.importorskip("psycopg")
pytest.importorskip("pyiceberg")

STEPS = 12


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    """A PostgreSQL 16 with wal_level=logical on a free 127.0.0.1 port, stopped and deleted after the module."""
    from gobblin_py.demo.pg_server import LocalPostgres
    from support.world_cdc import LOGICAL, PASSWORD_ENV

    saved = os.environ.get(PASSWORD_ENV)
    with LocalPostgres(LOGICAL) as pg:
        yield pg
    if saved is None:
        os.environ.pop(PASSWORD_ENV, None)


def test_cdc_histories_keep_each_iceberg_table_equal_to_its_source_after_every_clean_run(tmp_path: Path, server: Any) -> None:
    from support.world_cdc import DISABLED, CdcHistory

    log: list[str] = []
    histories = [
        CdcHistory(1, STEPS, server, include=("spanning", "toast", "run_killed_at_point", "add_column", "recreate_slot",
                                              "key_update")),
        CdcHistory(2, STEPS, server, include=("large_transaction", "truncate", "add_column", "drop_column", "narrow_publish",
                                              "run_killed_at_point", "row_filter", "remove_table", "add_table")),
        CdcHistory(3, STEPS, server, include=("toast", "run_job", "replica_identity", "state_reset", "abandon",
                                              "spanning", "add_column_default")),
    ]
    for history in histories:
        world = history.run(tmp_path / str(history.seed))
        log += world.log
    # each rare rule did something, runs were killed, and the oracle held after clean runs
    rules = [r"spanning transaction committed", r"toast: ", r"column c\d+ added", r"slot .* dropped and created again",
             r"large transaction", r"truncate public", r"column c\d+ dropped", r"created and added|added back",
             r"run killed: .* -> -9$", r"oracle: .* equal", r"remedy: ", r"REPLICA IDENTITY (FULL|DEFAULT)$",
             r"state reset: .* -> 0$", r"abandon: "]
    if "key_update" not in DISABLED:
        rules.append("key update on")
    if not {"narrow_publish", "row_filter", "remove_table"} & DISABLED:
        rules += ["narrowed to insert, update", "row filter on", "removed from pub"]
    if "add_column_default" not in DISABLED:
        rules.append("DEFAULT 7")
    missing = [rule for rule in rules if not any(re.search(rule, line) for line in log)]
    assert not missing, f"no history drew {missing}: pick other seeds"
    print("\n".join(log))  # shown with -s: what the histories did
