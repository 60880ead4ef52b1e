"""A Gobblin compaction job (MRCompactor's `compaction.*` keys, or the CompactionSource) told apart from an
ingestion job, and refused as what it is: gobblin-py compacts an ingestion job's own published output with
`gobblin-py compact JOB` and that job file's `compaction:` section, so a compaction job file is not a job it runs.
What carries over is shown as that section; everything else is named with why it does not.
"""

from __future__ import annotations

import re

from gobblin_py.config.gobblin.resolve import Setting

_COMPACTION_PACKAGES = ("org.apache.gobblin.compaction.", "gobblin.compaction.")
_PERIOD = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?$", re.IGNORECASE)  # Gobblin's period without months: 1d, 12h, 1d12h

_NOT_CARRIED = {
    "compaction.input.dir": "gobblin-py compacts the ingestion job's published datasets where they are (its final "
                            "directory), not a directory named here",
    "compaction.input.subdir": "partitions are the ingestion job's writer partitions",
    "compaction.dest.dir": "merged files replace their inputs in the same partition (exactly once, through the "
                           "commit log); there is no separate destination",
    "compaction.dest.subdir": "merged files stay in their partition",
    "compaction.tmp.dest.dir": "staging is under the ingestion job's work_dir",
    "compaction.datasets.finder": "datasets are the ingestion job's, partitions its writer's (compaction.datasets "
                                  "and compaction.partition choose among them)",
    "compaction.job.runner.class": "gobblin-py merges Avro and Parquet files itself; MRCompactorAvroKeyDedupJobRunner "
                                   "deduplicates whole records, gobblin-py by one key field (compaction.dedup.key)",
    "compaction.timebased.max.time.ago": "there is no upper age bound: every partition older than older_than is a candidate",
    "compaction.timebased.folder.pattern": "partitions are the writer's partition pattern",
    "compaction.timezone": "partitions are cut in UTC",
    "compaction.whitelist": "datasets are listed by name in compaction.datasets, not by regular expression",
    "compaction.blacklist": "datasets are listed by name in compaction.datasets, not by regular expression",
    "compaction.input.deduplicated": "deduplication is compaction.dedup (key, keep, order_by)",
    "compaction.output.deduplicated": "deduplication is compaction.dedup (key, keep, order_by)",
    "compaction.job.dedup.key": "deduplication is by one field: compaction.dedup.key",
}


def is_compaction_job(settings: dict[str, Setting]) -> bool:
    """Whether a Gobblin job file describes a compaction: `compaction.*` keys, or a compaction class anywhere."""
    return any(key.startswith("compaction.") or value.value.strip().startswith(_COMPACTION_PACKAGES)
               for key, value in settings.items())


def compaction_problems(settings: dict[str, Setting]) -> list[str]:
    """Why a compaction job file is refused: what it is, the `compaction:` settings that carry over, what does not."""
    carried: list[str] = []
    not_carried: list[str] = []
    for key, setting in settings.items():
        where = f"{key} ({setting.origin})"
        value = setting.value.strip()
        if key == "compaction.target.output.file.size" and value.isdigit():
            carried.append(f"target_size: {value}  # from {where}")
        elif key == "compaction.timebased.min.time.ago" and _seconds(value) is not None:
            carried.append(f"older_than: {_seconds(value)}  # from {where}, in seconds")
        elif key.startswith("compaction.") or value.startswith(_COMPACTION_PACKAGES) or key == "source.class":
            why = _NOT_CARRIED.get(key, "no gobblin-py compaction setting corresponds")
            not_carried.append(f"not carried over: {where}: {why}")
    first = ("a Gobblin compaction job (compaction.* keys, MRCompactor runners, TimeBasedSubDirDatasetsFinder), not "
             "an ingestion job: gobblin-py compacts an ingestion job's published output with `gobblin-py compact "
             "INGESTION_JOB` (and `gobblin-py schedule` with compaction.schedule), set in that job file's compaction: "
             "section; this file is neither run nor converted")
    section = (["what carries over, for the ingestion job's file: compaction: {" + ", ".join(c.split("  #")[0] for c in carried)
                + "} (" + "; ".join(c.split("# ", 1)[1] for c in carried) + ")"] if carried else [])
    return [first, *section, *not_carried]


def _seconds(period: str) -> int | None:
    """Seconds of a Gobblin period like `1d12h`; None for one with months or minutes, or none at all."""
    match = _PERIOD.match(period)
    if match is None or not any(match.groups()):
        return None
    days, hours = (int(g) if g else 0 for g in match.groups())
    return days * 86400 + hours * 3600
