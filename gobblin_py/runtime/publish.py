"""A dataset's publish path, in one place: task results → the commit policy's verdict → committables per branch →
one CommitSequence (each branch's per-file steps, its global commit, the watermarks, the state) → committed
through `commit.protocol` on driver threads or the executors → the dataset's summary. Pending sequences left by
a crash are recovered the same way, before anything else runs.

FLIP-143's shape: the DataWriter is the writer, a branch's Committer gives each committable its steps, a
GlobalCommitter adds one commit step per dataset, and the watermark and state steps are the job's own global commit.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from gobblin_py.api import CommitStep, DatasetCommit, Delivery, GlobalCommitter, OutputFile
from gobblin_py.api.dead_letter import DeadLetterDelivery, DeadLetterFile
from gobblin_py.commit.distributed import commit_many, default_groups, recover_many, use_executors
from gobblin_py.commit.global_step import GlobalCommitStep
from gobblin_py.commit.recovery import DatasetRecovery, RecoveryReport
from gobblin_py.commit.sequence import CommitSequence, utc_now
from gobblin_py.commit.steps import DatasetStateCommitStep, HighWatermarkCommitStep
from gobblin_py.commit.store import CommitStepStore, StepRegistry
from gobblin_py.commit.tasks import CommitTasks, ThreadTasks
from gobblin_py.config.model import CommitPolicy, JobSpec
from gobblin_py.errors import CommitError, GobblinError, StateStoreError, os_fault
from gobblin_py.fs.publish_steps import FsRenameCommitStep
from gobblin_py.runtime.executors.base import TaskExecutor
from gobblin_py.runtime.job_result import DatasetStatus, DatasetSummary, sum_counters, watermark_summary
from gobblin_py.runtime.planning import Plan
from gobblin_py.runtime.task.results import TaskStatus, WorkUnitResult
from gobblin_py.state.identity import claimant
from gobblin_py.state.store import DatasetStateFile, StateStore, WatermarkFile, dataset_file_name

log = logging.getLogger(__name__)


def step_registry(job: JobSpec) -> StepRegistry:
    """Built-in steps plus every step class the job's source, publishers and dead-letter sink declare."""
    sinks = [job.dead_letter.cls()] if job.dead_letter is not None else []
    return StepRegistry(t for c in [job.source.cls(), *(b.publisher.cls() for b in job.branches), *sinks]
                        for t in c.step_types)


def commit_id(job: str, run_id: str, dataset: str) -> str:
    """What a GlobalCommitter tags its commit with: unique per job, run and dataset, and stable across replays."""
    return f"{job}/{run_id}/{dataset}"


def build_sequence(job: JobSpec, run_id: str, dataset: str, results: list[WorkUnitResult], state_dir: Path,
                   epoch: int | None = None) -> CommitSequence:
    """Steps that publish `results` of one dataset: per branch its files then its global commit, then the
    watermarks, the source's own steps (`Source.commit_steps`), the dead letters, then the state. A GlobalCommitter's `check` refusing the commit raises its GobblinError."""
    by_branch: dict[str, list[OutputFile]] = defaultdict(list)
    for r in results:
        for f in r.files:
            by_branch[f.branch or job.branches[0].name].append(f)
    watermarks = {key: high for r in results for key, high in r.watermarks.items()}
    try:  # what the watermark step leaves: the file's keys with this run's merged in (the lock keeps it unchanged)
        keys: int | None = len({**WatermarkFile(state_dir, dataset).read(), **watermarks})
    except StateStoreError:  # its step refuses it, naming the file
        keys = None
    previous = _previous_state(state_dir, dataset)
    last_pins = previous.get(PINNED) if isinstance(previous.get(PINNED), dict) else {}
    pins: dict[str, dict] = {}
    steps: list[CommitStep] = []
    dead_letters: list[DeadLetterFile] = []
    for branch in job.branches:
        files = by_branch.get(branch.name)
        if not files:
            continue
        publisher = branch.publisher.create()
        published = publisher.commit_steps(dataset, files)
        steps.extend(published)
        if job.dead_letter is not None:
            dead_letters += _published_errors(branch.publisher.label, files, published)
        if isinstance(publisher, GlobalCommitter):
            commit = DatasetCommit(job.name, run_id, dataset, commit_id(job.name, run_id, dataset), tuple(files), watermarks,
                                   keys, _kept(results, {}), epoch=epoch)
            publisher.check(commit)  # a commit that cannot succeed fails here, before anything is published
            pinned = publisher.pin(commit, last_pins.get(branch.name) or {})
            if pinned:
                pins[branch.name] = pinned
                commit = dataclasses.replace(commit, pinned=pinned)
            steps.append(GlobalCommitStep.of(publisher, commit))
    steps.append(HighWatermarkCommitStep(state_dir=str(state_dir), dataset=dataset, watermarks=watermarks))
    # the source's own steps, once the watermarks are committed: a position released upstream (a replication slot)
    steps.extend(job.source.create().commit_steps(dataset, [r.workunit for r in results], watermarks, str(state_dir)))
    if dead_letters and job.dead_letter is not None:  # after the watermarks: only a committed range's bad records
        mark_dir = state_dir / "dead_letter" / dataset_file_name(dataset).removesuffix(".json")
        steps.append(job.dead_letter.create().commit_step(DeadLetterDelivery(
            job.name, dataset, commit_id(job.name, run_id, dataset), tuple(dead_letters), str(mark_dir))))
    steps.append(DatasetStateCommitStep(state_dir=str(state_dir), dataset=dataset, run_id=run_id,
                                        state=_dataset_state(job, results, previous, {**last_pins, **pins})))
    return CommitSequence(job=job.name, dataset=dataset, run_id=run_id, steps=steps)


