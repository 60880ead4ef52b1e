"""The Iceberg table operations gobblin-py needs, through pyiceberg: load the catalog, find a gobblin-py commit among
a table's snapshots, check and evolve the table's schema, append files in one transaction with bounded retries on
commit conflicts, and (for `gobblin-py compact`) list a table's live data files by partition and replace some of them
with merged ones in one snapshot. pyiceberg is imported here only, inside the functions (a heavy import)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gobblin_py.api import TableFile
from gobblin_py.errors import CatalogUnavailableError, CommitError, is_environment_fault, os_fault

log = logging.getLogger(__name__)

COMMIT_ID = "gobblin-py.commit-id"
EPOCH = "gobblin-py.epoch"  # the fencing epoch of the job's lease that committed it
JOB = "gobblin-py.job"
RUN_ID = "gobblin-py.run-id"
DATASET = "gobblin-py.dataset"
WATERMARKS = "gobblin-py.watermarks"
WATERMARK_KEYS = "gobblin-py.watermark-keys"
"""How many watermark keys the dataset holds once the commit's `WATERMARKS` (this run's keys) are merged in: the
job's snapshots of a dataset add up to its whole watermarks when they hold that many keys between them."""
SOURCE_STATE = "gobblin-py.source-state"
"""What the commit's work units keep in the dataset's state, as JSON: the source's schema in effect (a registry
subject's version and schema id, a table's columns) and identities (a topic's id); left out above `SOURCE_STATE_MAX`."""
SOURCE_STATE_MAX = 16_384
FIELD_IDS = "gobblin-py.field-ids"
"""The field id of each top-level column of the commit's files (JSON `{name: id}`): what the next commit compares with
the table's schema, as another writer may rename or drop a column in between."""
CREATED_BY = "gobblin-py.created-by-commit"
"""A table property: the commit id whose transaction created the table, so that the dataset's next commit knows the
table for the one its first commit made (its uuid is known only once it exists)."""
COMPACTION = "gobblin-py.compaction"
"""Set (to the compaction's counts, as JSON) on a compaction's snapshot: it moves no watermark."""

TRANSFORMS = {"HOUR": "hour", "DAY": "day", "MONTH": "month", "YEAR": "year"}
"""The writer's time-partitioning granularity → the Iceberg partition transform that yields the same partitions."""


@dataclass(frozen=True)
class TableMark:
    """What a table records of one dataset's last gobblin-py commit: its run, when, and the watermarks it committed."""

    table: str
    run_id: str
    commit_id: str
    snapshot_id: int
    committed_at_ms: int
    watermarks: dict[str, Any]


_catalogs: dict[tuple[int, tuple[tuple[str, str], ...]], Any] = {}
_catalogs_lock = threading.Lock()


def load_catalog(properties: Mapping[str, str]) -> Any:
    """pyiceberg's catalog for `properties` (`name` names it, e.g. one configured in ~/.pyiceberg.yaml or
    PYICEBERG_CATALOG__<NAME>__* variables, which is where credentials belong); one per process and properties,
    made under a lock (a SQL catalog creates its tables on first use, and commit threads would race to)."""
    key = (os.getpid(), tuple(sorted(properties.items())))
    with _catalogs_lock:
        found = _catalogs.get(key)
        if found is None:
            found = _catalogs[key] = _load_catalog(dict(properties))
        return found


IDLE_IN_TRANSACTION_S = 15
"""Seconds a PostgreSQL SQL catalog's session of ours may sit idle inside a transaction before the server ends it
(`idle_in_transaction_session_timeout`): pyiceberg's commit holds the table's row `FOR UPDATE` for milliseconds, so a
session idle that long inside one is a driver frozen mid-commit (SIGSTOP, a paused pod), whose lock would otherwise
hold the next driver's commit of that table for good (CDC soak seed 1612506852). Its transaction rolls back whole."""


