"""CommitSequence: the ordered steps of one dataset of one run, a value the store saves and loads
(committed by `commit.protocol`)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from gobblin_py.api.commit_step import CommitStep


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


@dataclass
class CommitSequence:
    """Steps that publish one dataset atomically: logged first, replayed until all verify.

    `attempts`, `last_error` and `failed_step` count the failed replays, for quarantine and `inspect-commits`.
    """

    job: str
    dataset: str
    run_id: str
    steps: list[CommitStep]
    created: str = field(default_factory=utc_now)
    attempts: int = 0
    last_error: str | None = None
    failed_step: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)