def _published_errors(publisher: str, files: list[OutputFile], steps: list[CommitStep]) -> list[DeadLetterFile]:
    """Where `steps` publish the error files among `files` (a publisher's file steps name their source and
    destination); CommitError when a publisher publishes one in a way the dead letters cannot follow."""
    destinations = {s.src: s.dst for s in steps if isinstance(s, FsRenameCommitStep)}
    out = []
    for f in files:
        if f.kind != "errors":
            continue
        if f.path not in destinations:
            raise CommitError(f"{publisher} publishes the error file {f.rel_path} by no file step, so quality.dead_letter "
                              "cannot read it after the commit; use a publisher that publishes files (fs, iceberg)")
        out.append(DeadLetterFile(destinations[f.path], f.records))
    return out


KEPT = "state."
"""A work unit prop named `state.<name>` is kept in its dataset's state at the commit (see `SourceState.kept`). A dict
value is kept per key, as watermarks are: merged into what the last commit kept under that name, so a key (a Kafka
partition) that no published work unit of this commit sets keeps its earlier value."""


def _kept(results: list[WorkUnitResult], previous: dict) -> dict:
    """What the state step keeps of the work units' `state.<name>` props, over what the last commit kept."""
    before = previous.get("source") if isinstance(previous.get("source"), dict) else {}
    kept: dict = {}
    for r in results:
        for k, v in r.workunit.props.items():
            if not k.startswith(KEPT):
                continue
            name = k[len(KEPT):]
            if isinstance(v, dict):
                base = kept.get(name, before.get(name))
                kept[name] = {**(base if isinstance(base, dict) else {}), **v}
            else:
                kept[name] = v
    return kept


PINNED = "pinned"
"""The dataset state's key for what each branch's GlobalCommitter pinned of its target at the dataset's last commit
(`GlobalCommitter.pin`), by branch name."""


def _previous_state(state_dir: Path, dataset: str) -> dict:
    """The dataset's state as its last commit left it ({} when none, or unreadable: the state step rewrites it)."""
    try:
        return DatasetStateFile(state_dir, dataset).read() or {}
    except StateStoreError:  # planning hints and identities recorded anew: the state step rewrites the file
        return {}