def _bounded_sessions(props: dict[str, str]) -> dict[str, str]:
    """A SQL catalog on PostgreSQL with `IDLE_IN_TRANSACTION_S` set on its sessions (libpq's `options` in the URI),
    unless the URI sets `options` itself."""
    uri = props.get("uri", "")
    if props.get("type", "sql") != "sql" or not uri.startswith(("postgresql", "postgres:")) or "options=" in uri:
        return props
    option = urllib.parse.quote(f"-c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_S * 1000}")
    return {**props, "uri": f"{uri}{'&' if '?' in uri else '?'}options={option}"}


def _load_catalog(props: dict[str, str]) -> Any:
    from pyiceberg.catalog import load_catalog as _load

    props = _bounded_sessions(props)
    name = props.pop("name", "gobblin_py")
    loaded: list[Any] = []
    try:  # another process (an executor, a concurrent job) may be creating the SQL catalog's tables right now
        with catalog_faults(catalog_label({"name": name, **props}), "loading it"):
            with_retries(f"Iceberg catalog {name!r}", 5, lambda: loaded.append(_load(name, **props)))
        return loaded[0]
    except CatalogUnavailableError:
        raise
    except Exception as exc:  # noqa: BLE001 - each catalog type raises its own
        raise CommitError(f"cannot load the Iceberg catalog {name!r} (type {props.get('type', '?')}): "
                          f"{type(exc).__name__}: {exc}; check publisher.catalog and the catalog's service") from exc


def catalog_label(props: Mapping[str, str]) -> str:
    """How messages name a catalog: `'gobblin_py' (sql, sqlite:////work/iceberg/catalog.db)`, a URI's password left out."""
    uri = re.sub(r"(//[^/:@]*):[^/@]*@", r"\1:***@", props.get("uri", ""))
    kind = props.get("type", "")
    return f"{props.get('name', 'gobblin_py')!r}" + (f" ({', '.join(x for x in (kind, uri) if x)})" if kind or uri else "")


_CONFLICT = re.compile(r"database (table )?is locked|\bbusy\b|deadlock|could not serialize|serialization failure|"
                       r"already exists|unique constraint|duplicate key", re.IGNORECASE)
_ACCESS = re.compile(r"read-?only|permission denied|access denied|not authori[sz]ed|forbidden|authentication failed|"
                     r"password", re.IGNORECASE)
_UNREACHABLE = re.compile(r"unable to open database file|connection refused|could not connect|connection failed|"
                          r"timed? ?out|no route to host|name or service not known|could not translate host name|"
                          r"server closed the connection|connection reset|network is unreachable|unavailable",
                          re.IGNORECASE)


def _sql_error(exc: BaseException) -> bool:
    return type(exc).__module__.startswith("sqlalchemy") and type(exc).__name__ in (
        "OperationalError", "InterfaceError", "DatabaseError", "InternalError")


def catalog_fault(exc: BaseException) -> str | None:
    """What stops the catalog when `exc` says it cannot be reached or used (`unreachable`, `refuses access`, `fails`),
    not that a concurrent commit won: None for a conflict (retried) or anything else (a bug, a bad table)."""
    from pyiceberg import exceptions as ice

    text = str(exc)
    rest = [getattr(ice, n) for n in ("ServiceUnavailableError", "ServerError", "UnauthorizedError", "ForbiddenError")
            if hasattr(ice, n)]
    if _sql_error(exc):
        if _CONFLICT.search(text):
            return None
    elif isinstance(exc, tuple(rest)):
        pass
    elif isinstance(exc, OSError) and is_environment_fault(exc):
        return "refuses access" if isinstance(exc, PermissionError) or _ACCESS.search(text) else \
            "is unreachable" if isinstance(exc, (ConnectionError, TimeoutError)) else "fails"
    elif type(exc).__module__.startswith("requests") and type(exc).__name__ in ("ConnectionError", "Timeout", "ConnectTimeout"):
        return "is unreachable"
    else:
        return None
    return "refuses access" if _ACCESS.search(text) else "is unreachable" if _UNREACHABLE.search(text) else "fails"


