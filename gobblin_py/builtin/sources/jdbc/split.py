"""The jdbc source's split: one sub-range of one table's watermark column, and how its task reads it."""

from __future__ import annotations

from typing import Any

from gobblin_py.api.split import Split
from gobblin_py.api.types import WatermarkValue


class JdbcSplit(Split):
    """Rows of `table` with `lo < watermark column <= hi` (values as the state stores them), with the selection and
    Avro schema resolved at planning, so every task of a run reads the same columns the same way."""

    table: str  # the job file's name for the table (`source.tables[].table`)
    schema_name: str  # the catalog's canonical schema and table names
    table_name: str
    columns: list[str]
    casts: dict[str, str] = {}  # column → the SQL cast it is read through
    native: bool  # whether the native (Arrow) reader gives these columns exactly
    kind: str  # WatermarkKind of the watermark column
    watermark_not_null: bool = False  # declared NOT NULL at planning: a range from the start reads no `IS NULL` arm
    lo: WatermarkValue
    hi: WatermarkValue
    avro_schema: dict[str, Any]
    estimated_rows: float = 0.0
    catalog_row_bytes: float | None = None  # a first load's bytes per row by the catalog (no extraction statistics yet)
    key_column: str | None = None  # a first load's slice of the primary key: `key_lo < key_column <= key_hi`
    key_lo: int | None = None  # None: unbounded
    key_hi: int | None = None
