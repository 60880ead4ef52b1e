"""CommitSequence: the ordered steps of one dataset of one run, a value the store saves and loads
(committed by `commit.protocol`)."""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass, field
from typing import Any

from gobblin_py.api.commit_step import CommitStep


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


class Fault(str, enum.Enum):
    """What failed a commit attempt, which decides who retries it once the dataset is quarantined."""

    ENVIRONMENT = "environment"  # a disk, a permission, a service (`errors.is_environment_fault`): runs retry it after its backoff
    REFUSED = "refused"          # a step refused (a foreign file, a lost input): only `gobblin-py recover` retries it


@dataclass
class CommitSequence:
    """Steps that publish one dataset atomically: logged first, replayed until all verify.

    `attempts`, `last_error` and `failed_step` count the failed replays, for quarantine and `inspect-commits`;
    `last_attempt` (when the last one failed) and `fault` (what failed it) say when runs attempt it next. Records
    written before those two existed lack them: no wait, and a quarantine that waits for `recover`.
    """

    job: str
    dataset: str
    run_id: str
    steps: list[CommitStep]
    created: str = field(default_factory=utc_now)
    attempts: int = 0
    last_error: str | None = None
    failed_step: int | None = None
    last_attempt: str | None = None
    fault: Fault | None = None
    meta: dict[str, Any] = field(default_factory=dict)
