"""The model-based test of Confluent Avro values whose schema-registry subject changes under the job
(tests/support/world_registry.py, issue 42), for fixed seeds and a bounded number of steps (its long soak:
`scripts/soak_world.py --world registry`): versions added, removed, narrowed, soft- and permanently deleted, values
under another subject, the registry down, runs killed; every value exactly once in the output files or the
dead-letter topic, and a failed run names what to do, whose remedy the world applies. In a file of its own, so that
pytest-xdist runs it beside the other worlds."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.world import drew

pytestmark = [pytest.mark.crash, pytest.mark.kafka]
pytest.importorskip("avro")
pytest.importorskip("confluent_kafka")

STEPS = 12


def test_registry_histories_put_every_value_once_in_the_output_or_the_dead_letter_topic(tmp_path: Path, broker) -> None:
    from support.world_registry import DISABLED, RegistryHistory

    log: list[str] = []
    histories = [  # seeds drawn for their policies: fail/avro (two topics), evolve/parquet, dead_letter/parquet (two topics)
        RegistryHistory(1, STEPS, broker.bootstrap, include=("remove_field", "soft_delete", "registry_down")),
        RegistryHistory(13, STEPS, broker.bootstrap,
                        include=("incompatible_version", "other_subject", "soft_delete", "permanent_delete")),
        RegistryHistory(17, STEPS, broker.bootstrap,
                        include=("incompatible_version", "soft_delete", "registry_down", "run_job", "permanent_delete")),
    ]
    assert [(h.policy, h.writer) for h in histories] == [("fail", "avro"), ("evolve", "parquet"), ("dead_letter", "parquet")]
    for history in histories:
        world = history.run(tmp_path / str(history.seed))
        assert world.expected, "the history produced values"
        log += world.log
    # each rare rule did something, and a run failed on a schema and was remedied
    rules = ("field e removed", "soft-deleted", "registry stopped", "narrowed to int|added without a default",
             "a schema under subject", "permanently deleted", r"run .* -> -9$", "remedy:",
             "said: .*cannot reach schema registry")
    if "registry_down" in DISABLED:  # see DISABLED: off until a run planning without the registry says what to do
        rules = tuple(rule for rule in rules if "registry" not in rule)
    drew(log, rules)
    print("\n".join(log))  # shown with -s: what the histories did
