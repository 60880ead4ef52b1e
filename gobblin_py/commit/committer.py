"""The global committer: a dataset's task results → one CommitSequence (publish, watermarks, state)."""

from __future__ import annotations

from pathlib import Path

from gobblin_py.api import CommitStep, OutputFile
from gobblin_py.commit.sequence import CommitSequence, utc_now
from gobblin_py.commit.steps import DatasetStateCommitStep, HighWatermarkCommitStep
from gobblin_py.config.model import JobSpec
from gobblin_py.errors import StateStoreError
from gobblin_py.runtime.results import WorkUnitResult
from gobblin_py.state.store import DatasetStateFile


def branch_of(job: JobSpec, dataset: str, f: OutputFile) -> int:
    """Index of the branch that wrote `f` (error files belong to the first branch's publisher)."""
    if f.kind == "data" and len(job.branches) > 1:
        for i, b in enumerate(job.branches):
            if f.rel_path.startswith(job.branch_dir(dataset, b.name) + "/"):
                return i
    return 0


def build_sequence(job: JobSpec, run_id: str, dataset: str, results: list[WorkUnitResult], state_dir: Path) -> CommitSequence:
    """Steps that publish `results` of one dataset: every file, then the watermarks, then the state."""
    by_branch: dict[int, list[OutputFile]] = {}
    for r in results:
        for f in r.files:
            by_branch.setdefault(branch_of(job, dataset, f), []).append(f)
    steps: list[CommitStep] = []
    for index in sorted(by_branch):
        publisher = job.branches[index].publisher.create()
        steps.extend(publisher.commit_steps(dataset, by_branch[index]))
    watermarks = {r.workunit.watermark_key: r.actual_high_watermark for r in results}
    steps.append(HighWatermarkCommitStep(state_dir=str(state_dir), dataset=dataset, watermarks=watermarks))
    state = {
        "committed_at": utc_now(),
        "workunits": len(results),
        "records_extracted": sum(r.records_extracted for r in results),
        "records_written": sum(r.records_written for r in results),
        "records_rejected": sum(r.records_rejected for r in results),
        "files_published": sum(1 for r in results for f in r.files if f.kind == "data"),
        "error_files_published": sum(1 for r in results for f in r.files if f.kind == "errors"),
    }
    if job.source.cls().keeps_key_stats:
        try:
            previous = DatasetStateFile(state_dir, dataset).read() or {}
        except StateStoreError:  # only planning hints: start them over; the state step rewrites the file
            previous = {}
        stats = dict(previous.get("key_stats") or {})
        for r in results:
            stats[r.workunit.watermark_key] = {"records": r.records_extracted, "seconds": round(r.duration_s, 3),
                                               "bytes": sum(b.bytes_written for b in r.branches.values())}
        state["key_stats"] = stats
    steps.append(DatasetStateCommitStep(state_dir=str(state_dir), dataset=dataset, run_id=run_id, state=state))
    return CommitSequence(job=job.name, dataset=dataset, run_id=run_id, steps=steps)
