"""Which partitions a compaction merges: every leaf directory of the writer's files (Avro, Parquet) under a committed
dataset of the job (`PartitionWork`), or every partition of the table a dataset is published to (`TablePartitionWork`),
filtered by dataset, partition prefix, age and file count, each one Spark task's work. What it knows of a format or a
table it asks the branch's writer (`FileMerger`) and publisher (`TableCompaction`)."""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from gobblin_py.api import DedupSpec, FileMerger, TableCompaction, TableFile
from gobblin_py.api.names import identity_hash, workunit_id
from gobblin_py.config.model import BranchConfig, JobSpec, PluginConfig
from gobblin_py.errors import ConfigError
from gobblin_py.fs import Location
from gobblin_py.state.store import StateStore
from gobblin_py.suggest import did_you_mean
from gobblin_py.units import parse_bytes, parse_duration


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
    in_file = ("compaction.dedup.key", "compaction.dedup.order_by")
    if dedup_key is not None:
        spec = DedupSpec(dedup_key, keep or "latest", order_by)  # type: ignore[arg-type]
    elif keep is not None or order_by is not None:
        if dedup is None:
            raise ConfigError("--keep and --order-by go with --dedup-key FIELD")
        spec = DedupSpec(dedup.key, keep or dedup.keep, order_by or dedup.order_by,  # type: ignore[arg-type]
                         key_from=in_file[0], order_by_from="--order-by" if order_by else in_file[1])
    else:
        spec = DedupSpec(dedup.key, dedup.keep, dedup.order_by, *in_file) if dedup is not None else None
    if spec is not None and spec.keep not in ("latest", "first"):
        raise ConfigError(f"--keep: expected latest or first; got {spec.keep!r}")
    compactable_branches(job)
    known = StateStore(job.job.records_root, job.name).dataset_names()
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


@dataclass(frozen=True, kw_only=True)
class CompactionWork:
    """One partition to merge (one Spark task): its files, what the merged files are named, how they are written."""

    job: str
    run_id: str
    dataset: str
    rel: str
    """Where the partition is, also the name of its commit record: `clicks/2026/01/01` (a directory under
    `final_dir`), `events.clicks/ts_day=2026-01-01` (a table partition)."""
    partition: str
    """As the compaction state records it: `2026/01/01` (under the dataset's directory), `ts_day=2026-01-01`."""
    inputs: tuple[InputFile, ...]
    target_bytes: int
    dedup: DedupSpec | None
    staging_dir: str
    task_output_dir: str
    writer: PluginConfig
    """The branch's writer, whose class merges the files (`FileMerger.merge_files`) with its settings."""

    def _identity(self) -> tuple[str, ...]:
        """Where the partition is, in full (hook): what the merged files' names are derived from, with the inputs."""
        return (self.rel,)

    def location(self, f: InputFile) -> str:
        """Where an input file is (hook): its path or URL."""
        return f.name

    @property
    def known_records(self) -> int | None:
        """The inputs' records when the plan already counted them (hook), else None."""
        return None

    @property
    def compaction_id(self) -> str:
        """128 bits over the partition and every input's name and size: a new set of files is a new compaction."""
        return identity_hash(*self._identity(), *(f"{f.name}:{f.size}" for f in self.inputs))

    @property
    def stem(self) -> str:
        """The merged files' name: never an ingestion's (another identity) nor an earlier compaction's (other inputs)."""
        return workunit_id("compacted", *self._identity(), self.compaction_id)

    @property
    def input_bytes(self) -> int:
        return sum(f.size for f in self.inputs)


@dataclass(frozen=True, kw_only=True)
class PartitionWork(CompactionWork):
    """A directory of the writer's files under `final_dir`, merged by the branch's writer."""

    final_dir: str

    def _identity(self) -> tuple[str, ...]:
        return (self.final_dir, self.rel)

    def location(self, f: InputFile) -> str:
        return str(self.directory / f.name)

    @property
    def directory(self) -> Path:
        return Path(self.final_dir) / self.rel

    @property
    def staged(self) -> Path:
        """The hidden sibling the merged files are published into before the exchange (readers skip `.` names)."""
        return self.directory.parent / f".{self.directory.name}.compacted-{self.compaction_id[:16]}"


@dataclass(frozen=True, kw_only=True)
class TablePartitionWork(CompactionWork):
    """A partition of a table (`dataset` is the table's name, under which the compaction state is recorded): its data
    files (`InputFile.name` is the file's URI, `mtime` when the commit that added it was made), merged by the branch's
    writer and swapped in by the branch's publisher (`TableCompaction`)."""

    records: int
    """The inputs' records, as the table's manifests count them."""
    publisher: PluginConfig
    """The branch's table publisher: which table, which catalog, the replace commit."""
    data_dir: str
    """Where the merged files are published (an Iceberg table's `<table>/data/<partition>/`)."""

    @property
    def known_records(self) -> int | None:
        return self.records


