"""The validated job: every section checked and every plugin resolved before any work starts."""

from __future__ import annotations

import enum
import hashlib
import importlib
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from gobblin_py.api.quality import RowPolicyType, TaskPolicyType
from gobblin_py.api.writer import Delivery
from gobblin_py.cron import Cron
from gobblin_py.errors import SourceError
from gobblin_py.fs import Location
from gobblin_py.fs.paths import AbsPath, FsLocation
from gobblin_py.state.alerts import AlertSettings
from gobblin_py.units import ByteSize, Seconds


class CommitPolicy(str, enum.Enum):
    """Gobblin's job.commit.policy: which datasets may publish after the tasks ran."""

    FULL = "full"              # a dataset publishes only if all its tasks succeeded
    SUCCESSFUL = "successful"  # the successful tasks of a dataset publish


class BadRecordPolicy(str, enum.Enum):
    """What happens to a record that cannot be read or converted."""

    ERR_FILE = "ERR_FILE"
    FAIL = "FAIL"


def _cron(value: str) -> str:
    Cron.parse(value)  # CronError is a ValueError: reported with the key path
    return value


CronText = Annotated[str, AfterValidator(_cron)]
"""A cron expression (Quartz style, seconds first), checked when the job file is loaded."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ContinuousSettings(_Strict):
    """`job.continuous`: how a continuous run copes with failing checkpoints."""

    max_consecutive_failures: int = Field(default=10, ge=1, description="failed checkpoints in a row that end the run (exit 1, an alert)")
    max_backoff: Seconds = Field(default=60.0, gt=0, description="the longest wait after failed checkpoints (doubling from checkpoint_interval)")


class LeaseSettings(_Strict):
    """`job.lease`: where the job's lease lives, which keeps two drivers of the job (two hosts, a retried pod, a paused
    driver that wakes) from both committing."""

    url: str | None = Field(
        default=None, description="a location every driver of the job reaches, e.g. s3://bucket/leases (credentials and "
                                  "endpoint from job.filesystems); the store must enforce conditional writes. Unset: "
                                  "<work_dir>/leases, which keeps apart the drivers sharing that work directory only")
    ttl: Seconds = Field(default=60.0, ge=1, description="how long a lease lives without renewal (renewed every third of "
                                                          "it): a driver paused longer commits nothing more, and another "
                                                          "host may take the job over after it")


WORK_STORE_SCHEMES = frozenset({"s3", "s3a", "gs", "az", "abfs", "abfss"})
"""Object stores a work directory may live on: those obstore writes conditionally (see `fs.conditional`)."""

MAX_NAME = 100
"""A job name's longest: it becomes file and directory names (`<name>.lock`, `state/<name>/…`), which filesystems cap at
255 bytes with room for what is added to them."""


class JobSection(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=MAX_NAME,
                      description=f"names the job's lock, state and commit directories: at most {MAX_NAME} characters")
    description: str = Field(default="", description="free text")
    work_dir: AbsPath = Field(description="the job's records (commit log, state, run records, events, lease), task output, staging and lock: a local path "
                                          "(on a cluster: a mount every driver shares), or an object store's URL (s3://…, gs://…, az://…): "
                                          "then the records and task output live there, shared by every host, and staging in the "
                                          "local temp directory (see work_store)")
    work_store: FsLocation | None = Field(
        default=None, description="an object store (s3://bucket/work, gs://…, az://…) that keeps the job's records and task output, "
                                  "so that drivers on any host share them, with work_dir only local staging; `work_dir: s3://…` sets it. "
                                  "The store must enforce conditional writes (If-None-Match, If-Match)")
    task_output_dir: FsLocation | None = Field(
        default=None, description="where tasks leave their files until the commit (unset: <work_dir>/task-output); a URL such as s3://bucket/prefix")
    filesystems: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="fsspec options per URL scheme, e.g. {s3: {endpoint_url: ...}}; credentials from the environment")
    commit_policy: CommitPolicy = Field(
        default=CommitPolicy.FULL, description="full: a dataset publishes only if all its tasks succeeded; successful: its successful tasks publish (a CDC table's tasks depend on each other and commit all or none)")
    max_task_retries: int = Field(default=3, ge=0, description="retries of a failed task inside the run; a task still failing is retried by the next run")
    lock: bool = Field(default=True, description="refuse a concurrent run of the job; false only with delivery: at_least_once")
    lease: LeaseSettings = Field(default_factory=LeaseSettings, description="the job's lease with a fencing epoch (with lock: true)")
    delivery: Delivery = Field(
        default=Delivery.EXACTLY_ONCE, description="exactly_once (the commit log) or at_least_once (publish, then persist: a crash between them publishes twice)")
    commit_max_attempts: int = Field(default=3, ge=1, description="failed commit attempts of a dataset before it is quarantined")
    commit_retry_backoff: Seconds = Field(
        default=60.0, description="the wait after a dataset's failed commit attempt before a run attempts it again, doubling "
                                  "with each (attempts at 0, 1 and 3 minutes); a dataset quarantined by a fault of its "
                                  "environment (a full or read-only disk, a permission, a catalog down) is retried after it "
                                  "too, at most an hour apart. 0: at once, and a quarantine waits for `gobblin-py recover`")
    commit_parallelism: int = Field(default=16, ge=1, description="datasets committed, and recovered, at the same time in the driver (a dataset's commit mostly waits on fsyncs, so threads are cheap)")
    commit_on_executors_from: int | None = Field(
        default=None, ge=0, description="datasets from which commits run as Spark tasks (0: never; unset: 64 on a cluster, never in local mode)")
    retention_runs: int = Field(default=50, ge=1, description="run records kept per job (history)")
    schedule: CronText | None = Field(default=None, description="cron expression (Quartz style, seconds first) for `gobblin-py schedule`")
    mode: Literal["bounded", "continuous"] = Field(default="bounded", description="continuous: one run checkpoints every checkpoint_interval until stopped")
    checkpoint_interval: Seconds = Field(default=10.0, gt=0, description="continuous runs: from the start of one checkpoint to the next")
    checkpoint_max_records: int | None = Field(
        default=None, ge=1, description="at most this many records per checkpoint (and per bounded run), where the source counts them before reading (Kafka)")
    continuous: ContinuousSettings = Field(default_factory=ContinuousSettings, description="how a continuous run copes with failing checkpoints")
    columnar: bool = Field(default=True, description="let a task whose plugins all can (e.g. kafka → json_to_avro → parquet) convert and write Arrow batches; false: record by record")
    alert: AlertSettings | None = Field(default=None, description="consecutive-failure alerts by email and/or a command")

    @model_validator(mode="before")
    @classmethod
    def _work_on_a_store(cls, data: object) -> object:
        """`work_dir: s3://…` keeps the records on the store (`work_store`) and staging in a local folder of the temp
        directory named after the URL. Any other URL is refused: made a path, `hdfs://n/w` would be a local folder
        `hdfs:` on each host, each with its own state, commit log and lock, while the operator believed it shared."""
        if not isinstance(data, dict) or not isinstance(data.get("work_dir"), str):
            return data
        value = data["work_dir"]
        m = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*)://", value)
        if m is None:
            return data
        scheme = m[1].lower()
        if scheme == "file":
            raise ValueError(f"job.work_dir: {value} is a file URL: give the path {value.split('://', 1)[1]}")
        if scheme not in WORK_STORE_SCHEMES:
            raise ValueError(f"job.work_dir: {value}: a work directory is a local path or an object store that enforces "
                             f"conditional writes ({', '.join(sorted(WORK_STORE_SCHEMES))}://…); on {scheme}:// each "
                             "host would keep a work directory of its own, and two drivers of the job would both commit")
        if data.get("work_store") not in (None, value):
            raise ValueError(f"job.work_dir is the URL {value} and job.work_store is {data['work_store']}: give one")
        digest = hashlib.sha256(value.rstrip("/").encode()).hexdigest()[:16]
        return {**data, "work_store": value, "work_dir": str(Path(tempfile.gettempdir()) / "gobblin-py" / "work" / digest)}

    @field_validator("work_store")
    @classmethod
    def _an_object_store(cls, value: str | None) -> str | None:
        if value is not None and Location(value).scheme not in WORK_STORE_SCHEMES:
            raise ValueError(f"{value}: job.work_store is an object store that enforces conditional writes "
                             f"({', '.join(sorted(WORK_STORE_SCHEMES))}://…); a local work directory is job.work_dir")
        return value

    @field_validator("work_dir")
    @classmethod
    def _a_directory(cls, value: Path) -> Path:
        if value.exists() and not value.is_dir():
            raise ValueError(f"{value} is a file, not a directory: give a directory for the job's staging, state and commits")
        return value

    @property
    def records_root(self) -> Location:
        """Where the job's records live (commit log, state, run records, events, identity, lease): `work_store`,
        else `work_dir`."""
        return Location(self.work_store) if self.work_store else Location(self.work_dir)

    @property
    def task_output_root(self) -> Location:
        """The task-output directory shared by the jobs of this setting (`<work_store or work_dir>/task-output`
        unless set: on a store, a pending commit's files are there for any host's recovery)."""
        return Location(self.task_output_dir) if self.task_output_dir else self.records_root / "task-output"

    @property
    def job_task_output(self) -> Location:
        """This job's own task output, `<task_output_root>/<job>`: no other job writes or cleans here."""
        return self.task_output_root / self.name

    @property
    def lease_location(self) -> str:
        """Where the job's lease lives: `lease.url`, else `<work_store or work_dir>/leases`."""
        return self.lease.url or str(self.records_root / "leases")

    @property
    def shared_lease(self) -> bool:
        """Whether the lease alone keeps the job's drivers apart (`lease.url`, or a `work_store`): no host lock then, as
        drivers on other hosts share the lease only."""
        return self.lease.url is not None or self.work_store is not None

    @property
    def job_staging(self) -> Path:
        """This job's own local staging, `<work_dir>/staging/<job>`: no other job writes or cleans here."""
        return self.work_dir / "staging" / self.name


