"""Resolved Gobblin settings → the job document the YAML loader validates (the same sections, the same keys).

Each gobblin-py key remembers the Gobblin key it came from, so a validation problem names what the user wrote.
The mapping itself is `mapping.py`; this module applies it, a section a module (`source.py`, `converters.py`,
`outputs.py`).
"""

from __future__ import annotations

import re

from gobblin_py.config.gobblin.compaction import compaction_problems, is_compaction_job
from gobblin_py.config.gobblin.converters import converters_section, quality_section
from gobblin_py.config.gobblin.draft import Draft, Props, Translation
from gobblin_py.config.gobblin.leftovers import leftovers
from gobblin_py.config.gobblin.mapping import Role
from gobblin_py.config.gobblin.outputs import fork_section, publisher_section, writer_section
from gobblin_py.config.gobblin.resolve import Resolved
from gobblin_py.config.gobblin.source import source_section
from gobblin_py.config.model import MAX_NAME

PASSTHROUGH = "gobblin-py."


MAX_BRANCHES = 64
"""More fork branches than this is a typo, not a job: each branch is a writer and a publisher per task."""


def translate(resolved: Resolved) -> Translation:
    """The gobblin-py job document for a resolved Gobblin job; problems, warnings and unused keys alongside."""
    out = Translation(document={}, origins={}, warnings=list(resolved.warnings), problems=list(resolved.problems))
    if is_compaction_job(resolved.settings):  # refused as what it is, not for the ingestion keys it lacks
        out.problems += compaction_problems(resolved.settings)
        return out
    props = Props(resolved, out)
    draft = Draft(props, out, resolved.file.stem if resolved.file else "")
    _run(draft)
    leftovers(props, out, draft.branches)
    return out


def job_name_of(stem: str) -> str:
    """A job name from a file name: what a job name may not hold becomes `-` (`my job.conf` → `my-job`)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "-", stem).lstrip("._-")[:MAX_NAME]
    return name or "job"


def _run(d: Draft) -> None:
    """Every section in the order each reads what an earlier one decided."""
    _job(d)
    branches = d.p.integer("fork.branches") or 1
    if not 1 <= branches <= MAX_BRANCHES:
        d.p.problem("fork.branches", f"expected 1 to {MAX_BRANCHES}, got {branches}")
        branches = 1
    d.branches = branches
    converters = converters_section(d, "converter.classes", pre_fork=True)
    source_section(d)
    if converters:
        d.set("converters", converters, "converter.classes")
    quality = quality_section(d, None, "quality") if branches == 1 else {}  # forked: each branch has its own
    if quality:
        d.doc["quality"] = quality
    if branches == 1:
        if "fork.operator.class" in d.p.settings:  # Gobblin runs it with one branch too: an unsupported one is named
            d.gobblin_class("fork.operator.class", Role.FORK)
        d.doc["writer"] = writer_section(d, None, "writer", converted=False)
        d.doc["publisher"] = publisher_section(d, None, "publisher")
    else:
        fork_section(d, branches)
    _passthrough(d)


def _job(d: Draft) -> None:
    """`job:`: its name, directories, lock, retries and commit policy."""
    p = d.p
    if "job.name" in p.settings or not d.file_stem:
        d.copy("job.name", required="the job's name (its state, lock and commits are kept under it)")
    else:
        name = job_name_of(d.file_stem)
        d.set("job.name", name, "job.name")
        d.out.origins["job.name"] = "job.name, not set: named after the file"
        d.out.warnings.append(f"job.name is not set: the job is named {name!r} after its file name (its state, "
                              "lock and commits are kept under that name; set job.name to keep them when the "
                              "file is renamed)")
    for key in ("job.description", "job.schedule", "mr.job.root.dir"):
        d.copy(key)
    d.copy("writer.output.dir", convert=lambda path: d.on_fs(path, "writer.fs.uri"))
    lock = p.boolean("job.lock.enabled")
    if lock is not None:  # off (as in Gobblin's Kafka quick start) would be refused under exactly-once: kept on
        if not lock:
            p.warn("job.lock.enabled", "false is translated to job.lock: true: gobblin-py delivers exactly once, and "
                                       "without the lock two overlapping runs would publish the same records twice "
                                       "(with it, a run started while another holds it exits 1 and publishes nothing)")
        d.set("job.lock", True, "job.lock.enabled")
    retries = p.integer("task.maxretries")
    if retries is not None:
        d.set("job.max_task_retries", retries, "task.maxretries")
    policy = p.get("job.commit.policy")
    if policy is not None:
        named = {"full": "full", "commit_on_full_success": "full", "successful": "successful",
                 "commit_successful_tasks": "successful"}.get(policy.lower())
        if named is None:
            p.problem("job.commit.policy", f"{policy!r} is not supported: full (COMMIT_ON_FULL_SUCCESS) or "
                                           "successful (COMMIT_SUCCESSFUL_TASKS); partial would publish failed tasks' data")
        else:
            d.set("job.commit_policy", named, "job.commit.policy")


def _passthrough(d: Draft) -> None:
    """gobblin-py's own settings in a Gobblin file (`gobblin-py.<section>.<key>`), set as written."""
    for key in sorted(k for k in d.p.settings if k.startswith(PASSTHROUGH)):
        value = d.p.get(key)
        rest = key[len(PASSTHROUGH):]
        section, _, sub = rest.partition(".")
        if not sub or value is None:
            d.p.problem(key, f"expected {PASSTHROUGH}<section>.<key>, e.g. gobblin-py.spark.master")
            continue
        if section == "spark" and sub.startswith("conf."):
            d.doc.setdefault("spark", {}).setdefault("conf", {})[sub[5:]] = value
            d.out.origins[f"spark.conf.{sub[5:]}"] = d.p.where(key)
        else:
            d.set(rest, value, key)