@contextlib.contextmanager
def catalog_faults(label: str, doing: str) -> Iterator[None]:
    """Inside: a catalog that cannot be reached or refuses access (`catalog_fault`) is a CatalogUnavailableError naming
    it and what failed, which a commit retries after `job.commit_retry_backoff`, never an internal error or a conflict."""
    try:
        yield
    except CatalogUnavailableError:
        raise
    except Exception as exc:  # noqa: BLE001 - only what `catalog_fault` recognises is translated
        how = catalog_fault(exc)
        if how is None:
            raise
        detail = os_fault(exc) if isinstance(exc, OSError) else f"{type(exc).__name__}: {_first_line(exc)}"
        raise CatalogUnavailableError(
            f"Iceberg catalog {label} {how} ({doing}): {detail}. Check the catalog's service, its database file and the "
            "permissions on it and its warehouse; a pending commit is retried after job.commit_retry_backoff") from exc


def _first_line(exc: BaseException) -> str:
    """A library error's own line (SQLAlchemy appends the statement and its parameters)."""
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), "")


def split_identifier(table: str) -> tuple[str, str]:
    """`ns.name` (or `a.b.name`) → (namespace, name)."""
    namespace, _, name = table.rpartition(".")
    return namespace, name


def ensure_namespace(catalog: Any, namespace: str) -> None:
    """Create `namespace` unless it exists; a concurrent committer creating it at the same time is no failure
    (each catalog reports that race its own way: a SQL catalog by a unique-key violation)."""
    try:
        catalog.create_namespace_if_not_exists(namespace)
    except Exception:  # noqa: BLE001 - re-raised unless the namespace is there now
        if not catalog.namespace_exists(namespace):
            raise


def load_table(catalog: Any, table: str) -> Any | None:
    from pyiceberg.exceptions import NoSuchTableError

    try:
        return catalog.load_table(table)
    except NoSuchTableError:
        return None


def read_metadata(io: Any, uri: str) -> Any | None:
    """The table metadata in the file at `uri`, or None when it cannot be read or parsed."""
    from pyiceberg.serializers import FromInputFile

    try:
        return FromInputFile.table_metadata(io.new_input(uri))
    except (OSError, ValueError) as exc:  # a pydantic ValidationError and a JSON error are ValueErrors
        log.info("could not read table metadata %s: %s", uri, exc)
        return None


def creating_commit(metadata: Any) -> str | None:
    """The commit id whose transaction created the table, when `metadata` is the version that transaction wrote (the
    table's first: no earlier version logged, no snapshot but that commit's), else None."""
    created = metadata.properties.get(CREATED_BY)
    if created is None or metadata.metadata_log:
        return None
    if any(s.summary is None or s.summary.get(COMMIT_ID) != created for s in metadata.snapshots):
        return None
    return created


def gobblin_snapshots(table: Any) -> Iterator[Any]:
    """The snapshots of the table's current state (the current one and its ancestors, newest first) that gobblin-py made."""
    from pyiceberg.table.snapshots import ancestors_of

    for snapshot in ancestors_of(table.current_snapshot(), table.metadata):
        if snapshot.summary is not None and snapshot.summary.get(COMMIT_ID) is not None:
            yield snapshot


def other_dataset(table: Any, dataset: str) -> str | None:
    """Another dataset than `dataset` that a gobblin-py snapshot of the table's current state committed, or None."""
    for s in gobblin_snapshots(table):
        found = s.summary.get(DATASET)
        if found is not None and found != dataset:
            return str(found)
    return None


def has_commit(table: Any, commit_id: str) -> bool:
    """True when the table's current state holds the snapshot tagged `commit_id` (a rolled-back one does not count)."""
    return any(s.summary.get(COMMIT_ID) == commit_id for s in gobblin_snapshots(table))