class DedupSettings(_Strict):
    """`compaction.dedup`: one record per value of `key` in each partition."""

    key: str = Field(description="the field whose value identifies a record")
    keep: Literal["latest", "first"] = Field(default="latest", description="which of a key's records stays: the largest order_by value, or the smallest")
    order_by: str | None = Field(default=None, description="the field that orders a key's records (unset: the order files were written in)")


class CompactionSection(_Strict):
    """`compaction:`: what `gobblin-py compact` does when the command line does not say (and `schedule`, with a cron)."""

    target_size: ByteSize = Field(default=256_000_000, description="size of the merged files (256MB)")
    min_files: int = Field(default=2, ge=1, description="partitions with fewer files are left alone")
    older_than: Seconds | None = Field(default=None, description="only partitions not written to for this long (closed time partitions)")
    partition: str | None = Field(default=None, description="only partitions under this path prefix")
    datasets: list[str] = Field(default_factory=list, description="only these datasets (empty: all)")
    dedup: DedupSettings | None = Field(default=None, description="keep one record per key in each partition")
    schedule: CronText | None = Field(default=None, description="cron expression: `gobblin-py schedule` runs the compaction on it")


def _size_or_off(value: object) -> object:
    """`0`, `false` or `off` turn a size setting off (0)."""
    return 0 if value is False or value == 0 or str(value).strip().lower() in ("0", "off", "false") else value