def _dataset_state(job: JobSpec, results: list[WorkUnitResult], previous: dict, pins: dict[str, dict]) -> dict:
    """What the state step records for the dataset: counts, what publishers pinned of their targets, and for sources
    that plan by them, per-key stats."""
    state = {
        "committed_at": utc_now(),
        "workunits": len(results),
        "records_extracted": sum(r.records_extracted for r in results),
        "records_written": sum(r.records_written for r in results),
        "records_rejected": sum(r.records_rejected for r in results),
        "files_published": sum(1 for r in results for f in r.files if f.kind == "data"),
        "error_files_published": sum(1 for r in results for f in r.files if f.kind == "errors"),
    }
    if pins:
        state[PINNED] = pins
    kept = _kept(results, previous)
    if kept:
        state["source"] = kept  # what SourceState.kept gives the next plan
    if job.source.cls().keeps_key_stats:
        stats = dict(previous.get("key_stats") or {})
        for r in results:
            stats[r.workunit.watermark_key] = {"records": r.records_extracted, "seconds": round(r.duration_s, 3),
                                               "bytes": sum(b.bytes_written for b in r.branches.values())}
        state["key_stats"] = stats
    return state


def judge(policy: CommitPolicy, dataset: str, results: list[WorkUnitResult], before: dict,
          whole: bool = False) -> tuple[DatasetSummary, list[WorkUnitResult]]:
    """The commit policy's verdict on a dataset's task results: its summary so far, and the results to publish
    (none: nothing is committed). `whole`: the source's units of a dataset commit all or none (`Source.whole_datasets`)."""
    ok = [r for r in results if r.status is TaskStatus.SUCCEEDED]
    failed = [r for r in results if r.status is not TaskStatus.SUCCEEDED]
    summary = DatasetSummary(dataset, DatasetStatus.COMMITTED, workunits=len(results),
                             records_extracted=sum(r.records_extracted for r in results),
                             records_written=sum(r.records_written for r in ok),
                             records_rejected=sum(r.records_rejected for r in ok),
                             files_published=sum(1 for r in ok for f in r.files if f.kind == "data"),
                             error_files=sum(1 for r in ok for f in r.files if f.kind == "errors"),
                             watermark=watermark_summary(before, before), counters=sum_counters(ok))
    if failed and (policy is CommitPolicy.FULL or whole):
        summary.status, summary.records_written, summary.files_published, summary.error_files = DatasetStatus.NOT_COMMITTED, 0, 0, 0
        why = "commit_policy full" if policy is CommitPolicy.FULL else "its tasks depend on each other: all or none"
        summary.message = f"{len(failed)} of {len(results)} tasks failed ({why}): {failed[0].error}"
        return summary, []
    if not ok:
        summary.status = DatasetStatus.NOT_COMMITTED
        summary.message = f"all {len(results)} tasks failed: {failed[0].error}"
        return summary, []
    if failed:
        summary.status = DatasetStatus.PARTIAL
        summary.message = f"{len(failed)} of {len(results)} tasks failed and are retried next run: {failed[0].error}"
    return summary, ok