@dataclass
class CompactionPlan:
    """The partitions to merge, and those left alone with why."""

    works: list[CompactionWork] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


def _hidden(name: str) -> bool:
    return name.startswith((".", "_"))


def _leaf_partitions(root: Path, suffix: str) -> list[tuple[str, list[os.DirEntry[str]], list[str]]]:
    """(partition under `root`, its files named `*<suffix>`, the other entries in the way) of every directory holding
    such files, skipping hidden and `_` entries (`_errors`, a compaction's staging)."""
    found = []
    stack = [root]
    while stack:
        d = stack.pop()
        try:
            everything = list(os.scandir(d))
        except (FileNotFoundError, NotADirectoryError):
            continue
        entries = [e for e in everything if not _hidden(e.name)]
        files = [e for e in entries if e.is_file(follow_symlinks=False) and e.name.endswith(suffix)]
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


def compactable_branches(job: JobSpec) -> list[tuple[BranchConfig, str | None]]:
    """Each branch with its local final directory (None for a branch publishing to tables); ConfigError naming the key
    for a branch compaction cannot merge (a writer that is no `FileMerger`, output not on a local or mounted
    filesystem), and for a job without its lock (the lock keeps compaction and ingestion apart)."""
    if not job.job.lock:
        raise ConfigError("job.lock: compaction needs the job lock (job.lock: true): it keeps a compaction and the job's "
                          "runs from publishing into one partition at once")
    out: list[tuple[BranchConfig, str | None]] = []
    for branch in job.branches:
        table = issubclass(branch.publisher.cls(), TableCompaction)
        if not issubclass(branch.writer.cls(), FileMerger):
            raise ConfigError(f"{branch.writer.key}: compaction merges Avro files; this branch's writer is "
                              f"{branch.writer.name or branch.writer.path} (Parquet files too: writer class avro or parquet)")
        if table:
            out.append((branch, None))
            continue
        final = getattr(branch.publisher.settings, "final_dir", None)
        if final is None or not Location(str(final)).is_local:
            raise ConfigError(f"{branch.publisher.key}: compaction needs a publisher with a final_dir on a local or mounted "
                              f"filesystem (it exchanges partition directories atomically); got {final}")
        out.append((branch, str(Location(str(final)).path)))
    return out


def _last_compaction(names: list[str]) -> bool:
    """Whether `names` are exactly the files of one compaction (`compacted-<hash>.parquet`, `compacted-<hash>.r1.parquet`
    …): nothing landed in the partition since it was compacted."""
    stems = {n.split(".", 1)[0] for n in names}
    return len(stems) == 1 and next(iter(stems)).startswith("compacted-")


def _left_alone(inputs: tuple[InputFile, ...], options: CompactionOptions, now: float) -> str | None:
    """Why a partition of `inputs` is not merged now (too few files, written to too recently, already at the target
    size), or None."""
    if len(inputs) < options.min_files:
        return f"{len(inputs)} file(s), fewer than min_files {options.min_files}"
    if options.older_than_s is not None and max(f.mtime for f in inputs) > now - options.older_than_s:
        return "written to more recently than --older-than"
    total = sum(f.size for f in inputs)
    if options.dedup is None and len(inputs) <= max(1, math.ceil(total / options.target_bytes)):
        return f"already {len(inputs)} file(s) for {total} bytes at the target size"
    return None


def plan_compaction(job: JobSpec, options: CompactionOptions, run_id: str, blocked: set[str]) -> CompactionPlan:
    """The partitions of the job's committed datasets (or of the tables they are published to) to merge now, and those
    left alone with why."""
    datasets = list(options.datasets) or StateStore(job.job.records_root, job.name).dataset_names()
    plan = CompactionPlan()
    now = time.time()
    for branch, final_dir in compactable_branches(job):
        if final_dir is None:
            _plan_tables(job, branch, datasets, options, run_id, blocked, now, plan)
            continue
        merger: type[FileMerger] = branch.writer.cls()
        kind, suffix = merger.merged_format, merger.merged_suffix
        for dataset in datasets:
            base = job.branch_dir(dataset, branch.name)
            for partition, files, others in _leaf_partitions(Path(final_dir) / base, suffix):
                rel = f"{base}/{partition}" if partition else base
                if not _under(partition, options.partition):
                    continue
                if rel in blocked or dataset in blocked:
                    plan.skipped[rel] = "a pending commit of it could not be recovered (see `gobblin-py inspect-commits`)"
                    continue
                if others:
                    plan.skipped[rel] = f"it holds {', '.join(sorted(others)[:3])} beside its {kind} files"
                    continue
                if merger.leaves_own_merge_alone and options.dedup is None and _last_compaction([e.name for e in files]):
                    plan.skipped[rel] = f"{len(files)} file(s) of its last compaction, no file added since"
                    continue
                inputs = tuple(sorted((InputFile(e.name, e.stat().st_size, e.stat().st_mtime) for e in files),
                                      key=lambda f: (f.mtime, f.name)))
                why = _left_alone(inputs, options, now)
                if why is not None:
                    plan.skipped[rel] = why
                    continue
                work = PartitionWork(
                    job=job.name, run_id=run_id, dataset=dataset, final_dir=final_dir, rel=rel, partition=partition,
                    inputs=inputs, target_bytes=options.target_bytes, dedup=options.dedup,
                    staging_dir=str(job.job.job_staging / run_id), task_output_dir=str(job.job.job_task_output / run_id),
                    writer=branch.writer)
                plan.works.append(work)
    check_dedup_fields(plan.works, options.dedup)
    return plan