IN_DRIVER_BELOW = 16 * 1024 * 1024
"""spark.in_driver_below when unset, on a local master."""


class SparkSection(_Strict):
    master: str = Field(default="local[*]", description="any Spark master URL (--master overrides it)")
    app_name: str | None = Field(default=None, description="the Spark application name (unset: gobblin-py:<job>)")
    conf: dict[str, str | int | float | bool] = Field(default_factory=dict, description="extra Spark settings")
    in_driver_below: Annotated[Literal[0] | ByteSize | None, BeforeValidator(_size_or_off)] = Field(
        default=None,
        description="a run whose Source estimates its work under this size runs its tasks in the driver, as many at "
                    "once as a local master has cores, and never starts Spark; work a native reader does outside "
                    "Python's lock, and work Spark's slots cannot spread (a plan of one task), weighs less "
                    "(docs/operating.md); 0 or off: always on Spark (unset: 16MiB on a local master, off on a cluster)")

    class_archive: bool = Field(
        default=True, description="keep a class-data-sharing archive of the driver JVM's classes (Java AppCDS, about 100 MB "
                                  "in ~/.cache/gobblin-py, one per pyspark and Java): the first run that starts Spark "
                                  "records it, later ones start their JVM in about half the time; ignored when "
                                  "spark.conf sets spark.driver.extraJavaOptions")

    @property
    def in_driver_limit(self) -> int | None:
        """The size under which a run's tasks run in the driver; None: always on Spark."""
        if self.in_driver_below is None:
            return IN_DRIVER_BELOW if self.master.startswith("local") else None
        return self.in_driver_below or None


class LoggingSection(_Strict):
    level: str | None = Field(default=None, pattern=r"^(DEBUG|INFO|WARNING|ERROR)$",
                              description="gobblin-py's own log lines (stderr); unset: WARNING for `run` (its summary says the rest; "
                                          "INFO adds planning, task progress and commits, as -v does), INFO for a continuous run "
                                          "(a line per checkpoint) and for compact, maintain and recover")
    spark_level: str = Field(default="ERROR", pattern=r"^(ALL|DEBUG|INFO|WARN|ERROR|FATAL|OFF)$", description="Spark's log level unless --verbose")