def history_complete(table: Any) -> bool:
    """Whether the current snapshot's ancestry reaches back to the table's first snapshot: False once an ancestor was
    expired (`expire_snapshots`), when a commit's absence from the snapshot log proves nothing. pyiceberg's expiry
    clears the parent id of the oldest snapshot left, so that alone does not tell: a first snapshot also has sequence
    number 1 (format v2) and its summary's totals equal what it added."""
    from pyiceberg.table.snapshots import ancestors_of

    oldest = None
    for oldest in ancestors_of(table.current_snapshot(), table.metadata):
        pass
    if oldest is None:
        return True
    if oldest.parent_snapshot_id is not None or (table.metadata.format_version >= 2 and (oldest.sequence_number or 0) > 1):
        return False
    summary = oldest.summary
    if summary is None:
        return False
    for total, added in (("total-data-files", "added-data-files"), ("total-records", "added-records")):
        if int(summary.get(total) or 0) > int(summary.get(added) or 0):
            return False
    return True


def is_committed(table: Any, name: str, commit_id: str, paths: list[str]) -> bool:
    """Whether the commit tagged `commit_id`, which adds the data files `paths`, is in the table's current state: its
    snapshot among the current one's ancestors, or, when some of them were expired, all of its files live in the
    table (a commit adds all of them or none). Some live and some not: CommitError naming the table and a file."""
    if has_commit(table, commit_id):
        return True
    if history_complete(table):
        return False
    from pyiceberg.manifest import DataFileContent

    live = {e.data_file.file_path for e in _live_entries(table) if e.data_file.content == DataFileContent.DATA}
    present = [p for p in paths if p in live]
    if len(present) == len(paths):
        log.info("table %s: commit %s found by its %d file(s), all live in the table (its snapshot was expired)",
                 name, commit_id, len(paths))
        return True
    if present:
        missing = next(p for p in paths if p not in live)
        raise CommitError(f"table {name}: commit {commit_id} is neither in the table's snapshot log (expired) nor wholly "
                          f"in its files: {len(present)} of its {len(paths)} files are live ({present[0]} …) and "
                          f"{missing} is not, so another writer removed or rewrote some of them. Check the table's "
                          "rows of this commit's range, then end the commit with `gobblin-py recover JOB.yaml --dataset "
                          "DATASET --abandon`")
    return False


def recorded_field_ids(table: Any) -> dict[str, int]:
    """name → field id of the columns of the newest gobblin-py commit that recorded them (none before that)."""
    for s in gobblin_snapshots(table):
        raw = s.summary.get(FIELD_IDS)
        if raw:
            try:
                return {str(k): int(v) for k, v in json.loads(raw).items()}
            except (ValueError, TypeError, AttributeError):
                log.warning("snapshot %s has an unreadable %s summary: %r", s.snapshot_id, FIELD_IDS, raw)
    return {}


def field_ids(schema: Any, names: list[str]) -> str:
    """The `FIELD_IDS` summary of a commit whose files hold the top-level columns `names`, in the table's `schema`."""
    by_name = {f.name: f.field_id for f in schema.fields}
    return json.dumps({n: by_name[n] for n in names if n in by_name}, sort_keys=True)


