"""A maintenance run of a job (`gobblin-py maintain`), under the job lock like any run: recover pending commits → plan
each action (retention of file datasets here; a table publisher's own upkeep through `TableUpkeep`) against the
commits still pending → one commit sequence per action and target, logged before any step deletes anything, so a
SIGKILL anywhere leaves a record the next `maintain` or `run` completes. A dry run plans only: it takes the lock,
recovers nothing, writes nothing and lists what it would delete."""

from __future__ import annotations

import hashlib
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any

from gobblin_py.api import PendingCommit, TableUpkeep, UpkeepAction
from gobblin_py.commit.confinement import step_paths
from gobblin_py.commit.guard import JobGuard
from gobblin_py.commit.recovery import MAINTENANCE_RECORDS
from gobblin_py.commit.sequence import CommitSequence
from gobblin_py.config.model import JobSpec
from gobblin_py.errors import CorruptCommitRecordError
from gobblin_py.maintenance.options import MaintenanceOptions
from gobblin_py.maintenance.retention import plan_retention
from gobblin_py.runtime.job_result import DatasetStatus, DatasetSummary, JobResult, conclude
from gobblin_py.runtime.runner import JobRunner, new_run_id
from gobblin_py.state.store import StateStore, dataset_file_name

log = logging.getLogger(__name__)

RECORD_PREFIX = MAINTENANCE_RECORDS
"""Maintenance records are named `maintain/<action>/<target>`: never a dataset's name, so they block no dataset
(`recovery.is_maintenance`), whatever state they are in."""


@dataclass
class ActionOutcome:
    """One action's line in the report: what it deleted (or, dry, would delete), refused, or why it did nothing."""

    action: str
    target: str
    status: str
    deletions: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    message: str = ""


@dataclass
class MaintenanceReport:
    dry_run: bool
    result: JobResult | None = None
    actions: list[ActionOutcome] = field(default_factory=list)
    error: str | None = None

    @property
    def succeeded(self) -> bool:
        failed = any(a.status == "failed" for a in self.actions)
        return not failed and self.error is None and (self.result is None or self.result.succeeded)

    def to_json(self) -> dict[str, Any]:
        return {"dry_run": self.dry_run, "run_id": self.result.run_id if self.result else None, "succeeded": self.succeeded,
                "error": self.error or (self.result.error if self.result else None), "actions": [vars(a) for a in self.actions]}


LONGEST_RECORD_FILE = 200
"""Bytes: a record's file name (its name quoted, `.json`) longer than this is named by a digest of its target instead,
so that it and its temporary file stay under the 255 bytes file systems allow (a file dataset's target is the
absolute path of its directory, which may be deep)."""


def record_name(action: UpkeepAction) -> str:
    """`maintain/<action>/<target>`; for a target too long to make a file name of: its last part (as a hint) and
    a 128-bit digest of the whole target."""
    name = f"{RECORD_PREFIX}/{action.action}/{action.target}"
    if len(dataset_file_name(name)) <= LONGEST_RECORD_FILE:
        return name
    hint = re.sub(r"[^A-Za-z0-9._-]", "_", action.target.rstrip("/").rsplit("/", 1)[-1])[:60]
    return f"{RECORD_PREFIX}/{action.action}/{hint}-{hashlib.sha256(action.target.encode()).hexdigest()[:32]}"


def rounds(actions: list[UpkeepAction]) -> list[list[UpkeepAction]]:
    """`actions` in rounds committed one after another, each holding at most one action per target, in the order
    planned: the actions on one table run one after another (side by side, a Delta log expiry deleted the entries a
    retention commit on the same table had begun to read), those on different targets side by side."""
    out: list[list[UpkeepAction]] = []
    seen: dict[str, int] = {}
    for a in actions:
        n = seen[a.target] = seen.get(a.target, -1) + 1
        if n == len(out):
            out.append([])
        out[n].append(a)
    return out


def pending_commits(runner: JobRunner) -> tuple[list[PendingCommit], list[str]]:
    """The job's pending commit records, with every path each names; and the unreadable ones (what they touch is unknown)."""
    store, job = runner.store, runner.job.name
    found, corrupt = [], []
    for record in store.datasets(job):
        try:
            seq = store.get(job, record)
        except CorruptCommitRecordError as exc:
            corrupt.append(f"{record}: {exc}")
            continue
        paths = frozenset(p for s in seq.steps for p in step_paths(s))
        found.append(PendingCommit(record, tuple(seq.steps), paths))
    return found, corrupt