@dataclass(frozen=True)
class PluginConfig:
    """A resolved plugin: its import path and its validated settings; picklable."""

    path: str
    settings: Any
    key: str  # where it sits in the job file, for messages
    name: str = ""  # the `class:` value as written (alias or dotted path)

    @property
    def label(self) -> str:
        """`key (name)`, e.g. `quality.row[0] (required_fields)`, for messages and metrics."""
        return f"{self.key} ({self.name or self.path})"

    def cls(self) -> type:
        module_name, _, attr = self.path.partition(":")
        return getattr(importlib.import_module(module_name), attr)

    def create(self) -> Any:
        """A fresh instance of the plugin with its settings (one per task)."""
        return self.cls()(self.settings)


@dataclass(frozen=True)
class RowPolicyConfig:
    plugin: PluginConfig
    type: RowPolicyType


@dataclass(frozen=True)
class TaskPolicyConfig:
    plugin: PluginConfig
    type: TaskPolicyType


@dataclass(frozen=True)
class BranchConfig:
    """One fork branch: its converters, checks, writer and publisher."""

    name: str
    converters: tuple[PluginConfig, ...]
    row_policies: tuple[RowPolicyConfig, ...]
    task_policies: tuple[TaskPolicyConfig, ...]
    writer: PluginConfig
    publisher: PluginConfig


MIN_ORPHAN_AGE = 3600.0
"""Seconds: orphan files younger than this are never removed, whatever is asked. A file a commit is writing, or has
published and not yet added to its table, is unreferenced until that commit lands; an hour is longer than any commit
of the job takes (and the commit log protects the job's own pending commits at any age)."""


class MaintenanceSection(_Strict):
    """`maintenance:`: what `gobblin-py maintain` does when the command line does not say; nothing is set by default."""

    expire_snapshots_older_than: Seconds | None = Field(default=None, description="Iceberg: expire snapshots older than this (7d), never the newest keep_last nor one a pending commit needs")
    keep_last: int = Field(default=1, ge=1, description="Iceberg: snapshots always kept, newest first, however old")
    remove_orphans_older_than: Seconds | None = Field(default=None, description="Iceberg: delete files under the table's location that no snapshot lists, last written this long ago (at least 1h; 3d is safe)")
    retention: Seconds | None = Field(default=None, description="delete whole time partitions (a directory of the writer's partition pattern, an Iceberg partition of a time transform) that ended this long ago (30d)")
    datasets: list[str] = Field(default_factory=list, description="only these datasets (empty: all)")
    schedule: CronText | None = Field(default=None, description="cron expression: `gobblin-py schedule` runs the maintenance on it (as `<job>:maintain`), and a continuous run between checkpoints; it deletes, as `maintain --yes` does")

    @field_validator("remove_orphans_older_than")
    @classmethod
    def _orphan_age(cls, value: float | None) -> float | None:
        if value is not None and value < MIN_ORPHAN_AGE:
            raise ValueError(f"{value:.0f}s is younger than the {MIN_ORPHAN_AGE:.0f}s a commit of the job may take to add "
                             "the files it published; give 1h or more (3d is the usual choice)")
        return value

    @model_validator(mode="after")
    def _something_on_schedule(self) -> MaintenanceSection:
        if self.schedule is not None and all(v is None for v in (self.expire_snapshots_older_than,
                                                                  self.remove_orphans_older_than, self.retention)):
            raise ValueError("schedule: nothing to run on it; set expire_snapshots_older_than, remove_orphans_older_than "
                             "or retention in the same section")
        return self


@dataclass(frozen=True)
class JobSpec:
    """Everything a run needs, validated; shipped to executors as is."""

    source_file: str
    job: JobSection
    source: PluginConfig
    converters: tuple[PluginConfig, ...]
    row_policies: tuple[RowPolicyConfig, ...]
    bad_records: BadRecordPolicy
    fork: PluginConfig
    branches: tuple[BranchConfig, ...]
    spark: SparkSection
    logging: LoggingSection
    compaction: CompactionSection = field(default_factory=CompactionSection)
    maintenance: MaintenanceSection = field(default_factory=MaintenanceSection)
    dead_letter: PluginConfig | None = None  # quality.dead_letter: where each committed range's bad records also go
    raw: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def name(self) -> str:
        return self.job.name

    def branch_dir(self, dataset: str, branch: str) -> str:
        """Where a branch's files go under the final directory: `<dataset>` or `<dataset>/<branch>`; SourceError for a
        dataset name that would leave it (absolute, or with a `..`), which a plugin's source planned."""
        if dataset.startswith(("/", "\\")) or ".." in dataset.replace("\\", "/").split("/"):
            raise SourceError(f"dataset name {dataset!r} (from {self.source.key} {self.source.name or self.source.path}) "
                              "is not a relative directory name: it would write outside the job's directories; the source "
                              "must name datasets without a leading '/' or a '..'")
        return dataset if len(self.branches) == 1 else f"{dataset}/{branch}"