def changed_identity(table: Any, output: Any, name: str) -> str | None:
    """Why this run's files (Arrow schema `output`, no field ids: readers map their columns by the table's name
    mapping) must not be added because another writer renamed or dropped one of their columns since the job's
    last commit, naming the column; None when every column still has the field id it was committed as. The id
    expected for a column is the one the job's last commit recorded, else the one the name mapping gives its name."""
    schema = table.schema()
    by_name = {f.name: f for f in schema.fields}
    by_id = {f.field_id: f for f in schema.fields}
    recorded = recorded_field_ids(table)
    mapped: dict[str, set[int]] = {}
    mapping = table.metadata.name_mapping()
    for field in mapping or ():
        if field.field_id is not None:
            for alias in field.names:
                mapped.setdefault(alias, set()).add(field.field_id)
    for column in output.names:
        expected = recorded.get(column)
        if expected is None and column not in by_name and len(mapped.get(column, ())) == 1:
            [expected] = mapped[column]
        if expected is None:
            continue  # a new column
        current = by_id.get(expected)
        if current is None:
            return (f"table {name}: column {column!r} (field id {expected}) was dropped by another writer since this "
                    f"job's last commit, and this run's Parquet files still hold it: added again, it would be a new "
                    f"column {column!r} to which readers could resolve the values dropped from the earlier files. "
                    f"Remove the field from the job's output (its schema, or a converter that drops it)")
        if current.name != column:
            return (f"table {name}: column {column!r} (field id {expected}) was renamed to {current.name!r} by another "
                    f"writer since this job's last commit, and this run's Parquet files still name it {column!r}: "
                    f"adding them would add a new column {column!r} and readers would resolve the earlier files' "
                    f"{column!r} to it, leaving {current.name!r} NULL for every row the job wrote. Rename it back "
                    f"(ALTER TABLE {name} RENAME COLUMN {current.name} TO {column}) or make the job write "
                    f"{current.name!r} (in its schema, or a converter that renames the field)")
        found = by_name.get(column)
        if found is not None and found.field_id != expected:
            return (f"table {name}: column {column!r} is field id {found.field_id} in the table, not {expected} as this "
                    f"job's last commit recorded: another writer dropped and added it again, and readers could resolve "
                    f"the earlier files' {column!r} to either. Remove the field from the job's output, or rewrite the "
                    "table's earlier files before adding more")
    return None


def latest_marks(table: Any, table_name: str, job: str) -> dict[str, TableMark]:
    """dataset → the newest gobblin-py snapshot of `job` for it in the table's current state."""
    out: dict[str, TableMark] = {}
    for s in gobblin_snapshots(table):
        summary = s.summary
        dataset = summary.get(DATASET)
        if summary.get(JOB) != job or dataset is None or dataset in out or summary.get(COMPACTION) is not None:
            continue
        try:
            watermarks = json.loads(summary.get(WATERMARKS) or "{}")
        except ValueError:
            watermarks = None
        if not isinstance(watermarks, dict):
            raise CommitError(f"table {table_name}: snapshot {s.snapshot_id} (commit {summary.get(COMMIT_ID)}) has an "
                              f"unreadable {WATERMARKS} summary: {summary.get(WATERMARKS)!r}")
        out[dataset] = TableMark(table_name, summary.get(RUN_ID, ""), summary.get(COMMIT_ID, ""), s.snapshot_id,
                                 s.timestamp_ms, watermarks)
    return out


def resumable_marks(table: Any, table_name: str, job: str, datasets: list[str]) -> dict[str, tuple[TableMark, dict[str, Any]]]:
    """dataset → its newest mark, and the watermarks of all of `job`'s snapshots of it in the table's current state
    merged (each key's value from the newest that has it), for `datasets` the job has snapshots of. CommitError
    naming the table when they do not add up to the whole the newest recorded (`WATERMARK_KEYS`; without it,
    when some snapshots were expired), as a dataset resumed from them would extract again what the rest covered."""
    newest = {d: m for d, m in latest_marks(table, table_name, job).items() if d in datasets}
    merged: dict[str, dict[str, Any]] = {d: {} for d in newest}
    for s in gobblin_snapshots(table):
        summary = s.summary
        dataset = summary.get(DATASET)
        if dataset not in merged or summary.get(JOB) != job or summary.get(COMPACTION) is not None:
            continue
        for key, value in json.loads(summary.get(WATERMARKS) or "{}").items():
            merged[dataset].setdefault(key, value)
    complete = None
    out = {}
    for dataset, mark in newest.items():
        recorded = table.metadata.snapshot_by_id(mark.snapshot_id).summary.get(WATERMARK_KEYS)
        found = len(merged[dataset])
        if recorded is not None and found != int(recorded):
            why = (f"hold {found} of the {recorded} watermark keys its last commit left (older snapshots expired)"
                   if found < int(recorded) else
                   f"hold {found} watermark keys and its last commit left {recorded} (keys reset since?)")
        elif recorded is None and not (complete if complete is not None else (complete := history_complete(table))):
            why = "do not record how many watermark keys it holds, and some of them were expired"
        else:
            out[dataset] = (mark, merged[dataset])
            continue
        raise CommitError(f"table {table_name}: the state store holds nothing of dataset {dataset} (a new or lost work "
                          f"directory), and the table's snapshots of job {job} for it {why}, so where the job was cannot "
                          "be read safely: extracting from there could add records again. Restore the work directory, "
                          f"or set the dataset's watermarks (`gobblin-py state reset JOB.yaml --dataset {dataset} --to "
                          "KEY=VALUE …`), then run again")
    return out


