"""Committing many datasets on the executors (the scalability section of Gobblin's exactly-once design):
each Spark task writes and executes the sequences of a group of datasets; the driver only coordinates."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gobblin_py.api.commit_step import CommitStep
from gobblin_py.commit.sequence import CommitSequence
from gobblin_py.commit.store import CommitStepStore, StepRegistry
from gobblin_py.errors import CommitError


@dataclass(frozen=True)
class CommitGroup:
    """What one executor task commits: sequences of several datasets, against the shared store."""

    work_dir: str
    step_types: tuple[type[CommitStep], ...]
    sequences: tuple[CommitSequence, ...]


def commit_group(group: CommitGroup) -> list[tuple[str, str | None]]:
    """Log and execute each sequence of the group; (dataset, error or None) for each."""
    store = CommitStepStore(Path(group.work_dir), StepRegistry(group.step_types))
    out: list[tuple[str, str | None]] = []
    for seq in group.sequences:
        try:
            store.put(seq)
            seq.commit(store)
            out.append((seq.dataset, None))
        except (CommitError, OSError) as exc:
            out.append((seq.dataset, str(exc)))
    return out


def commit_on_executors(sc: Any, work_dir: Path, step_types: tuple[type[CommitStep], ...],
                        sequences: list[CommitSequence], groups: int) -> dict[str, str | None]:
    """Spread the sequences over `groups` Spark tasks; the outcome of every dataset."""
    groups = max(1, min(groups, len(sequences)))
    parts = [tuple(sequences[i::groups]) for i in range(groups)]
    tasks = [CommitGroup(str(work_dir), step_types, part) for part in parts if part]
    results = sc.parallelize(tasks, len(tasks)).flatMap(commit_group).collect()
    return dict(results)
