"""`gobblin-py plan`: what a run would extract now, without running or locking anything."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from gobblin_py.errors import GobblinError


def plan_command(
    job_file: Annotated[Path, typer.Argument(help="the job file (YAML)", show_default=False)],
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Show the work units a run would create now: dataset, watermark key and range, the Source's size estimate and
    the last extraction's size where known, how they pack into tasks, and whether they would run in the driver or on
    Spark. Reads the committed state only: no lock, no Spark.

    Example: gobblin-py plan jobs/example.yaml
    """
    from gobblin_py.api import MultiWorkUnit
    from gobblin_py.cli.output import fail, out
    from gobblin_py.commit.store import CommitStepStore
    from gobblin_py.config import load_job
    from gobblin_py.runtime.executors.base import in_driver_why, local_cores, plan_held_bytes, small_plan_bytes
    from gobblin_py.runtime.planning import plan
    from gobblin_py.state.store import StateStore
    from gobblin_py.units import shown

    try:
        job = load_job(job_file)
        planned = plan(job, StateStore(job.job.records_root, job.name))
        pending = CommitStepStore(job.job.records_root).datasets(job.name)
    except GobblinError as exc:
        fail(exc)
    tasks: list[dict[str, Any]] = []
    for unit in planned.units:
        members = unit.workunits if isinstance(unit, MultiWorkUnit) else (unit,)
        tasks.append({"task": unit.id, "estimated_bytes": planned.estimate(unit), "native_share": planned.native_share(unit), "workunits": [
            {"id": w.id, "dataset": w.dataset, "key": w.watermark_key, "low": w.low_watermark, "high": w.expected_high_watermark,
             "estimated_bytes": planned.estimated_bytes.get(w.id),
             "last_extraction": planned.key_stats.get(w.dataset, {}).get(w.watermark_key),
             **({"packed_keys": {k.key: [k.low, k.high] for k in w.packed_keys}} if w.packed_keys else {})}
            for w in members]})
    limit = job.spark.in_driver_limit
    slots = local_cores(job.spark.master, os.cpu_count() or 1)
    small = small_plan_bytes([plan_held_bytes([t["estimated_bytes"] for t in tasks], [t["native_share"] for t in tasks],
                                              slots)], limit)
    total = sum(t["estimated_bytes"] or 0.0 for t in tasks)
    view = {"job": job.name, "runs_in": "driver" if small is not None else job.spark.master, "tasks": tasks,
            "workunits": sum(len(t["workunits"]) for t in tasks),
            "datasets": sorted({w["dataset"] for t in tasks for w in t["workunits"]}),
            "pending_commits": pending, "input_problems": planned.input_problems,
            "unreadable_state": {d: str(e) for d, e in planned.unreadable.items()}}
    if as_json:
        print(orjson.dumps(view, option=orjson.OPT_INDENT_2).decode())
        return
    out.print(f"job {job.name}: {view['workunits']} work units in {len(tasks)} tasks over {len(view['datasets'])} datasets"
              + ("" if tasks else " (nothing to extract)"), markup=False)
    if tasks:
        out.print(f"  tasks run in the driver: {in_driver_why(small, limit, total)}" if small is not None and limit is not None
                  else f"  tasks run on Spark ({job.spark.master})", markup=False)
    for t in tasks:
        out.print(f"  task {t['task']}" + (f"  (about {shown(t['estimated_bytes'])})" if t["estimated_bytes"] is not None else ""),
                  markup=False)
        for w in t["workunits"]:
            size = w["last_extraction"]
            known = f"  (last time {size.get('records')} records, {size.get('bytes')} bytes)" if size else ""
            for key, (low, high) in w.get("packed_keys", {w["key"]: (w["low"], w["high"])}).items():  # a packed unit: each file
                out.print(f"    {w['dataset']}  {key}  {'start' if low is None else low} → {high}{known}", markup=False)
    for d in pending:
        out.print(f"  {d}: a commit is pending; the run recovers it first (see inspect-commits)", markup=False)
    for d, problems in planned.input_problems.items():
        for p in problems:
            out.print(f"  {d}: {p}", markup=False)
    for d, e in planned.unreadable.items():
        out.print(f"  {d}: not planned: {e}", markup=False)
