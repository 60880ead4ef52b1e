"""The mysql_cdc source's split: one snapshot chunk of a table, or the table's changes in a binlog range."""

from __future__ import annotations

from typing import Any

from gobblin_py.api.split import Split


class MysqlCdcSplit(Split):
    """With `chunk` set: the rows of `table` whose primary key is in `(chunk_lo, chunk_hi]` (None: unbounded), as of a
    binlog position the task takes (`snapshot.py`). Else: the changes of `table` in transactions whose commit ends in
    `(low, end]` (positions as `position.py` keeps them), each kept only after its key's chunk (`chunks`: each
    snapshot chunk's range and high position) when the table's snapshot ended since its last stream."""

    table: str  # the dataset: `database.table`
    database: str
    table_name: str
    columns: list[str]
    casts: dict[str, str] = {}  # column → the conversion of its driver value (schemas.mysql_columns.CONVERT)
    key: list[str]  # the primary key's columns, in order
    avro_schema: dict[str, Any]
    low: int
    end: int
    base: str  # the binlog files' base name (`mysql-bin`)
    width: int = 6
    chunk: int | None = None
    chunk_lo: list[Any] | None = None
    chunk_hi: list[Any] | None = None
    chunks: list[tuple[list[Any] | None, list[Any] | None, int]] = []
    native: bool = False  # a chunk whose columns ConnectorX reads as PyMySQL does (`snapshot.read_chunk_native`)
    read_bytes: int = 0  # about what the task reads: a chunk's rows, or the binlog of the range (all tables' events)
    routed: list[str] = []  # the run's tables one read of the binlog over (decode_low, end] serves (`decode.py`)
    decode_low: int = 0
