"""What a task hands to the plugins it runs: who it is, and where bad records go."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from gobblin_py.api.workunit import WorkUnit


@dataclass
class TaskContext:
    """The running task: job, run, work unit, attempt and its private staging directory.

    `reject(record, reason, location)` routes a record that cannot be read or converted
    to the task's bad-record handling (error file, task failure or count) instead of dropping it.
    """

    job_name: str
    run_id: str
    workunit: WorkUnit
    attempt: int
    staging_dir: Path
    reject: Callable[[Any, str, str], None]
