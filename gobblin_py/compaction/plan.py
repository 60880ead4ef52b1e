"""Which partitions a compaction merges: every leaf directory of Avro files under a committed dataset of the job
(`PartitionWork`), or every partition of the Iceberg table a dataset is published to (`TablePartitionWork`),
filtered by dataset, partition prefix, age and file count, each one Spark task's work."""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gobblin_py.builtin.writers.avro import AvroWriter
from gobblin_py.units import parse_bytes
from gobblin_py.builtin.publishers.iceberg.publisher import IcebergPublisher
from gobblin_py.builtin.writers.parquet import ParquetWriter, ParquetWriterSettings
from gobblin_py.units import parse_duration
from gobblin_py.api.names import identity_hash, workunit_id
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
    key_from: str = field(default="--dedup-key", compare=False)
    """Where `key` was given, for messages: the option or the job file's key (`compaction.dedup.key`)."""
    order_by_from: str = field(default="--order-by", compare=False)


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
    parquet: dict[str, Any] | None = None
    """The branch's parquet writer settings (compression, row groups; no partitioning or rolling) when the files are
    Parquet; None for Avro files."""

    def _identity(self) -> tuple[str, ...]:
        """Where the partition is, in full (hook): what the merged files' names are derived from, with the inputs."""
        return (self.rel,)

    def location(self, f: InputFile) -> str:
        """Where an input file is (hook): its path or URL."""
        return f.name

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
    """A directory of Avro files under `final_dir`, merged into Avro files of the branch's codec (or of Parquet files,
    merged by the branch's parquet writer)."""

    final_dir: str
    codec: str = "deflate"
    codec_level: int | None = None

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
    """A partition of an Iceberg table (`dataset` is the table's name, under which the compaction state is recorded):
    its data files (`InputFile.name` is the file's URI, `mtime` when the snapshot that added it was committed),
    merged into Parquet files by the branch's parquet writer."""

    records: int
    """The inputs' records, as the table's manifests count them."""
    publisher: str
    """`module:Class` of the branch's iceberg publisher, and its settings: where the files go, which catalog."""
    publisher_settings: dict[str, Any]
    data_dir: str
    """Where the merged files are published: `<table>/data/<partition>/`."""


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
    """Each branch with its local final directory (None for a branch publishing to Iceberg tables); ConfigError naming
    the key for a branch compaction cannot merge (a file writer other than Avro or Parquet, output not on a local or
    mounted filesystem), and for a job without its lock (the lock keeps compaction and ingestion apart)."""
    if not job.job.lock:
        raise ConfigError("job.lock: compaction needs the job lock (job.lock: true): it keeps a compaction and the job's "
                          "runs from publishing into one partition at once")
    out: list[tuple[BranchConfig, str | None]] = []
    for branch in job.branches:
        if issubclass(branch.publisher.cls(), IcebergPublisher):
            out.append((branch, None))
            continue
        if not issubclass(branch.writer.cls(), (AvroWriter, ParquetWriter)):
            raise ConfigError(f"{branch.writer.key}: compaction merges Avro files; this branch's writer is "
                              f"{branch.writer.name or branch.writer.path} (Parquet files too: writer class avro or parquet)")
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
    datasets = list(options.datasets) or StateStore(job.job.work_dir, job.name).dataset_names()
    plan = CompactionPlan()
    now = time.time()
    for branch, final_dir in compactable_branches(job):
        if final_dir is None:
            _plan_tables(job, branch, datasets, options, run_id, blocked, now, plan)
            continue
        ws = branch.writer.settings
        parquet = isinstance(ws, ParquetWriterSettings)
        kind, suffix = ("Parquet", ".parquet") if parquet else ("Avro", ".avro")
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
                if parquet and options.dedup is None and _last_compaction([e.name for e in files]):
                    plan.skipped[rel] = f"{len(files)} file(s) of its last compaction, no file added since"
                    continue
                inputs = tuple(sorted((InputFile(e.name, e.stat().st_size, e.stat().st_mtime) for e in files),
                                      key=lambda f: (f.mtime, f.name)))
                why = _left_alone(inputs, options, now)
                if why is not None:
                    plan.skipped[rel] = why
                    continue
                written = {"parquet": ws.model_dump(mode="json", exclude={"partition", "roll"})} if parquet else \
                    {"codec": ws.codec, "codec_level": ws.codec_level}
                work = PartitionWork(
                    job=job.name, run_id=run_id, dataset=dataset, final_dir=final_dir, rel=rel, partition=partition,
                    inputs=inputs, target_bytes=options.target_bytes, dedup=options.dedup,
                    staging_dir=str(job.job.job_staging / run_id), task_output_dir=str(job.job.job_task_output / run_id),
                    **written)
                plan.works.append(work)
    check_dedup_fields(plan.works, options.dedup)
    return plan


