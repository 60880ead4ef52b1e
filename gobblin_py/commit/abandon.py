"""Abandoning a pending commit sequence (`recover --abandon`) without doubling what it published: while its
watermarks are not committed, the next run re-extracts its range, possibly grown and so under other names; the
files the sequence already published are therefore withdrawn (each only while still byte-identical to its
committable, and only one its step put there: a file found there already, an earlier commit's that a range read again
after `state reset` names again, stays, as a table may list it). A step that cannot be undone (a table commit) refuses
the abandon: recovering it is the safe way. So does a sequence whose watermarks are committed and its state step not:
dropped, the state (a table's pinned commit) would stay behind the watermarks (the upsert_delta soak found a table
refused for good that way, seed 2494881004)."""

from __future__ import annotations

from dataclasses import dataclass, field

from gobblin_py.commit.sequence import CommitSequence
from gobblin_py.commit.steps import HighWatermarkCommitStep
from gobblin_py.commit.store import CommitStepStore
from gobblin_py.errors import CommitError


@dataclass
class AbandonPlan:
    """What abandoning one dataset's sequence does: the published files it withdraws, or why it cannot."""

    dataset: str
    withdraws: list[str] = field(default_factory=list)
    watermarks_committed: bool = False
    refused: str | None = None


def plan_abandon(seq: CommitSequence) -> AbandonPlan:
    """What `abandon` would do with `seq`, touching nothing."""
    plan = AbandonPlan(seq.dataset)
    marks = [i for i, s in enumerate(seq.steps) if isinstance(s, HighWatermarkCommitStep)]
    if not marks:  # a compaction's sequence: its inputs stay published until its exchange; nothing is re-extracted
        return plan
    if all(seq.steps[i].verify() for i in marks):
        plan.watermarks_committed = True  # what it published and its watermarks agree: nothing is re-extracted
        tail = [s for s in seq.steps[marks[-1] + 1:] if not s.verify()]
        if tail:  # dropped, the state would stay behind the watermarks: a table's pinned commit, the positions' identities
            plan.refused = (f"its watermarks are committed but not its last step(s) ({'; '.join(s.describe() for s in tail)}): "
                            "dropped, the dataset's state (a table's pinned commit, the positions' identities) would stay "
                            "behind its watermarks, and the next run would refuse the table or check against the old "
                            f"identities. Run `gobblin-py recover JOB.yaml --dataset {seq.dataset}` to finish it")
        return plan
    for step in seq.steps[:marks[0]]:
        try:
            what = step.withdraw(dry_run=True)
        except CommitError as exc:
            plan.refused = (f"{exc}; abandoning would publish its records again at the next run, which re-extracts "
                            f"the range: run `gobblin-py recover JOB.yaml --dataset {seq.dataset}` to finish the commit")
            return plan
        if what is not None:
            plan.withdraws.append(what)
    return plan


def abandon(store: CommitStepStore, seq: CommitSequence) -> list[str]:
    """Withdraw what `seq` published (last first) unless its watermarks are committed, then drop its record; what
    was withdrawn. A crash in between leaves the record, and abandoning again finds less to withdraw."""
    plan = plan_abandon(seq)
    if plan.refused is not None:
        raise CommitError(plan.refused)
    done: list[str] = []
    if plan.withdraws:
        marks = next(i for i, s in enumerate(seq.steps) if isinstance(s, HighWatermarkCommitStep))
        for step in reversed(seq.steps[:marks]):
            what = step.withdraw()
            if what is not None:
                done.append(what)
    store.remove(seq.job, seq.dataset)
    return done
