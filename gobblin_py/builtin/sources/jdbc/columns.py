"""The jdbc source's view of a table's columns: the shared PostgreSQL mapping (`builtin.schemas.postgres_columns`,
also read by `postgres_cdc`) and which PostgreSQL types may be a watermark column."""

from __future__ import annotations

from gobblin_py.builtin.schemas.postgres_columns import (
                                                         AVRO_NAME,
                                                         COLUMNS_SQL,
                                                         SIMPLE,
                                                         TEXT_LOADED,
                                                         Column,
                                                         avro_schema,
                                                         check_mapped,
                                                         read_columns,
)
from gobblin_py.builtin.sources.jdbc.ranges import WatermarkKind

__all__ = ["AVRO_NAME", "COLUMNS_SQL", "SIMPLE", "TEXT_LOADED", "WATERMARK_KINDS", "Column", "avro_schema", "check_mapped",
           "read_columns"]

WATERMARK_KINDS = {"int2": WatermarkKind.INTEGER, "int4": WatermarkKind.INTEGER, "int8": WatermarkKind.INTEGER,
                   "timestamptz": WatermarkKind.TIMESTAMPTZ, "timestamp": WatermarkKind.TIMESTAMP, "date": WatermarkKind.DATE}
"""PostgreSQL types a watermark column may have, and the kind of bound each gets."""