def check_dedup_fields(works: list[CompactionWork], dedup: DedupSpec | None) -> None:
    """ConfigError, before any partition is merged, when the dedup key or order-by field is not a field of a selected
    partition's records: a misspelled order-by would keep each key's oldest record and delete the latest, a misspelled
    key would remove nothing (the task reads a missing field as null)."""
    if dedup is None:
        return
    for work in works:
        fields = None
        for name, given in ((dedup.key, dedup.key_from), (dedup.order_by, dedup.order_by_from)):
            if name is None:
                continue
            if fields is None:
                fields = _record_fields(work)
            if name not in fields:
                hint = did_you_mean(name, fields)
                raise ConfigError(f"{given} {name!r}: no field of that name in partition {work.rel} "
                                  f"({f'{hint} ' if hint else ''}its fields: {', '.join(sorted(fields))}); nothing was "
                                  f"compacted: name a field of its records")


def _record_fields(work: CompactionWork) -> list[str]:
    """The top-level fields of a partition's records as its merge reads them (the writer's `merged_fields`)."""
    merger = work.writer.cls()
    assert issubclass(merger, FileMerger)  # planning selects only partitions a FileMerger writes
    return merger.merged_fields(tuple(work.location(f) for f in work.inputs))


def table_partition_prefix(partition: str) -> str:
    """A table partition's values as a path (`ts_day=2026-01-01` → `2026/01/01`), what `--partition 2026/01` (or
    `2026-01`) is matched against, as a file dataset's `yyyy/MM/dd` directories are."""
    values = "/".join(part.partition("=")[2] for part in partition.split("/") if part)
    return values.replace("-", "/")


def _plan_tables(job: JobSpec, branch: BranchConfig, datasets: list[str], options: CompactionOptions, run_id: str,
                 blocked: set[str], now: float, plan: CompactionPlan) -> None:
    """The partitions of each table the datasets are published to (a table several datasets share is planned once):
    its live data files grouped by the table's partition; a partition that holds delete files (another engine's
    row-level deletes) or files of an older partition spec is left alone."""
    publisher = branch.publisher.create()
    assert isinstance(publisher, TableCompaction)
    tables: dict[str, list[str]] = {}
    for dataset in datasets:
        tables.setdefault(publisher.table_name(dataset), []).append(dataset)
    for name, named in sorted(tables.items()):
        live = publisher.table_files(name)
        if live is None:
            plan.skipped[name] = "the table does not exist (yet)"
            continue
        changed = publisher.changed_since_written(name)
        if changed is not None:
            plan.skipped[name] = changed
            continue
        by_partition: dict[str, list[TableFile]] = {}
        for f in live:
            by_partition.setdefault(f.partition, []).append(f)
        for partition, files in sorted(by_partition.items()):
            rel = f"{name}/{partition}" if partition else name
            if options.partition and not (_under(table_partition_prefix(partition), options.partition.replace("-", "/"))
                                          or _under(partition, options.partition)):
                continue
            if rel in blocked or any(d in blocked for d in named):
                plan.skipped[rel] = "a pending commit of it could not be recovered (see `gobblin-py inspect-commits`)"
                continue
            if not all(f.data for f in files):
                plan.skipped[rel] = "it has delete files (row-level deletes by another engine); only data files are merged"
                continue
            if not all(f.current_spec for f in files):
                plan.skipped[rel] = "it holds files written under an older partition spec of the table"
                continue
            if options.dedup is None and all(f.compacted for f in files):
                plan.skipped[rel] = f"{len(files)} file(s) of its last compaction, no file added since"
                continue
            inputs = tuple(sorted((InputFile(f.path, f.size, f.added_ms / 1000) for f in files), key=lambda f: (f.mtime, f.name)))
            why = _left_alone(inputs, options, now)
            if why is not None:
                plan.skipped[rel] = why
                continue
            plan.works.append(TablePartitionWork(
                job=job.name, run_id=run_id, dataset=name, rel=rel, partition=partition, inputs=inputs,
                records=sum(f.records for f in files), writer=branch.writer, publisher=branch.publisher,
                data_dir=publisher.compacted_dir(named[0], partition),
                target_bytes=options.target_bytes, dedup=options.dedup, staging_dir=str(job.job.job_staging / run_id),
                task_output_dir=str(job.job.job_task_output / run_id)))
