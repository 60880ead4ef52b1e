"""The jdbc source's view of a MySQL/MariaDB table's columns: the shared mapping (`builtin.schemas.mysql_columns`, also
read by `mysql_cdc`) and which MySQL types may be a watermark column."""

from __future__ import annotations

from gobblin_py.builtin.schemas.mysql_columns import COLUMNS_SQL, CONVERTED, SIMPLE, read_columns
from gobblin_py.builtin.sources.jdbc.columns import Column
from gobblin_py.builtin.sources.jdbc.ranges import WatermarkKind

__all__ = ["COLUMNS_SQL", "CONVERTED", "SIMPLE", "WATERMARK_KINDS", "read_columns", "watermark_kind"]

WATERMARK_KINDS = {"tinyint": WatermarkKind.INTEGER, "smallint": WatermarkKind.INTEGER,
                   "mediumint": WatermarkKind.INTEGER, "int": WatermarkKind.INTEGER, "bigint": WatermarkKind.INTEGER,
                   "datetime": WatermarkKind.TIMESTAMP, "timestamp": WatermarkKind.TIMESTAMP, "date": WatermarkKind.DATE}


def watermark_kind(column: Column) -> str | None:
    """The watermark kind of an integer, datetime, timestamp or date column; None for any other."""
    return WATERMARK_KINDS.get(column.type_name)
