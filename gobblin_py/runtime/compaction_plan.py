"""Which partitions a compaction merges: every leaf directory of Avro files under a committed dataset of the job,
filtered by dataset, partition prefix, age and file count, each one Spark task's work (`PartitionWork`)."""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from gobblin_py.builtin.avro_writer import AvroWriter
from gobblin_py.builtin.byte_sizes import parse_bytes
from gobblin_py.config.durations import parse_duration
from gobblin_py.builtin.output_names import identity_hash, workunit_id
from gobblin_py.config.model import BranchConfig, JobSpec
from gobblin_py.errors import ConfigError
from gobblin_py.fs import Location
from gobblin_py.state.store import StateStore
from gobblin_py.suggest import did_you_mean


@dataclass(frozen=True)
class DedupSpec:
    """`--dedup-key`: one record per value of `key` in each partition; `keep` the latest or the first by `order_by`
    (without it, by the order the files were written in)."""

    key: str
    keep: Literal["latest", "first"] = "latest"
    order_by: str | None = None


@dataclass(frozen=True)
class CompactionOptions:
    """What to compact, as the command line and the job file's `compaction:` section say it."""

    datasets: tuple[str, ...] = ()
    partition: str | None = None
    older_than_s: float | None = None
    target_bytes: int = 256_000_000
    min_files: int = 2
    dedup: DedupSpec | None = None


def compaction_options(job: JobSpec, *, datasets: list[str] | None = None, partition: str | None = None,
                       older_than: str | None = None, target_size: str | None = None, min_files: int | None = None,
                       dedup_key: str | None = None, keep: str | None = None, order_by: str | None = None) -> CompactionOptions:
    """The command line's options over the job file's `compaction:` section; ConfigError naming the bad option
    or a dataset the job never committed."""
    section = job.compaction
    try:
        target = parse_bytes(target_size) if target_size is not None else section.target_size
        age = parse_duration(older_than) if older_than is not None else section.older_than
    except ValueError as exc:
        raise ConfigError(f"{'--target-size' if target_size is not None and 'size' in str(exc) else '--older-than'}: {exc}") from None
    dedup = section.dedup
    if dedup_key is not None:
        spec = DedupSpec(dedup_key, keep or "latest", order_by)  # type: ignore[arg-type]
    elif keep is not None or order_by is not None:
        if dedup is None:
            raise ConfigError("--keep and --order-by go with --dedup-key FIELD")
        spec = DedupSpec(dedup.key, keep or dedup.keep, order_by or dedup.order_by)  # type: ignore[arg-type]
    else:
        spec = DedupSpec(dedup.key, dedup.keep, dedup.order_by) if dedup is not None else None
    if spec is not None and spec.keep not in ("latest", "first"):
        raise ConfigError(f"--keep: expected latest or first; got {spec.keep!r}")
    compactable_branches(job)
    known = StateStore(job.job.work_dir, job.name).dataset_names()
    for d in datasets or section.datasets:
        if d not in known:
            hint = did_you_mean(d, known)
            raise ConfigError(f"dataset {d!r} has no committed output to compact{f' ({hint})' if hint else ''}; "
                              f"the job's datasets: {', '.join(known) or 'none yet'}")
    return CompactionOptions(datasets=tuple(datasets or section.datasets), partition=partition or section.partition,
                             older_than_s=age, target_bytes=target, min_files=min_files or section.min_files, dedup=spec)


@dataclass(frozen=True)
class InputFile:
    name: str
    size: int
    mtime: float


@dataclass(frozen=True)
class PartitionWork:
    """One partition to merge (one Spark task): its files, where the merged files go, how they are written."""

    job: str
    run_id: str
    dataset: str
    final_dir: str
    rel: str
    """The partition's directory under `final_dir` (`clicks/2026/01/01`): also the name of its commit record."""
    partition: str
    """The partition under the dataset's directory (`2026/01/01`), as the compaction state records it."""
    inputs: tuple[InputFile, ...]
    codec: str
    codec_level: int | None
    target_bytes: int
    dedup: DedupSpec | None
    staging_dir: str
    task_output_dir: str

    @property
    def compaction_id(self) -> str:
        """128 bits over the partition and every input's name and size: a new set of files is a new compaction."""
        return identity_hash(self.final_dir, self.rel, *(f"{f.name}:{f.size}" for f in self.inputs))

    @property
    def stem(self) -> str:
        """The merged files' name: never an ingestion's (another identity) nor an earlier compaction's (other inputs)."""
        return workunit_id("compacted", self.final_dir, self.rel, self.compaction_id)

    @property
    def directory(self) -> Path:
        return Path(self.final_dir) / self.rel

    @property
    def staged(self) -> Path:
        """The hidden sibling the merged files are published into before the exchange (readers skip `.` names)."""
        return self.directory.parent / f".{self.directory.name}.compacted-{self.compaction_id[:16]}"

    @property
    def input_bytes(self) -> int:
        return sum(f.size for f in self.inputs)


