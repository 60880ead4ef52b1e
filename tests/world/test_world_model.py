"""The model-based test in CI: fixed seeds, a bounded number of steps (the long soak with random seeds is
`scripts/soak_world.py`). Each history interleaves runs, SIGKILLs at commit points and at random times, recoveries,
abandons, compactions, concurrent runs and changes to the input directory, and checks after every step that the
Apache `avro` package reads every id at most once, and at the end exactly once (see tests/support/world.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.world import History

pytestmark = pytest.mark.crash
pytest.importorskip("avro")

SEEDS = (1, 2, 3)
STEPS = 14


@pytest.mark.parametrize("seed", SEEDS)
def test_a_history_of_runs_crashes_and_changes_publishes_every_id_once(tmp_path: Path, seed: int) -> None:
    world = History(seed, STEPS).run(tmp_path)
    assert world.complete, "the history produced records"
    assert len(world.log) >= STEPS // 2, world.log
