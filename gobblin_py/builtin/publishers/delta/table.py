"""What the `delta` publisher reads of a Delta table and of the Parquet files it adds: the table opened through
delta-rs, the files' schema, rows and partition values from their footers, and the schema rules (new nullable
columns merged; a column dropped or of another type refused, naming it)."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from gobblin_py.builtin.publishers.delta.settings import DeltaPartition
from gobblin_py.errors import CommitError
from gobblin_py.fs import Location, filesystem_for

COMMIT_ID = "gobblin-py.commit-id"
JOB = "gobblin-py.job"
RUN_ID = "gobblin-py.run-id"
DATASET = "gobblin-py.dataset"
WATERMARKS = "gobblin-py.watermarks"
TABLE_ID = "gobblin-py.table-id"
EPOCH = "gobblin-py.epoch"  # the fencing epoch of the job's lease that committed it
READ_VERSION = "gobblin-py.read-version"
"""Keys of the commitInfo (custom metadata) of every commit the publisher makes."""

PARTITION_FORMATS = {"HOUR": "%Y-%m-%d-%H", "DAY": "%Y-%m-%d", "MONTH": "%Y-%m", "YEAR": "%Y"}


def app_id(job: str, dataset: str) -> str:
    """The Delta transaction's application id of one dataset of one job (`txn.appId`)."""
    return f"gobblin-py/{job}/{dataset}"


def relative(table_uri: str, path: str) -> str:
    """`path` as the table's log names it: relative to the table's root when under it, else as it is."""
    root = table_uri.rstrip("/") + "/"
    return path[len(root):] if path.startswith(root) else path


def open_table(uri: str, storage_options: dict[str, str]) -> Any:
    """The Delta table at `uri` (its latest version), None when there is none."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(uri, storage_options=storage_options or None)
    except TableNotFoundError:
        return None


def transaction_done(table: Any, app: str, version: int, uri: str, stale: str) -> bool:
    """Whether the table's transaction version of `app` already reaches `version` (a replay: nothing to do); a
    CommitError saying `stale` when it is neither that nor the version just before (another commit of the app since)."""
    done = table.transaction_version(app) or 0
    if done >= version:
        return True
    if done != version - 1:
        raise CommitError(f"table {uri}: the transaction version of {app} is {done}, not {version - 1} as when {stale}")
    return False


@dataclass(frozen=True)
class DataFile:
    """One published Parquet file as the commit adds it."""

    rel: str
    """Its path relative to the table's root (what the log's `add.path` holds)."""
    size: int
    rows: int
    schema: Any
    partition: str | None


def read_file(location: str, rel: str, partition: DeltaPartition | None, table: str) -> DataFile:
    """The footer of the Parquet file at `location` (its size from the store), and its partition value: the file must
    hold one partition, as the writer's files do."""
    import pyarrow.parquet as pq

    loc = Location(location)
    fs = filesystem_for(loc)
    size = fs.size(loc)
    if size is None:
        raise CommitError(f"table {table}: the published file {loc} is missing")
    with fs.open_read(loc) as stream:
        pf = pq.ParquetFile(stream)
        schema, rows = pf.schema_arrow, pf.metadata.num_rows
        value = _partition_value(pf, partition, loc, table) if partition is not None else None
    return DataFile(rel, size, rows, schema, value)


def _partition_value(pf: Any, p: DeltaPartition, loc: str, table: str) -> str:
    """The file's partition value (`2026-01-01` for DAY), from its time column's smallest and largest values."""
    import pyarrow.compute as pc

    if p.column not in pf.schema_arrow.names:
        raise CommitError(f"table {table}: the partition column {p.column!r} is not in {loc} "
                          f"(its columns: {', '.join(pf.schema_arrow.names)})")
    col = pf.read(columns=[p.column]).column(0)
    bounds = pc.min_max(col).as_py()
    values = []
    for v in (bounds["min"], bounds["max"]):
        if v is None:
            raise CommitError(f"table {table}: {loc} has no value in its partition column {p.column!r}")
        if isinstance(v, int):
            v = dt.datetime.fromtimestamp(v / (1000 if p.unit == "millis" else 1), dt.UTC)
        elif isinstance(v, dt.datetime) and v.tzinfo is None:
            v = v.replace(tzinfo=dt.UTC)
        elif not isinstance(v, dt.datetime):
            raise CommitError(f"table {table}: the partition column {p.column!r} is {col.type} in {loc}; expected a "
                              "timestamp or epoch numbers")
        values.append(v.astimezone(dt.UTC).strftime(PARTITION_FORMATS[p.granularity]))
    if values[0] != values[1]:
        raise CommitError(f"table {table}: {loc} spans partitions {values[0]} to {values[1]} of {p.name}; a file is added to "
                          "one partition")
    return values[0]


def add_actions(files: list[DataFile], partition: DeltaPartition | None, now_ms: int, data_change: bool = True,
                values: dict[str, str] | None = None) -> list[Any]:
    """The log's `add` actions for `files`, with their row counts as statistics; partition `values` given, or each
    file's value of `partition`. `data_change` false for files that only rearrange rows (a compaction's)."""
    from deltalake.transaction import AddAction

    def of(f: DataFile) -> dict[str, str]:
        return dict(values) if values is not None else {partition.name: f.partition} if partition is not None else {}

    return [AddAction(f.rel, f.size, of(f), now_ms, data_change, json.dumps({"numRecords": f.rows})) for f in files]


def output_schema(files: list[DataFile], partition: DeltaPartition | None, table: str) -> Any:
    """The Arrow schema of the commit's files unified by name, with the partition column (a string) last."""
    import pyarrow as pa

    try:
        schema = pa.unify_schemas([f.schema for f in files])
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise CommitError(f"table {table}: the Parquet files of this commit disagree on a column's type: {exc}") from None
    schema = pa.schema([f.with_nullable(True) for f in schema])  # a Delta column added later is nullable: all are
    if partition is not None:
        schema = schema.append(pa.field(partition.name, pa.string()))
    return schema


def _delta_types(schema: Any) -> dict[str, str]:
    """name → the Delta type of each column (an Arrow `timestamp[ms]` and `[us]` are both Delta's `timestamp`)."""
    import pyarrow as pa
    from deltalake import Schema

    fields = Schema.from_arrow(schema).fields if isinstance(schema, pa.Schema) else schema.fields
    return {f.name: str(getattr(f.type, "type", f.type)) for f in fields}  # a PrimitiveType by its name: "double"


def schema_change(table_schema: Any, output: Any, table: str, keeps_missing: bool = False) -> tuple[str | None, list[str]]:
    """Why files of the Arrow schema `output` cannot go into a table of the Delta `table_schema` (a column dropped or
    of another type, named), else None; and the columns the table gains (new, nullable). `keeps_missing`: a column the
    output lacks is no reason (upsert mode: the merge writes NULL in it for the keys it changes, as the iceberg
    upsert does; appended files would read NULL there for every row)."""
    current, new = _delta_types(table_schema), _delta_types(output)
    for name, kind in current.items():
        if name not in new and keeps_missing:
            continue
        if name not in new:
            return (f"table {table}: column {name!r} ({kind}) is not in this run's output; files without it would read "
                    "as NULL in it: put it back in the job's output, or drop it from the table first", [])
        if new[name] != kind:
            return (f"table {table}: column {name!r} is {kind} in the table and {new[name]} in this run's output; a type "
                    "change is not merged (a new nullable column is)", [])
    return None, [n for n in new if n not in current]