def plan(job: JobSpec, options: MaintenanceOptions, pending: list[PendingCommit]) -> list[UpkeepAction]:
    """Every action the options ask for, on each branch: a table publisher's own (`TableUpkeep`), else retention of the
    branch's file datasets."""
    request = options.request
    datasets = list(options.datasets) or StateStore(job.job.records_root, job.name).dataset_names()
    actions: list[UpkeepAction] = []
    for branch in job.branches:
        publisher = branch.publisher.create()
        if isinstance(publisher, TableUpkeep):
            actions.extend(publisher.upkeep(job.name, datasets, request, pending))
        elif request.retention is not None:
            actions.extend(plan_retention(job, branch, datasets, request.retention, request.now, pending))
        for what in ("expire_snapshots_older_than", "remove_orphans_older_than"):
            if getattr(request, what) is not None and not isinstance(publisher, TableUpkeep):
                actions.append(UpkeepAction(what.split("_older")[0].replace("_", "-"), f"branch {branch.name}",
                                            note=f"not supported: publisher {branch.publisher.name or branch.publisher.path} "
                                                 "keeps no snapshots (files only)"))
    return actions


class Maintainer:
    """Runs the maintenance of one job through its runner: as a run of the job (its lock, history and events), or
    between a continuous run's checkpoints, under the lock that run holds."""

    def __init__(self, runner: JobRunner) -> None:
        self.runner = runner
        self.job: JobSpec = runner.job

    def run(self, options: MaintenanceOptions, apply: bool) -> MaintenanceReport:
        """`apply`: a run of the job under its lock; else a dry run (the lock held while planning, nothing written)."""
        report = MaintenanceReport(dry_run=not apply)
        if apply:
            report.result = self.runner.held(lambda result: self.maintain(result, options, report))
            return report
        job = self.job
        with JobGuard(job, new_run_id()):
            pending, corrupt = pending_commits(self.runner)
            self._outcomes(report, self._planned(options, pending, corrupt), "planned")
        return report

    def _planned(self, options: MaintenanceOptions, pending: list[PendingCommit], corrupt: list[str]) -> list[UpkeepAction]:
        actions = plan(self.job, options, pending)
        for a in actions:  # an earlier maintenance of the same target still pending: a new record must not replace it
            if a.steps and self.runner.store.exists(self.job.name, record_name(a)):
                a.refused += [f"{d} (the earlier maintenance record {record_name(a)!r} is still pending: "
                              f"`gobblin-py recover JOB.yaml --dataset {record_name(a)}`)" for d in a.deletions]
                a.deletions, a.steps = [], []
        if corrupt:  # what an unreadable record touches is unknown: nothing is deleted
            for a in actions:
                a.refused += [f"{d} (unreadable pending record)" for d in a.deletions]
                a.deletions, a.steps = [], []
                a.note = f"refused: {len(corrupt)} pending commit record(s) cannot be read: {corrupt[0]}"
        return actions

    @staticmethod
    def _outcomes(report: MaintenanceReport, actions: list[UpkeepAction], status: str) -> None:
        for a in actions:
            report.actions.append(ActionOutcome(a.action, a.target, status if a.steps else "nothing to do",
                                                list(a.deletions), list(a.refused), a.note))

    def maintain(self, result: JobResult, options: MaintenanceOptions, report: MaintenanceReport) -> None:
        """The maintenance's body, filling `result` and `report`; the caller holds the job lock."""
        runner, run_id = self.runner, result.run_id
        t0 = time.monotonic()
        result.recovery = runner.publishing.recover()
        for rec in result.recovery.unfinished.values():
            log.warning("pending commit %s is %s: maintenance leaves alone all it needs: %s", rec.dataset,
                        rec.outcome.value, rec.message)
        runner.clean_orphans(current=run_id)
        pending, corrupt = pending_commits(runner)
        result.phases["recovery"] = time.monotonic() - t0
        actions = self._planned(options, pending, corrupt)
        t1 = time.monotonic()
        errors: dict[str, str | None] = {}
        for round_ in rounds([a for a in actions if a.steps]):
            errors.update(runner.publishing.commit(
                [CommitSequence(job=self.job.name, dataset=record_name(a), run_id=run_id, steps=list(a.steps),
                                meta={"kind": "maintenance", "action": a.action, "target": a.target}) for a in round_],
                logged=True))
        result.phases["commit"] = time.monotonic() - t1
        for a in actions:
            name = record_name(a)
            error = errors.get(name)
            status = "nothing to do" if not a.steps else "failed" if error else "done"
            report.actions.append(ActionOutcome(a.action, a.target, status, list(a.deletions), list(a.refused), error or a.note))
            runner.events.emit("MaintenanceAction", run_id=run_id, action=a.action, target=a.target, status=status,
                               deleted=a.deletions if status == "done" else [], refused=a.refused, error=error)
            if a.steps:
                result.datasets.append(DatasetSummary(name, DatasetStatus.COMMIT_FAILED if error else DatasetStatus.COMMITTED,
                                                      message=error or f"{len(a.deletions)} deleted"))
            for r in a.refused:
                log.warning("%s of %s refused: %s", a.action, a.target, r)
        runner.clean_run(run_id)
        conclude(result)