def check_dedup_fields(works: list[CompactionWork], dedup: DedupSpec | None) -> None:
    """ConfigError, before any partition is merged, when the dedup key or order-by field is not a field of a selected
    partition's records: a misspelled order-by would keep each key's oldest record and delete the latest, a misspelled
    key would remove nothing (the task reads a missing field as null)."""
    if dedup is None:
        return
    tables: dict[str, list[str]] = {}
    for work in works:
        fields = None
        for name, given in ((dedup.key, dedup.key_from), (dedup.order_by, dedup.order_by_from)):
            if name is None:
                continue
            if fields is None:
                fields = _record_fields(work, tables)
            if name not in fields:
                hint = did_you_mean(name, fields)
                raise ConfigError(f"{given} {name!r}: no field of that name in partition {work.rel} "
                                  f"({f'{hint} ' if hint else ''}its fields: {', '.join(sorted(fields))}); nothing was "
                                  f"compacted: name a field of its records")


def _record_fields(work: CompactionWork, tables: dict[str, list[str]]) -> list[str]:
    """The top-level fields a partition's records have as its merge reads them: an Avro directory's newest file's
    writer schema (older files are read into it), the union of a Parquet directory's file schemas, a table's schema."""
    if isinstance(work, TablePartitionWork):
        if work.dataset not in tables:
            from gobblin_py.builtin.publishers.iceberg.tables import load_table
            from gobblin_py.plugins import Kind, resolve

            kind = resolve(Kind.PUBLISHER, work.publisher)
            table = load_table(kind(kind.Settings.model_validate(work.publisher_settings)).catalog(), work.dataset)
            tables[work.dataset] = [f.name for f in table.schema().fields] if table is not None else []
        return tables[work.dataset]
    if work.parquet is not None:
        import pyarrow.parquet as pq

        return list(dict.fromkeys(name for f in work.inputs for name in pq.read_schema(work.location(f)).names))
    import fastavro

    with open(work.location(work.inputs[-1]), "rb") as stream:
        schema = json.loads(fastavro.reader(stream).metadata["avro.schema"])
    return [f["name"] for f in schema.get("fields", [])] if isinstance(schema, dict) else []


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
    from gobblin_py.builtin.publishers.iceberg.tables import live_files, load_table

    publisher = branch.publisher.create()
    assert isinstance(publisher, IcebergPublisher)
    tables: dict[str, list[str]] = {}
    for dataset in datasets:
        tables.setdefault(publisher.table_name(dataset), []).append(dataset)
    catalog = publisher.catalog() if tables else None
    ws = branch.writer.settings.model_dump(mode="json", exclude={"partition", "roll"})
    kind = f"{type(publisher).__module__}:{type(publisher).__qualname__}"
    settings = publisher.settings.model_dump(mode="json")
    for name, named in sorted(tables.items()):
        table = load_table(catalog, name)
        if table is None:
            plan.skipped[name] = "the table does not exist (yet)"
            continue
        by_partition: dict[str, list[Any]] = {}
        for f in live_files(table):
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
                records=sum(f.records for f in files), parquet=ws, publisher=kind, publisher_settings=settings,
                data_dir=str(publisher.compacted_dir(named[0], partition)),
                target_bytes=options.target_bytes, dedup=options.dedup, staging_dir=str(job.job.job_staging / run_id),
                task_output_dir=str(job.job.job_task_output / run_id)))
