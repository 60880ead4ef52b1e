"""The model-based test's Delta world in CI (tests/support/world_delta.py), in a file of its own so that pytest-xdist's
loadfile runs it beside the other worlds: two fixed-seed histories of files → Delta with `include` forcing the rare
rules (upkeep with a vacuum, a log expiry and a retention, compaction, a kill at a commit point, `state reset`, a RESTORE by another
writer and its repair) and `pauses` a run frozen beside a second driver (seed 3 leased, seed 2 locked); the test fails
if one of them stops doing anything."""

from __future__ import annotations

from pathlib import Path

import pytest
from world.test_world_model import SECOND_HOST, STEPS, drew, run_all

pytestmark = pytest.mark.crash
pytest.importorskip("deltalake")
pytest.importorskip("duckdb")


def test_delta_histories_publish_every_id_as_often_as_owed(tmp_path: Path) -> None:
    from support.world_delta import DeltaHistory

    log = run_all([DeltaHistory(3, STEPS, include=("run_job", "compact", "maintain", "state_reset", "maintain"), pauses=(1,)),
                   DeltaHistory(2, STEPS, include=("run_job", "restore_by_another_writer", "run_killed_at_point",
                                                   "maintain", "compact", "maintain"), pauses=(1,))], tmp_path)
    drew(log, "compact", "maintain vacuumed", "maintain expired", "run killed", "state reset", "restored to version",
         "state reset after restore", "maintain removed the partitions", *SECOND_HOST)
