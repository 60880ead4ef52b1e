"""The mysql_cdc source's split: one table's changes of the transactions committing in a binlog range, after its
snapshot when it takes one."""

from __future__ import annotations

from typing import Any

from gobblin_py.api.split import Split


class MysqlCdcSplit(Split):
    """Changes of `table` in transactions whose commit ends in `(low, end]` (positions as `position.py` keeps them),
    with the columns resolved at planning; with `snapshot`, the table's rows first, read in primary-key chunks."""

    table: str  # the dataset: `database.table`
    database: str
    table_name: str
    columns: list[str]
    casts: dict[str, str] = {}  # column → the conversion of its driver value (jdbc.mysql.CONVERT)
    key: list[str]  # the primary key's columns, in order
    integer_key: bool  # every key column an integer: the snapshot may be chunked by key ranges
    avro_schema: dict[str, Any]
    low: int
    end: int
    base: str  # the binlog files' base name (`mysql-bin`)
    width: int = 6
    snapshot: bool
