"""One task's attempts: `run_task(spec)` is what a Spark executor (or the in-process executor) calls.

Each attempt runs a `Pipeline` under its own attempt directory; only the files listed in the returned result are
ever published, so a failed, retried or duplicated attempt never publishes twice. The files of the task's work units
are fsynced together once the last one ran, before any result leaves the task (`committables`)."""

from __future__ import annotations

import logging
import shutil
import time
import traceback
import uuid
from pathlib import Path

from gobblin_py.api import TaskResources, WorkUnit
from gobblin_py.config.model import JobSpec
from gobblin_py.crashpoints import crash_point
from gobblin_py.durable import fsync_all
from gobblin_py.errors import UnreachableError, describe, is_retriable, os_fault
from gobblin_py.fs import Location, filesystem_for
from gobblin_py.fs import configure as configure_filesystems
from gobblin_py.runtime.task.giveups import GiveUps
from gobblin_py.runtime.task.pipeline import Pipeline
from gobblin_py.runtime.task.results import TaskStatus, WorkUnitResult
from gobblin_py.runtime.task.spec import TaskSpec


def run_task(spec: TaskSpec) -> list[WorkUnitResult]:
    """Run every WorkUnit of the task, each retried up to `job.max_task_retries` times; the files every result names
    are durable when it returns."""
    _quiet_client_logs()
    configure_filesystems(spec.job.job.filesystems)
    resources = TaskResources()  # a MultiWorkUnit's extractors share connections; closed when the task ends
    unsynced: list[list[Path]] = []  # per result, the fsyncs its files still need
    try:
        results = [_run_with_retries(spec, wu, resources, unsynced) for wu in spec.workunits]  # one list each
    finally:
        resources.close()
    return _synced(results, unsynced)


def _synced(results: list[WorkUnitResult], unsynced: list[list[Path]]) -> list[WorkUnitResult]:
    """`results` once the files each names are durable: one round of fsyncs for the whole task (concurrent fsyncs
    share the disk's cache flush). Where that round fails, each result's files are fsynced on their own, and a result
    whose fsync fails is failed, naming the file: a commit record never names a file that is not durable."""
    crash_point("task.before_outputs_synced")  # the files moved into task output, not yet durable, no result out
    try:
        fsync_all(p for paths in unsynced for p in paths)
        return results
    except OSError:
        pass
    out = []
    for result, paths in zip(results, unsynced):
        try:
            fsync_all(paths)
            out.append(result)
        except OSError as exc:
            out.append(_failed(result.workunit, [], f"task output of work unit {result.workunit.id} could not be made "
                                                    f"durable: {os_fault(exc)}", time.monotonic() - result.duration_s))
    return out


def _quiet_client_logs() -> None:
    """On an executor nobody configured logging: keep client libraries' tracebacks out of the job's output
    (a failure reaches the driver in the task result, with its message)."""
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    for http in ("httpx", "httpx2"):  # the schema registry client's requests, one INFO line each
        logging.getLogger(http).setLevel(logging.WARNING)


def attempt_dirs(job: JobSpec, run_id: str, wu: WorkUnit, attempt_id: str) -> tuple[Path, Location]:
    """(local staging, task output) directories private to one attempt of one WorkUnit of one run of one job."""
    return (job.job.job_staging / run_id / wu.id / attempt_id, job.job.job_task_output / run_id / wu.id / attempt_id)


def _run_with_retries(spec: TaskSpec, wu: WorkUnit, resources: TaskResources | None,
                      unsynced: list[list[Path]]) -> WorkUnitResult:
    """Attempts of one WorkUnit until one succeeds; a failure that would repeat (see `is_retriable`) ends them at once,
    and so does a service this task needs that a task of this run already gave up on (see `giveups`). The fsyncs the
    result's files still need are appended to `unsynced` as one list (empty for a failed WorkUnit)."""
    paths: list[Path] = []
    unsynced.append(paths)
    job = spec.job
    errors: list[str] = []
    started = time.monotonic()
    giveups = GiveUps(job.job.job_staging / spec.run_id)
    needs = _endpoints(job, wu)
    last = job.job.max_task_retries + 1
    for attempt in range(1, last + 1):
        gave_up = next((g for g in map(giveups.find, sorted(needs)) if g is not None), None)
        if gave_up is not None:
            return _failed(wu, errors, gave_up.message(len(errors)), started)
        attempt_id = f"a{attempt}-{uuid.uuid4().hex[:8]}"
        staging, output = attempt_dirs(job, spec.run_id, wu, attempt_id)
        pipeline = Pipeline(spec, wu, attempt, staging, output, resources)
        try:
            result = pipeline.run()
            paths.extend(pipeline.unsynced)  # a failed attempt's files are deleted with its directory, never synced
            result.attempts = attempt
            result.warnings[:0] = [f"attempt {i + 1} failed: {e}" for i, e in enumerate(errors)]
            result.duration_s = time.monotonic() - started
            return result
        except Exception as exc:  # noqa: BLE001 - any failure of an attempt is retried or reported
            retriable = is_retriable(exc)
            errors.append(_short_trace(exc) if retriable else str(exc))
            pipeline.abort()
            filesystem_for(output).rmtree(output)
            if isinstance(exc, UnreachableError):
                needs.add(exc.endpoint)
                if attempt == last:  # this task's budget for the service is spent: the run's is too
                    return _failed(wu, errors, giveups.give_up(exc, wu.id, attempt).own_message(), started)
            if not retriable:
                break
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return _failed(wu, errors, errors[-1], started)


def _failed(wu: WorkUnit, errors: list[str], error: str, started: float) -> WorkUnitResult:
    """The result of a WorkUnit whose attempts (`errors`, one per attempt, possibly none) all failed."""
    shown = errors[:-1] if errors and errors[-1] == error else errors
    return WorkUnitResult(workunit=wu, status=TaskStatus.FAILED, attempts=len(errors), error=error,
                          warnings=[f"attempt {i + 1} failed: {e}" for i, e in enumerate(shown)],
                          duration_s=time.monotonic() - started)


def _endpoints(job: JobSpec, wu: WorkUnit) -> set[str]:
    """The services `wu` is known to need before its first attempt, as its Source names them (the Kafka source
    names its brokers); a service an attempt fails to reach is added then."""
    return set(job.source.create().endpoints(wu))


def _short_trace(exc: BaseException) -> str:
    """A failed attempt in one line; the source line it failed at only under --verbose (debug logging), since the
    message is what the user acts on and a path inside the package tells them nothing."""
    frames = traceback.extract_tb(exc.__traceback__)
    verbose = frames and logging.getLogger(__name__).isEnabledFor(logging.DEBUG)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if verbose else ""
    return f"{describe(exc)}{where}"
