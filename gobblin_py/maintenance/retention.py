"""Retention for file datasets: the whole time partitions (directories of the writer's `partition.pattern`, in UTC)
of a dataset's published directory whose time span ended longer ago than the retention, each deleted by one step of
the dataset's commit sequence; a partition a pending commit touches is refused, named."""

from __future__ import annotations

import calendar
import datetime as dt
import re
from collections import defaultdict

from gobblin_py.api import CommitStep, PendingCommit, UpkeepAction
from gobblin_py.config.model import BranchConfig, JobSpec
from gobblin_py.fs import Location, filesystem_for
from gobblin_py.fs.delete_steps import FsDeleteCommitStep, inside

_TOKENS = {"yyyy": "%Y", "MM": "%m", "dd": "%d", "HH": "%H", "mm": "%M"}
_FINEST = ("mm", "HH", "dd", "MM", "yyyy")


def _span_end(start: dt.datetime, pattern: str) -> dt.datetime:
    """When the partition that starts at `start` ends: one unit of the pattern's finest field later."""
    finest = next((t for t in _FINEST if t in pattern), "yyyy")
    if finest == "mm":
        return start + dt.timedelta(minutes=1)
    if finest == "HH":
        return start + dt.timedelta(hours=1)
    if finest == "dd":
        return start + dt.timedelta(days=1)
    if finest == "MM":
        return start + dt.timedelta(days=calendar.monthrange(start.year, start.month)[1])
    return start.replace(year=start.year + 1)


def partition_start(rel: str, pattern: str) -> dt.datetime | None:
    """The UTC start of the partition at `rel` (as many path parts as the pattern has), None when it is not one."""
    fmt = re.sub("|".join(_TOKENS), lambda m: _TOKENS[m.group(0)], pattern)
    try:
        return dt.datetime.strptime(rel, fmt).replace(tzinfo=dt.UTC)
    except ValueError:
        return None


def touched_by(directory: str, pending: list[PendingCommit]) -> PendingCommit | None:
    """The first pending commit naming `directory` or a path under it."""
    for p in pending:
        if any(path == directory or inside(path, directory) for path in p.paths):
            return p
    return None


def plan_retention(job: JobSpec, branch: BranchConfig, datasets: list[str], retention_s: float, now: float,
                   pending: list[PendingCommit]) -> list[UpkeepAction]:
    """One action per dataset of `branch` (a publisher with a `final_dir`): the partitions that ended more than
    `retention_s` before `now`, each one delete step; refused, named: those a pending commit touches."""
    final = getattr(branch.publisher.settings, "final_dir", None)
    partition = getattr(branch.writer.settings, "partition", None)
    actions = []
    for dataset in datasets:
        root = Location(str(final)) / job.branch_dir(dataset, branch.name) if final is not None else None
        action = UpkeepAction("retention", str(root) if root is not None else dataset)
        actions.append(action)
        if root is None or partition is None:
            action.note = (f"not supported: the branch's writer {branch.writer.name or branch.writer.path} writes no time "
                           "partitions (writer.partition)" if root is not None else "not supported: the publisher has no final_dir")
            continue
        depth = len(partition.pattern.strip("/").split("/"))
        by_partition: dict[str, dict[str, int]] = defaultdict(dict)
        for path, size in filesystem_for(root).find(root).items():
            parts = str(path)[len(str(root)):].strip("/").split("/")
            if len(parts) > depth:
                by_partition["/".join(parts[:depth])][str(path)] = size
        cutoff = dt.datetime.fromtimestamp(now - retention_s, dt.UTC)
        steps: list[CommitStep] = []
        for rel in sorted(by_partition):
            start = partition_start(rel, partition.pattern)
            if start is None or _span_end(start, partition.pattern) > cutoff:
                continue
            directory = str(root / rel)
            blocker = touched_by(directory, pending)
            if blocker is not None:
                action.refused.append(f"partition {rel} of {dataset}: the pending commit {blocker.record!r} touches it "
                                      f"(recover it first: `gobblin-py recover JOB.yaml --dataset {blocker.record}`)")
                continue
            files = by_partition[rel]
            steps.append(FsDeleteCommitStep(root=str(root), files=files, directory=directory,
                                            what=f"partition {rel} of dataset {dataset}"))
            action.deletions.append(f"{directory} ({len(files)} files, {sum(files.values())} bytes)")
        action.steps = steps
        if not steps and not action.refused:
            action.note = f"no partition ended before {cutoff.isoformat(timespec='seconds')}"
    return actions
