"""What an executor receives for one task: the job, the run and its WorkUnits, frozen and picklable.

Its own module so that the runner and the executors name a task without importing the record flow."""

from __future__ import annotations

from dataclasses import dataclass

from gobblin_py.api import MultiWorkUnit, WorkUnit
from gobblin_py.config.model import JobSpec


@dataclass(frozen=True)
class TaskSpec:
    """Everything an executor needs to run one task (a WorkUnit or a MultiWorkUnit)."""

    job: JobSpec
    run_id: str
    unit: WorkUnit | MultiWorkUnit
    file_suffix: str = ""  # at_least_once runs add the run id, as Gobblin's writers name files
    estimated_bytes: float | None = None  # the Source's estimate (None: unknown), to run a small plan in the driver
    native_share: float = 0.0  # of that, the share done natively, outside Python's lock (`Plan.native_share`)

    @property
    def workunits(self) -> tuple[WorkUnit, ...]:
        return self.unit.workunits if isinstance(self.unit, MultiWorkUnit) else (self.unit,)
