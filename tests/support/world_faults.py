"""A world rule for worlds of tables (see world.py): a run under `job.commit_policy: successful` in which some tasks of
one table fail (the job's converters led by `gobblin_py.testing.faults:FlakyConverter`, failing every attempt of the
work units whose id holds a target), so the other tables commit, and the failed one's tasks must commit all or none:
a table's snapshot chunks planned one after another, or following the truncate its stream carries, must not commit
without them. The soak found nothing here; the defect it guards against was found by reading the code (a reset
table's chunks committed without its stream's truncate: tests/cdc/test_cdc_chunked.py)."""

from __future__ import annotations

from typing import Any

import yaml

from support.world import RUN, World

FLAKY = "gobblin_py.testing.faults:FlakyConverter"


class TaskFailures:
    """The rule `run_task_fails`, for a History whose world has tables (`fail_targets`) and a `_run` that takes
    refusals and their remedies."""

    rng: Any
    seed: int

    def fail_targets(self, world: World) -> list[str]:
        """Regular expressions of the work unit ids whose tasks the rule may fail (one table's, or some of them)."""
        raise NotImplementedError

    def run_task_fails(self, world: World, step: int) -> None:
        """A run whose tasks of one target fail, under commit_policy successful: exit 0 (nothing of the target read)
        or 1; either way the next clean run is held to the oracle. While a world change waits that a run may refuse,
        a plain run instead (its refusal is judged and remedied as any run's)."""
        self_: Any = self
        targets = self.fail_targets(world)
        if self_.may_fail(world) or not targets:
            self_._run(world, step, "run", None)
            return
        target = self.rng.choice(targets)
        world.log.append(f"{step} tasks to fail: {target!r} of {targets}")
        job = self_.with_lease(world, self_.job(world))
        job["job"]["commit_policy"] = "successful"
        job["converters"] = [{"class": FLAKY, "fail_attempts": 99, "only_workunit_matching": target},
                             *job.get("converters", [])]
        path = world.root / "job.yaml"
        kept = path.read_text()
        path.write_text(yaml.safe_dump(job, sort_keys=False))
        try:
            done = self_.cli(world, RUN, step, f"run, tasks of {target!r} failing", ok=(0, 1))
        finally:
            path.write_text(kept)
        if done.returncode == 1 and "injected failure" not in done.stdout + done.stderr:
            from support.world import Violation

            raise Violation(self.seed, step, "run_task_fails", "exit 1 without the injected failure named: "
                                                               f"{(done.stdout + done.stderr)[-1200:]}")
        world.clean = done.returncode == 0
