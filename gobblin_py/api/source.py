"""Source and Extractor: plan the work, then read one WorkUnit's records."""

from __future__ import annotations

import abc
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, ClassVar

from gobblin_py.api.commit_step import CommitStep
from gobblin_py.api.context import SourceMessage, TaskContext
from gobblin_py.api.lag import DatasetLag
from gobblin_py.api.plugin import Plugin
from gobblin_py.api.split import Split
from gobblin_py.api.types import Record, Schema, SchemaKind, WatermarkValue
from gobblin_py.api.workunit import MultiWorkUnit, WorkUnit


class SourceState:
    """What the previous runs committed: each dataset's watermarks (and, for sources that keep
    them, per-key statistics of the last extraction), read-only for the Source."""

    def __init__(self, watermarks: Mapping[str, Mapping[str, WatermarkValue]],
                 key_stats: Mapping[str, Mapping[str, Mapping[str, float]]] | None = None,
                 max_records: int | None = None, kept: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self._watermarks = {ds: dict(marks) for ds, marks in watermarks.items()}
        self._stats = {ds: dict(s) for ds, s in (key_stats or {}).items()}
        self._kept = {ds: dict(k) for ds, k in (kept or {}).items()}
        self.input_problems: dict[str, list[str]] = {}
        self.notices: dict[str, list[str]] = {}
        self.listed: set[str] | None = None
        """Every dataset the source lists now, with new data or not (`report_listed`); None: the source cannot tell."""
        self.max_records = max_records
        """At most this many records in this run (or checkpoint), over all datasets, where the source can count them
        before reading (`job.checkpoint_max_records`); None: everything there is. The rest waits for the next."""

    def report_input_problem(self, dataset: str, message: str) -> None:
        """An input the plan leaves out on purpose but the operator must act on (a file changed after it
        was ingested, say): named in the dataset's summary line, and the run exits 1 — never only a log line."""
        self.input_problems.setdefault(dataset, []).append(message)

    def report_notice(self, dataset: str, message: str) -> None:
        """Something the operator should know that needs no action (a column added upstream): named in the dataset's
        summary line and the run's record; the run's outcome is unchanged."""
        self.notices.setdefault(dataset, []).append(message)

    def report_listed(self, datasets: Iterable[str]) -> None:
        """The datasets the source lists now, new data or not: a committed dataset it no longer lists is named in the
        run's summary ("in state, not in the source"), not reported as having no new data."""
        self.listed = set(datasets) | (self.listed or set())

    def kept(self, dataset: str) -> dict[str, Any]:
        """What the work units of `dataset`'s last committed run kept: each of their `props` named `state.<name>`, as
        `<name>` (committed with the watermarks, in the same commit). Empty before the first commit."""
        return dict(self._kept.get(dataset, {}))

    def key_stats(self, dataset: str) -> dict[str, dict[str, float]]:
        """Per watermark key: `records`, `bytes` and `seconds` of its last committed extraction."""
        return {k: dict(v) for k, v in self._stats.get(dataset, {}).items()}

    def key_stat(self, dataset: str, key: str) -> dict[str, float] | None:
        """One key's `records`, `bytes` and `seconds` of its last committed extraction; None if it has none."""
        found = self._stats.get(dataset, {}).get(key)
        return dict(found) if found is not None else None

    def datasets(self) -> list[str]:
        return sorted(self._watermarks)

    def watermarks(self, dataset: str) -> dict[str, WatermarkValue]:
        """The committed watermark of every key of `dataset` (empty for a dataset never seen)."""
        return dict(self._watermarks.get(dataset, {}))


class Extractor(abc.ABC):
    """Reads one WorkUnit: its schema first, then its records one at a time."""

    @abc.abstractmethod
    def get_schema(self) -> Schema:
        """The schema of the records this extractor yields."""

    @abc.abstractmethod
    def read_records(self) -> Iterator[Record]:
        """Yield the records of the WorkUnit; report unreadable ones through `context.reject`."""

    @abc.abstractmethod
    def actual_high_watermark(self) -> WatermarkValue:
        """The watermark reached: where the next run starts for this WorkUnit's key."""

    def location(self) -> str:
        """Where the current record came from (file:line, topic/partition@offset), for error files."""
        return ""

    def current_message(self) -> SourceMessage | None:
        """The message the current record came from, as read (key, value, headers), kept with it when a later stage
        rejects it, for a dead-letter topic; None where the source has no such message."""
        return None

    def close(self) -> None:
        """Release connections and files; called whether or not reading succeeded."""


class Source(Plugin, abc.ABC):
    """Partitions the job's work into WorkUnits and creates an Extractor for each."""

    keeps_key_stats: ClassVar[bool] = False
    """True to have each key's extraction statistics kept in the dataset state (for size estimates)."""
    step_types: ClassVar[tuple[type[CommitStep], ...]] = ()
    """The commit step classes `commit_steps` returns, so the commit store can load them (recovery rebuilds a step
    from the commit record by its `type_name`)."""
    split_type: ClassVar[type[Split] | None] = None
    """The typed split every WorkUnit of this source carries (`Split.of(workunit)` in the Extractor); planning checks
    each planned unit against it. None: the source's work units carry no split (a source written before splits)."""
    whole_datasets: ClassVar[bool] = False
    """True where a dataset's work units of one run depend on each other (a table's snapshot chunks planned one after
    another, or started by its stream's truncate): the dataset commits all of them or none, whatever
    `job.commit_policy`, so a failed unit cannot leave its siblings committed without what they assume."""
    change_markers: ClassVar[Mapping[str, tuple[str, str]]] = {}
    """Where this source's records are changes, not rows: each kind a table kept equal by key must apply as what it
    is (`delete`, `truncate`) → (column, value) marking it. The loader refuses a publisher that would apply one as
    an ordinary row (`Committer.unapplied_changes`). Empty: records are rows."""

    @classmethod
    def fit_to_publishers(cls, settings: Any, by_name: bool) -> tuple[Any, list[tuple[str, str]]]:
        """The settings as the job's publishers need them (`by_name`: one knows its outputs by name, see
        `Committer.knows_outputs_by_name`), and the problems (setting, why) where the job file asks otherwise."""
        return settings, []

    @abc.abstractmethod
    def get_workunits(self, state: SourceState) -> list[WorkUnit | MultiWorkUnit]:
        """Plan this run from the committed state; a WorkUnit's id must be deterministic."""

    def warm_up(self) -> None:
        """Hook: import what this source's tasks will (a driver, a native reader). The runner calls it on a background
        thread while the run recovers and plans, so the first tasks do not queue on Python's import lock; best
        effort (an error here is ignored: the task's own import reports it)."""

    @classmethod
    def schema_kind(cls, settings: Any) -> SchemaKind:
        """Hook: whether records come with an Avro record schema, so validation refuses an avro or parquet writer
        that would fail asking for one. Default: cannot tell."""
        return SchemaKind.UNKNOWN

    def input_roots(self) -> list[str]:
        """Hook: the directories (paths or URLs) this source reads under; the loader refuses a job whose output,
        task output or work directory is inside one (each run would read what the last one wrote). Default: none."""
        return []

    def reads_topic(self, topic: str) -> str | None:
        """Hook: the job-file key under which this source reads the Kafka topic `topic` (`source.topic_pattern`), judged
        by its name alone, or None; the loader refuses a dead-letter topic the source reads (each run would read its
        dead letters back as bad records and send them again). Default: None, it reads no Kafka topic."""
        return None

    def endpoints(self, workunit: WorkUnit) -> list[str]:
        """Hook: the services (e.g. `host:port` of brokers) the task of `workunit` reads from. Once one task has
        spent its retries on a service it cannot reach (`UnreachableError`), the run's other tasks needing it fail
        at once instead of each spending theirs. Default: none known before the first attempt."""
        return []

    def estimated_bytes(self, workunit: WorkUnit, state: SourceState) -> float | None:
        """Hook: about how many bytes the task of `workunit` will handle (read, or written last time per record), from
        the plan and the last run's statistics.
        A run whose work units all have an estimate, together under `spark.in_driver_below`, runs its tasks in the
        driver without starting Spark. Default: None, not known (the run uses Spark)."""
        return None

    def native_share(self, workunit: WorkUnit, converted: bool) -> float:
        """Hook: the share (0 to 1) of the work of `workunit`'s task done in native code that releases Python's lock
        (a database driver's binary COPY into Arrow, Arrow's JSON parser) when the task takes the columnar path
        (`api.batches`), its Arrow made by a batch converter (`converted`) or by the extractor itself. On a local
        master the driver runs tasks in threads, where that share goes as fast as on Spark (see
        `executors.base.held_bytes`). A guess costs speed, never data. Default: 0, all of it holds the lock."""
        return 0.0

    def commit_steps(self, dataset: str, workunits: list[WorkUnit], watermarks: Mapping[str, WatermarkValue],
                     state_dir: str) -> list[CommitStep]:
        """Hook: steps of the source's own in `dataset`'s commit of `workunits` (its published ones), run right after
        the dataset's watermark step (so each finds `watermarks` committed in the state files under `state_dir`) and
        before its state step; a position the source must release upstream only once the data is durable (a
        replication slot's). Each must be idempotent, of a class in `step_types`, and hold no secret (the commit
        record keeps it). Default: none."""
        return []

    def backlog(self, state: SourceState, timeout_s: float) -> list[DatasetLag] | None:
        """Hook: what of each dataset is not yet committed (`state`: the committed watermarks), measured upstream
        (end offsets, `max(column)`, a listing) without reading data into a job and without side effects, within about
        `timeout_s`. A dataset that cannot be measured gets an entry with its `error`; a failure of the whole source may
        raise (the caller names it per dataset). Default: None, not known."""
        return None

    def committed(self, state: SourceState) -> None:
        """Hook: called by the runner once a run's commits are durable, with the state they left; for a best-effort
        copy of the positions outside (a Kafka consumer group, for lag tools), never read back. It runs outside the
        commit sequence (a failure here must neither fail nor block a commit): whatever it raises is logged and an
        event, and the run's outcome is unchanged. Default: nothing."""

    @abc.abstractmethod
    def get_extractor(self, workunit: WorkUnit, context: TaskContext) -> Extractor:
        """The Extractor that reads `workunit`; runs on an executor."""
