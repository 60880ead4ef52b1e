"""The bodies of `recover` and `inspect-commits`, kept out of the typer layer."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import typer

from gobblin_py.cli.output import err, out, setup_logging
from gobblin_py.commit import inspect as inspection
from gobblin_py.commit.confinement import Confinement
from gobblin_py.commit.guard import JobGuard
from gobblin_py.commit.recovery import Outcome
from gobblin_py.commit.recovery import recover as recover_pending
from gobblin_py.commit.store import CommitStepStore
from gobblin_py.config import load_job
from gobblin_py.config.model import JobSpec
from gobblin_py.fs.location import Location
from gobblin_py.operating.overview import commit_store
from gobblin_py.runtime.runner import new_run_id


def inspect(job_file: Path | None, work_dir: str | None, datasets: list[str] | None, as_json: bool) -> int:
    if job_file is not None:
        job = load_job(job_file)
        store = commit_store(job)
        jobs = [job.name]
    else:  # no job file: the job's directories are unknown, so records are listed unchecked (read-only)
        assert work_dir is not None
        store = CommitStepStore(Location(work_dir), confinement=Confinement.unconfined())
        jobs = store.jobs()
    views = inspection.pending(store, jobs, datasets)
    if as_json:
        print(orjson.dumps([v.to_json() for v in views], option=orjson.OPT_INDENT_2).decode())
    elif not views:
        out.print("no pending commit sequences", markup=False)
        known = [d for j in jobs for d in store.datasets(j)]
        for d in datasets or []:
            if hint := _suggestion(d, known):
                out.print(f"{d}: nothing pending{hint}", markup=False)
    else:
        for v in views:
            if v.corrupt:
                out.print(f"{v.job} / {v.dataset}: CORRUPT record {v.path}: {v.corrupt}", markup=False)
                continue
            out.print(f"{v.job} / {v.dataset}: run {v.run_id}, created {v.created}, {v.attempts} failed attempt(s)"
                      + (f", the last at {v.last_attempt} ({v.fault})" if v.last_attempt else "")
                      + (f", last error: {v.last_error}" if v.last_error else ""), markup=False)
            for s in v.steps:
                out.print(f"  {s.index:>4}  {s.status:<8} {s.type:<15} {s.description}", markup=False)
    return 3 if views else 0


def recover(job_file: Path, datasets: list[str] | None, abandon: bool, yes: bool) -> int:
    job = load_job(job_file)
    setup_logging(job.logging.level or "INFO", False)
    store = commit_store(job)
    with JobGuard(job, new_run_id(), store):
        selected = store.datasets(job.name) if datasets is None else [d for d in datasets if store.exists(job.name, d)]
        for d in datasets or []:
            if d not in selected:
                out.print(f"{d}: nothing pending{_suggestion(d, store.datasets(job.name), job)}", markup=False)
        if not selected:
            if datasets is None:
                out.print(f"job {job.name}: nothing pending", markup=False)
            return 0
        if abandon:
            return _abandon(store, job.name, selected, yes)
        report = recover_pending(store, job.name, job.job.commit_max_attempts, datasets=selected, force=True,
                                  parallelism=job.job.commit_parallelism)
        for r in report.datasets:
            line = f"{r.dataset}: {r.outcome.value}" + (f": {r.message}" if r.message else "")
            (out if r.outcome is Outcome.RECOVERED else err).print(line, markup=False)
        return 0 if not report.unfinished else 1


def _suggestion(dataset: str, pending: list[str], job: JobSpec | None = None) -> str:
    """` (did you mean 'events'?)` when a dataset with a pending record (or committed state of `job`) is close to `dataset`."""
    from gobblin_py.state.store import StateStore
    from gobblin_py.suggest import did_you_mean

    committed = StateStore(job.job.records_root, job.name).dataset_names() if job is not None else []
    hint = did_you_mean(dataset, [*pending, *committed])
    return f" ({hint})" if hint else ""


def _abandon(store: CommitStepStore, job: str, datasets: list[str], yes: bool) -> int:
    from gobblin_py.commit.abandon import abandon, plan_abandon

    views = inspection.pending(store, [job], datasets)
    plans = {}
    for v in views:
        out.print(f"abandoning {v.job} / {v.dataset} (run {v.run_id}); what is not done is lost:", markup=False)
        lost = [s for s in v.steps if s.status != "done"] if not v.corrupt else []
        for s in lost:
            out.print(f"  {s.status:<8} {s.description}", markup=False)
        if v.corrupt:
            out.print(f"  the record is corrupt: {v.corrupt}", markup=False)
            out.print("  what it may have published cannot be read from it: check the output for files of its run "
                      f"{v.run_id or ''} before the next run re-extracts its range", markup=False)
            continue
        if not lost:
            out.print("  nothing: every step is already done", markup=False)
        plan = plans[v.dataset] = plan_abandon(store.get(job, v.dataset))
        if plan.refused is not None:
            err.print(f"{v.dataset}: nothing abandoned: {plan.refused}", markup=False)
            return 1
        if plan.withdraws:
            out.print("  its watermarks were not committed, so the next run re-extracts its range; what it published "
                      "is withdrawn first, so nothing is published twice:", markup=False)
            for what in plan.withdraws:
                out.print(f"  remove {what}", markup=False)
    if not yes:
        if not sys.stdin.isatty():
            err.print("nothing abandoned: no terminal to confirm on; pass --yes once you have checked the list above", markup=False)
            return 1
        if not typer.confirm("Drop these commit sequences?", default=False):
            err.print("nothing abandoned", markup=False)
            return 1
    for v in views:
        if v.corrupt:
            store.remove(job, v.dataset)
            out.print(f"{v.dataset}: abandoned; its watermarks stay where they were, so the next run re-extracts that range", markup=False)
            continue
        withdrawn = abandon(store, store.get(job, v.dataset))
        if plans[v.dataset].watermarks_committed:
            out.print(f"{v.dataset}: abandoned; its watermarks were committed, so what it published stays and nothing "
                      "is re-extracted", markup=False)
        else:
            out.print(f"{v.dataset}: abandoned; {len(withdrawn)} published file(s) withdrawn; its watermarks stay where "
                      "they were, so the next run re-extracts that range", markup=False)
    return 0
