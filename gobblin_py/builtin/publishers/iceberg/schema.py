"""The table's schema against a commit's Parquet files: read the files' schema from their footers, refuse a change that
would break readers or a column another writer renamed or dropped, evolve by union by name, and partition by time."""

from __future__ import annotations

from typing import Any

from gobblin_py.builtin.publishers.iceberg.snapshots import recorded_field_ids
from gobblin_py.errors import CommitError

TRANSFORMS = {"HOUR": "hour", "DAY": "day", "MONTH": "month", "YEAR": "year"}
"""The writer's time-partitioning granularity → the Iceberg partition transform that yields the same partitions."""


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