@dataclass
class CompactionPlan:
    """The partitions to merge, and those left alone with why."""

    works: list[PartitionWork] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


def _hidden(name: str) -> bool:
    return name.startswith((".", "_"))


def _leaf_partitions(root: Path) -> list[tuple[str, list[os.DirEntry[str]], list[str]]]:
    """(partition under `root`, its files, the other entries in the way) of every directory holding files,
    skipping hidden and `_` entries (`_errors`, a compaction's staging)."""
    found = []
    stack = [root]
    while stack:
        d = stack.pop()
        try:
            everything = list(os.scandir(d))
        except (FileNotFoundError, NotADirectoryError):
            continue
        entries = [e for e in everything if not _hidden(e.name)]
        files = [e for e in entries if e.is_file(follow_symlinks=False) and e.name.endswith(".avro")]
        others = [e.name for e in everything if e not in files and (e in entries or e.is_dir(follow_symlinks=False))]
        dirs = [e for e in entries if e.is_dir(follow_symlinks=False)]
        if files:
            found.append((d.relative_to(root).as_posix() if d != root else "", files, others))
        else:
            stack.extend(Path(e.path) for e in sorted(dirs, key=lambda e: e.name, reverse=True))
    return sorted(found, key=lambda f: f[0])


def _under(partition: str, prefix: str | None) -> bool:
    if not prefix:
        return True
    prefix = prefix.strip("/")
    return partition == prefix or partition.startswith(prefix + "/")


def compactable_branches(job: JobSpec) -> list[tuple[BranchConfig, str]]:
    """Each branch with its local final directory; ConfigError for a branch whose writer is not Avro or whose output is
    not on a local (or mounted) filesystem, and for a job without its lock (the lock keeps compaction and ingestion apart)."""
    if not job.job.lock:
        raise ConfigError("job.lock: compaction needs the job lock (job.lock: true): it keeps a compaction and the job's "
                          "runs from publishing into one partition at once")
    out = []
    for branch in job.branches:
        if not issubclass(branch.writer.cls(), AvroWriter):
            raise ConfigError(f"{branch.writer.key}: compaction merges Avro files; this branch's writer is {branch.writer.name or branch.writer.path}")
        final = getattr(branch.publisher.settings, "final_dir", None)
        if final is None or not Location(str(final)).is_local:
            raise ConfigError(f"{branch.publisher.key}: compaction needs a publisher with a final_dir on a local or mounted "
                              f"filesystem (it exchanges partition directories atomically); got {final}")
        out.append((branch, str(Location(str(final)).path)))
    return out


def plan_compaction(job: JobSpec, options: CompactionOptions, run_id: str, blocked: set[str]) -> CompactionPlan:
    """The partitions of the job's committed datasets to merge now, and those left alone with why."""
    datasets = list(options.datasets) or StateStore(job.job.work_dir, job.name).dataset_names()
    plan = CompactionPlan()
    now = time.time()
    for branch, final_dir in compactable_branches(job):
        ws = branch.writer.settings
        for dataset in datasets:
            base = job.branch_dir(dataset, branch.name)
            for partition, files, others in _leaf_partitions(Path(final_dir) / base):
                rel = f"{base}/{partition}" if partition else base
                if not _under(partition, options.partition):
                    continue
                if rel in blocked or dataset in blocked:
                    plan.skipped[rel] = "a pending commit of it could not be recovered (see `gobblin-py inspect-commits`)"
                    continue
                if others:
                    plan.skipped[rel] = f"it holds {', '.join(sorted(others)[:3])} beside its Avro files"
                    continue
                inputs = tuple(sorted((InputFile(e.name, e.stat().st_size, e.stat().st_mtime) for e in files),
                                      key=lambda f: (f.mtime, f.name)))
                if len(inputs) < options.min_files:
                    plan.skipped[rel] = f"{len(inputs)} file(s), fewer than min_files {options.min_files}"
                    continue
                if options.older_than_s is not None and max(f.mtime for f in inputs) > now - options.older_than_s:
                    plan.skipped[rel] = "written to more recently than --older-than"
                    continue
                total = sum(f.size for f in inputs)
                if options.dedup is None and len(inputs) <= max(1, math.ceil(total / options.target_bytes)):
                    plan.skipped[rel] = f"already {len(inputs)} file(s) for {total} bytes at the target size"
                    continue
                work = PartitionWork(
                    job=job.name, run_id=run_id, dataset=dataset, final_dir=final_dir, rel=rel, partition=partition,
                    inputs=inputs, codec=ws.codec, codec_level=ws.codec_level, target_bytes=options.target_bytes,
                    dedup=options.dedup, staging_dir=str(job.job.job_staging / run_id),
                    task_output_dir=str(job.job.job_task_output / run_id))
                plan.works.append(work)
    return plan
