"""The commit protocol, the one place it is written: log the sequence → run each step not already done →
remove the record. The driver, the executors and recovery all call it, so every crash point is on every path."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gobblin_py.api.commit_step import CommitStep
from gobblin_py.commit.confinement import Confinement
from gobblin_py.commit.sequence import CommitSequence, Fault, utc_now
from gobblin_py.commit.store import CommitStepStore
from gobblin_py.crashpoints import crash_point
from gobblin_py.durable import fsync_dir
from gobblin_py.errors import CommitError, LeaseLostError, is_environment_fault
from gobblin_py.state.store import writing_at


class StepFailed(Exception):
    """A step of a sequence raised: which one, and why."""

    def __init__(self, index: int, cause: Exception) -> None:
        super().__init__(str(cause))
        self.index, self.cause = index, cause


def _sync(dirs: set[str]) -> None:
    for d in sorted(dirs):
        fsync_dir(Path(d))
    dirs.clear()


def apply_steps(steps: list[CommitStep], verify_first: bool, fence: Callable[[], None] | None = None) -> None:
    """The steps in order, deferred directory fsyncs done before any step that needs them durable;
    StepFailed names the step that raised. `fence` runs before each step that executes (the job's lease still held).

    Without the log (`at_least_once`), `verify_first` is False: every step simply runs.
    """
    unsynced: set[str] = set()
    for index, step in enumerate(steps):
        try:
            deferred = step.deferred_sync_dir()
            if deferred is None and unsynced:
                _sync(unsynced)  # what came before is durable before this step runs
            if not (verify_first and step.verify()):
                if fence is not None:
                    fence()
                    crash_point("commit.step_fenced")  # the lease checked, the step not begun: where a zombie wakes
                step.execute()
            if deferred is not None:  # also when verified: a crashed run may have renamed without the fsync
                unsynced.add(deferred)
        except Exception as exc:
            raise StepFailed(index, exc) from exc
        crash_point("commit.after_step")
    _sync(unsynced)


def commit_sequence(store: CommitStepStore, seq: CommitSequence) -> None:
    """Log `seq` durably in `store`, then replay it: what the driver and the executors do for a new commit."""
    crash_point("commit.before_store_write")
    store.put(seq, new=True)
    crash_point("commit.after_store_write")
    replay(store, seq)


def commit_batch(store: CommitStepStore, seqs: list[CommitSequence]) -> list[tuple[str, str | None]]:
    """`commit_sequence` for several datasets, their records written in one durable batch before any step runs and
    removed in one once their steps are done (one round of fsyncs each, not one a dataset); (dataset, error or None)
    for each, in order. Each record is its own, so a crash anywhere leaves each dataset to recovery on its own: in the
    middle of the batch's write (some records there, none acted on), after it (all there, none acted on), or between
    two datasets' steps (those done are replayed as verified, the others run). A dataset whose steps fail keeps its
    record, its attempt counted, as `replay` leaves it; LeaseLostError stops the batch, its records the holder's."""
    if len(seqs) == 1:
        try:
            commit_sequence(store, seqs[0])
            return [(seqs[0].dataset, None)]
        except (CommitError, OSError) as exc:
            return [(seqs[0].dataset, str(exc))]
    crash_point("commit.before_store_write")
    try:
        refused = store.put_many(seqs)
    except OSError as exc:  # nothing of the batch is known durable: no step runs, every dataset's commit failed
        return [(seq.dataset, f"commit of dataset {seq.dataset!r}: its commit record could not be written ({exc}); "
                              "nothing was published") for seq in seqs]
    crash_point("commit.after_store_write")
    out: list[tuple[str, str | None]] = []
    done: list[CommitSequence] = []
    for seq in seqs:
        if seq.dataset in refused:
            out.append((seq.dataset, refused[seq.dataset]))
            continue
        try:
            replay(store, seq, remove=False)
        except (CommitError, OSError) as exc:
            out.append((seq.dataset, str(exc)))
            continue
        out.append((seq.dataset, None))
        done.append(seq)
    if done:
        crash_point("commit.before_record_removal")
        try:
            store.remove_many(done[0].job, [seq.dataset for seq in done])
        except OSError as exc:
            gone = {seq.dataset: f"dataset {seq.dataset!r}: every step is done but its commit record "
                                 f"{store.where(seq.job, seq.dataset)} could not be removed ({exc}); the next run "
                                 "verifies the steps and removes it" for seq in done}
            out = [(d, gone.get(d, e)) for d, e in out]
        crash_point("commit.after_record_removal")
    return out


def replay(store: CommitStepStore, seq: CommitSequence, remove: bool = True) -> None:
    """Run each step of a logged sequence not already done, in order; then remove its record (recovery starts here;
    `remove=False`: the caller removes it, `commit_batch` with other datasets' records).

    On failure (an OSError such as a full disk included) the record stays, with the attempt counted, its time, the
    failing step and the kind of fault (`Fault`: what decides when runs attempt it again) named, unless the record itself cannot be rewritten (then the error says so); a CommitError
    names the dataset either way.
    """
    try:
        with writing_at(store.fence.epoch if store.fence is not None else None):  # state records name the epoch
            apply_steps(seq.steps, verify_first=True, fence=store.fence.check if store.fence is not None else None)
    except StepFailed as failed:
        if isinstance(failed.cause, LeaseLostError):  # the record is the lease holder's now: left as it is
            raise failed.cause from None
        seq.attempts += 1
        seq.failed_step = failed.index
        seq.last_attempt = utc_now()
        seq.fault = Fault.ENVIRONMENT if is_environment_fault(failed.cause) else Fault.REFUSED
        seq.last_error = f"step {failed.index + 1}/{len(seq.steps)} ({seq.steps[failed.index].describe()}): {failed.cause}"
        unrecorded = ""
        try:
            store.put(seq)
        except OSError as exc:
            unrecorded = f" (this attempt could not be counted in {store.where(seq.job, seq.dataset)}: {exc})"
        raise CommitError(f"commit of dataset {seq.dataset!r} failed at {seq.last_error}{unrecorded}") from failed.cause
    if not remove:
        return
    crash_point("commit.before_record_removal")
    try:
        store.remove(seq.job, seq.dataset)
    except OSError as exc:
        raise CommitError(f"dataset {seq.dataset!r}: every step is done but its commit record {store.where(seq.job, seq.dataset)} "
                          f"could not be removed ({exc}); the next run verifies the steps and removes it") from exc
    crash_point("commit.after_record_removal")


def publish_without_log(confinement: Confinement, seq: CommitSequence) -> None:
    """`at_least_once`: Gobblin's classic order, every step run (publish, then persist), no record; a step's
    failure is a CommitError with the step's own message."""
    confinement.check(seq.steps, f"commit sequence of dataset {seq.dataset!r}")
    try:
        apply_steps(seq.steps, verify_first=False)
    except StepFailed as failed:
        raise CommitError(str(failed)) from failed.cause