@dataclass
class PublishPath:
    """Recovers and publishes the datasets of one job, on the executors from the job's threshold, else on
    driver threads; the one caller of `commit.distributed` in a run."""

    job: JobSpec
    executor: TaskExecutor
    store: CommitStepStore
    state: StateStore

    def claim(self, make: bool) -> None:
        """Each publisher's claim on its target for this work directory (`Committer.claim`): checked, or made (none
        under at_least_once, which accepts duplicates)."""
        if self.job.job.delivery is not Delivery.EXACTLY_ONCE:
            return
        who = claimant(self.job.job.records_root)
        for branch in self.job.branches:
            branch.publisher.create().claim(self.job.name, who, make)

    def recover(self) -> RecoveryReport:
        """Every pending sequence replayed whose backoff has passed (`job.commit_retry_backoff`; Spark started for it
        when as many datasets are pending as are committed on the executors)."""
        settings = self.job.job
        count = len(self.store.datasets(self.job.name))
        tasks = self._tasks(count, start=True)
        if tasks.master != "threads":
            log.info("recovering %d datasets on the executors", count)
        return recover_many(tasks, self.store, self.job.name,
                            settings.commit_max_attempts, groups=self._groups(tasks, count),
                            filesystems=settings.filesystems, backoff=settings.commit_retry_backoff)

    def publish(self, run_id: str, results: list[WorkUnitResult], planned: Plan,
                blocked: dict[str, DatasetRecovery]) -> list[DatasetSummary]:
        """Commit each dataset's results per the commit policy; a summary for every dataset the run saw, sorted."""
        previous = planned.previous
        by_dataset: dict[str, list[WorkUnitResult]] = defaultdict(list)
        for r in results:
            by_dataset[r.workunit.dataset].append(r)
        whole = self.job.source.cls().whole_datasets
        judged = {d: judge(self.job.job.commit_policy, d, rs, previous.get(d, {}), whole) for d, rs in by_dataset.items()}
        sequences, refused = self._sequences(run_id, {d: ok for d, (_, ok) in judged.items() if ok})
        if sequences:
            self.claim(make=True)
        errors = {**self.commit(sequences), **refused}
        summaries: dict[str, DatasetSummary] = {}
        for dataset, (summary, ok) in judged.items():
            if ok and errors.get(dataset) is not None:
                summary.status, summary.message = DatasetStatus.COMMIT_FAILED, errors[dataset]
                summary.files_published = summary.error_files = 0
            elif ok:
                summary.watermark = watermark_summary(previous.get(dataset, {}), WatermarkFile(self.state.dir, dataset).read())
            summaries[dataset] = summary
        for dataset in sorted(set(previous) | set(planned.input_problems) | set(planned.notices) | set(blocked)):
            if dataset not in summaries:
                before = previous.get(dataset)
                unlisted = planned.listed is not None and dataset not in planned.listed and dataset in previous
                summaries[dataset] = DatasetSummary(
                    dataset, DatasetStatus.BLOCKED if dataset in blocked else
                    DatasetStatus.NOT_IN_SOURCE if unlisted else DatasetStatus.NO_NEW_DATA,
                    message=blocked[dataset].message if dataset in blocked else "",
                    watermark=watermark_summary(before, before) if before is not None else "")
        for summary in summaries.values():
            summary.input_problems = planned.input_problems.get(summary.dataset, [])
            summary.notices = planned.notices.get(summary.dataset, [])
        return [summaries[d] for d in sorted(summaries)]

    def _sequences(self, run_id: str, ok: dict[str, list[WorkUnitResult]]) -> tuple[list[CommitSequence], dict[str, str]]:
        """Each dataset's sequence; the datasets a publisher's `check` refused (or a fault of the machine stopped), with
        the message (nothing logged)."""
        sequences, refused = [], {}
        for dataset, results in ok.items():
            try:
                sequences.append(build_sequence(self.job, run_id, dataset, results, self.state.dir,
                                                self.store.fence.epoch if self.store.fence is not None else None))
            except (GobblinError, OSError) as exc:  # a check refusing it, or a fault of the machine, named
                refused[dataset] = str(exc) if isinstance(exc, GobblinError) else os_fault(exc)
                log.error("dataset %s is not committed: %s", dataset, refused[dataset])
        return sequences, refused

    def commit(self, sequences: list[CommitSequence], logged: bool | None = None) -> dict[str, str | None]:
        """Every sequence committed (`at_least_once`: published without the log, on driver threads, unless `logged`
        says otherwise, as a compaction does); the error of each."""
        settings = self.job.job
        logged = settings.delivery is Delivery.EXACTLY_ONCE if logged is None else logged
        tasks = self._tasks(len(sequences), start=False) if logged else ThreadTasks(settings.commit_parallelism)
        if tasks.master != "threads":
            log.info("committing %d datasets on the executors", len(sequences))
        groups = self._groups(tasks, len(sequences)) if tasks.master != "threads" else tasks.slots
        return commit_many(tasks, self.store, sequences, groups=groups, filesystems=settings.filesystems, logged=logged)

    def _tasks(self, datasets: int, start: bool) -> CommitTasks:
        """The executors when `datasets` reach the job's threshold and they run (or may be started), else threads."""
        settings = self.job.job
        if datasets and use_executors(datasets, settings.commit_on_executors_from, self.executor.master):
            on_executors = self.executor.commit_tasks(start=start)
            if on_executors is not None:
                return on_executors
        return ThreadTasks(settings.commit_parallelism)

    @staticmethod
    def _groups(tasks: CommitTasks, datasets: int) -> int:
        """Executors: two groups per core (a slow group does not hold the rest); threads: one dataset per group (a
        commit on threads deals one group a thread instead: each group's records are written, and removed, in one
        batch, `commit.protocol.commit_batch`)."""
        return default_groups(tasks) if tasks.master != "threads" else max(1, datasets)