def live_file_under(table: Any, prefix: str) -> str | None:
    """A data file the table's current snapshot lists under `prefix` (a URI), or None."""
    from pyiceberg.manifest import DataFileContent

    return next((e.data_file.file_path for e in _live_entries(table)
                 if e.data_file.content == DataFileContent.DATA and e.data_file.file_path.startswith(prefix)), None)


def read_schemas(io: Any, paths: list[str]) -> Any:
    """The Arrow schema of the Parquet files at `paths` (read from their footers), unified by name."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schemas = []
    for path in paths:
        with io.new_input(path).open() as stream:
            schemas.append(pq.read_schema(stream))
    try:
        return pa.unify_schemas(schemas)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise CommitError(f"the Parquet files of this commit disagree on a field's type: {exc} (files: {', '.join(paths)})") from None


_PROMOTIONS = {("int", "long"), ("float", "double")}


def _promotable(old: Any, new: Any) -> bool:
    """Whether a table column of type `old` may become `new` (Iceberg's allowed type promotions)."""
    from pyiceberg.types import DecimalType

    if old == new:
        return True
    if isinstance(old, DecimalType) and isinstance(new, DecimalType):
        return new.scale == old.scale and new.precision >= old.precision
    return (str(old), str(new)) in _PROMOTIONS


def to_iceberg_schema(arrow_schema: Any) -> Any:
    """The Iceberg schema of an Arrow schema, with fresh field ids."""
    from pyiceberg.catalog import Catalog
    from pyiceberg.schema import assign_fresh_schema_ids

    return assign_fresh_schema_ids(Catalog._convert_schema_if_needed(arrow_schema))


def breaking_change(table_schema: Any, output: Any, table: str) -> str | None:
    """Why appending files of the Arrow schema `output` to a table of `table_schema` would break its readers, naming
    the field; None when the output is the table's schema, or one the table can evolve to by union by name (new
    optional fields, Iceberg's type promotions, a required field made optional)."""
    new = {f.name: f for f in to_iceberg_schema(output).fields}
    for field in table_schema.fields:
        found = new.get(field.name)
        if found is None:
            if field.required:
                return (f"table {table}: required field {field.name!r} ({field.field_type}) is not in this run's output; "
                        "files without it would break the table's readers")
            continue
        if found.field_type.is_primitive != field.field_type.is_primitive or (
                found.field_type.is_primitive and not _promotable(field.field_type, found.field_type)):
            return (f"table {table}: field {field.name!r} is {field.field_type} in the table and {found.field_type} in "
                    "this run's output; that change would break the table's readers (allowed: int→long, float→double, "
                    "a wider decimal, a new optional field)")
    return None


def evolvable(output: Any, table_schema: Any) -> Any:
    """`output` with the fields the table lacks made optional (a column added to a table with rows is optional)."""
    import pyarrow as pa

    known = {f.name for f in table_schema.fields}
    return pa.schema([f if f.name in known else f.with_nullable(True) for f in output], metadata=output.metadata)


def needs_evolution(table_schema: Any, output: Any) -> bool:
    """Whether union by name would change the table: a new field, a promoted type, a required field made optional."""
    current = {f.name: f for f in table_schema.fields}
    for f in to_iceberg_schema(output).fields:
        old = current.get(f.name)
        if old is None or (f.field_type.is_primitive and old.field_type != f.field_type) or (old.required and not f.required):
            return True
    return False


def partition_spec(schema: Any, column: str, granularity: str, table: str) -> Any:
    """`day(ts)` (or hour/month/year) on the Iceberg `schema`; the column must be a timestamp or a date."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import DayTransform, HourTransform, MonthTransform, YearTransform
    from pyiceberg.types import DateType, TimestampType, TimestamptzType

    transform = {"HOUR": HourTransform, "DAY": DayTransform, "MONTH": MonthTransform, "YEAR": YearTransform}[granularity]()
    try:
        field = schema.find_field(column)
    except ValueError:
        raise CommitError(f"table {table}: the partition column {column!r} is not in the Parquet files "
                          f"(their fields: {', '.join(f.name for f in schema.fields)})") from None
    allowed = (TimestampType, TimestamptzType) if granularity == "HOUR" else (TimestampType, TimestamptzType, DateType)
    if not isinstance(field.field_type, allowed):
        raise CommitError(
            f"table {table}: the partition column {column!r} is {field.field_type} in the Parquet files, and "
            f"{TRANSFORMS[granularity]}({column}) needs a timestamp: declare it in the schema as "
            '{"type": "long", "logicalType": "timestamp-millis"} (or timestamp-micros)')
    return PartitionSpec(PartitionField(source_id=field.field_id, field_id=1000, transform=transform,
                                        name=f"{column}_{TRANSFORMS[granularity]}"))


def retryable(exc: BaseException) -> bool:
    """A conflict with a concurrent committer (or a busy catalog database): reload the table and try again."""
    from pyiceberg.exceptions import (CommitFailedException, CommitStateUnknownException, NamespaceAlreadyExistsError,
                                      TableAlreadyExistsError)

    if isinstance(exc, (CommitFailedException, CommitStateUnknownException, TableAlreadyExistsError, NamespaceAlreadyExistsError)):
        return True
    # a SQL catalog: the database busy, or a row a concurrent committer inserted first (the same new table); not the
    # database unreachable or read-only, which `catalog_faults` names (retrying it here only took seconds)
    if type(exc).__module__.startswith("sqlalchemy"):
        return type(exc).__name__ == "IntegrityError" or (type(exc).__name__ == "OperationalError" and bool(_CONFLICT.search(str(exc))))
    return False


def with_retries(what: str, attempts: int, action: Callable[[], None], sleep: Callable[[float], None] = time.sleep) -> None:
    """Run `action` until it succeeds, retrying a conflict (`retryable`) with jittered exponential backoff
    (0.1 s doubling, at most 5 s) up to `attempts` times; then CommitError naming `what` and the last conflict."""
    for attempt in range(1, attempts + 1):
        try:
            action()
            return
        except Exception as exc:  # noqa: BLE001 - only conflicts are retried, anything else goes up as it is
            if not retryable(exc):
                raise
            if attempt == attempts:
                raise CommitError(f"{what}: still conflicting with concurrent commits after {attempts} attempts "
                                  f"({type(exc).__name__}: {exc}); the commit stays pending and the next run retries it") from exc
            delay = min(5.0, 0.1 * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)
            log.info("%s: %s, retrying in %.2fs (attempt %d of %d)", what, type(exc).__name__, delay, attempt, attempts)
            sleep(delay)


def _live_entries(table: Any) -> Iterator[Any]:
    """The manifest entries of every file the table's current snapshot lists (none deleted), read from its manifests."""
    current = table.current_snapshot()
    if current is None:
        return
    for manifest in current.manifests(table.io):
        yield from manifest.fetch_manifest_entry(table.io, discard_deleted=True)


def live_data_paths(table: Any) -> set[str]:
    """The paths of the data files the table's current snapshot lists."""
    from pyiceberg.manifest import DataFileContent

    return {e.data_file.file_path for e in _live_entries(table) if e.data_file.content == DataFileContent.DATA}


def live_files(table: Any) -> list[TableFile]:
    """Every data and delete file the table's current snapshot lists (no data file is opened)."""
    from pyiceberg.manifest import DataFileContent

    metadata, schema = table.metadata, table.schema()
    specs, default = table.specs(), metadata.default_spec_id
    out = []
    for entry in _live_entries(table):
        f = entry.data_file
        added = metadata.snapshot_by_id(entry.snapshot_id) if entry.snapshot_id is not None else None
        summary = added.summary if added is not None and added.summary is not None else {}
        out.append(TableFile(path=f.file_path, size=f.file_size_in_bytes, records=f.record_count,
                             partition=specs[f.spec_id].partition_to_path(f.partition, schema),
                             added_ms=added.timestamp_ms if added is not None else table.current_snapshot().timestamp_ms,
                             data=f.content == DataFileContent.DATA, current_spec=f.spec_id == default,
                             compacted=summary.get(COMPACTION) is not None))
    return out


def replace_files(table: Any, name: str, replaced: list[str], added: list[str], properties: dict[str, str],
                  keeps_data: bool, record: str) -> None:
    """One snapshot of `table` that removes the data files `replaced` and adds the Parquet files `added`: readers see
    all of the first or all of the second. Its operation is `replace` when `keeps_data` (the same records, as
    Iceberg's own rewrite makes it; incremental readers skip it), else `overwrite` (a dedup removed records).
    CommitError, with nothing changed, when a file to remove is no longer in the table or one to add already is
    (`record` names the commit record to abandon then)."""
    from pyiceberg.exceptions import ValidationError, ValidationException
    from pyiceberg.io.pyarrow import parquet_file_to_data_file
    from pyiceberg.manifest import DataFileContent
    from pyiceberg.table.snapshots import Operation, Summary
    from pyiceberg.table.update.snapshot import _OverwriteFiles

    live = {e.data_file.file_path: e.data_file for e in _live_entries(table) if e.data_file.content == DataFileContent.DATA}
    gone = [p for p in replaced if p not in live]
    if gone:
        raise CommitError(f"table {name}: {len(gone)} of the {len(replaced)} files this compaction merged are no longer "
                          f"in the table ({gone[0]} …): another writer removed or rewrote them. Nothing was replaced, and "
                          "the merged files are not in the table: abandon this commit (`gobblin-py recover JOB.yaml "
                          f"--dataset {record} --abandon`) and compact again")
    there = [p for p in added if p in live]
    if there:
        raise CommitError(f"table {name}: the merged file {there[0]} is already in the table, without this compaction's "
                          "snapshot (a rolled-back table?); nothing was replaced")

    class _ReplaceFiles(_OverwriteFiles):
        """pyiceberg's file overwrite, its snapshot recorded as a `replace` (pyiceberg 0.12 computes the summary's
        totals only for append/overwrite/delete, so they are computed as an overwrite's, the same numbers)."""

        def _summary(self, snapshot_properties: Any = None) -> Any:
            summary = super()._summary(snapshot_properties or {})
            return Summary(Operation.REPLACE, **summary.additional_properties)

    tx = table.transaction()
    producer_cls = _ReplaceFiles if keeps_data else _OverwriteFiles
    producer = producer_cls(operation=Operation.OVERWRITE, transaction=tx, io=table.io, snapshot_properties=properties)
    try:
        for path in replaced:
            producer.delete_data_file(live[path])
        for path in added:
            producer.append_data_file(parquet_file_to_data_file(table.io, table.metadata, path))
        producer.commit()
    except (ValueError, TypeError, ValidationError, ValidationException) as exc:
        raise CommitError(f"table {name}: cannot replace {len(replaced)} file(s) with {len(added)} merged file(s) "
                          f"({added[0] if added else 'none'} …): {exc}") from exc
    tx.commit_transaction()
