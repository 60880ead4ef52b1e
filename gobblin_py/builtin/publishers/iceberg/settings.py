"""The `iceberg` publisher's settings (its part of the job file) and the embedded catalog the loader fills in: the
model validates the job before anything runs, and the docs' settings tables are generated from its fields."""

from __future__ import annotations

import re
import string
from typing import Any, Literal

from pydantic import Field, StrictBool, StrictInt, field_validator, model_validator

from gobblin_py.api import Settings
from gobblin_py.fs import Location
from gobblin_py.fs.paths import FsLocation
from gobblin_py.builtin.extras import require

DEFAULT_WAREHOUSE = "./warehouse"


class TablePartition(Settings):
    """The table's time partitioning: `{column: ts, granularity: DAY}` is `day(ts)`. The loader fills it from
    `writer.partition`, whose files hold one partition each (as `add_files` requires)."""

    column: str = Field(description="the timestamp column the table is partitioned by")
    granularity: Literal["HOUR", "DAY", "MONTH", "YEAR"] = Field(default="DAY", description="the transform: hour, day, month or year")


def default_catalog(work_dir: Any) -> dict[str, str]:
    """The embedded catalog: pyiceberg's SQL catalog in a SQLite file under the job's work directory."""
    return {"name": "gobblin_py", "type": "sql", "uri": f"sqlite:///{Location(work_dir) / 'iceberg' / 'catalog.db'}"}


class DeleteWhen(Settings):
    """Which changes delete their key's row (upsert mode): those whose `column` holds one of `equals`
    (`{column: op, equals: [d]}`, or a boolean column: `{column: _deleted, equals: [true]}`)."""

    column: str = Field(description="the column that marks a change as a delete (kept in the table, as every column)")
    equals: list[StrictBool | StrictInt | str] = Field(min_length=1, description="the values of `column` that mean the key's row is deleted")


class IcebergPublisherSettings(Settings):
    table: str = Field(description="`<namespace>.<name>`; `{dataset}` is replaced by the dataset's name (a '.' in it as '_' "
                                   "unless the catalog is REST: `db.{dataset}` names `db.public_orders` for `public.orders`)")
    warehouse: FsLocation = Field(default=DEFAULT_WAREHOUSE, validate_default=True,
                                  description="where data files are published and new tables are created (a path or a URL)")
    catalog: dict[str, str] = Field(default_factory=dict,
                                    description="pyiceberg catalog properties (load_catalog); unset: SQLite under the work directory")
    errors_dir: FsLocation | None = Field(default=None, description="where error files go (unset: <warehouse>/_errors)")
    partition: TablePartition | None = Field(default=None, description="filled from writer.partition by the loader: leave it out")
    commit_attempts: int = Field(default=8, ge=1, description="tries of a commit that conflicts with concurrent commits")
    mode: Literal["append", "upsert"] = Field(
        default="append", description="append: add each run's files; upsert: apply them as changes by `key`, one row per key")
    key: list[str] = Field(default_factory=list, description="upsert: the columns that identify a row (non-null in every change)")
    order_by: list[str] = Field(
        default_factory=list, description="upsert: the columns that order one key's changes within a commit, last wins "
                                          "(unset: position within one file; a key in two files is refused)")
    delete_when: DeleteWhen | None = Field(default=None, description="upsert: the changes that delete their key's row (unset: none)")
    truncate_when: DeleteWhen | None = Field(
        default=None, description="upsert: the changes that empty the table (a source's TRUNCATE, e.g. {column: _op, "
        "equals: [truncate]}): every row committed before the commit's last one goes, the changes after it in order_by "
        "apply; their key may be null (needs order_by; unset: such a change is an ordinary one, and a null key fails the commit)")

    @model_validator(mode="after")
    def _installed(self) -> IcebergPublisherSettings:
        require("pyiceberg.catalog.sql", "the iceberg publisher needs pyiceberg", "tables")
        return self

    @model_validator(mode="after")
    def _upsert(self) -> IcebergPublisherSettings:
        if self.mode == "append":
            given = [k for k in ("key", "order_by", "delete_when", "truncate_when") if getattr(self, k)]
            if given:
                raise ValueError(f"{', '.join(given)} only apply to mode: upsert (append mode adds every row as it is)")
            return self
        if not self.key:
            raise ValueError("mode: upsert needs key: the columns that identify a row, e.g. key: [id]")
        for name in ("key", "order_by"):
            columns = getattr(self, name)
            if len(set(columns)) != len(columns):
                raise ValueError(f"{name} names a column twice: {columns}")
        both = set(self.key) & set(self.order_by)
        if both:
            raise ValueError(f"{sorted(both)} is in both key and order_by: one key's changes would never differ in it")
        for name, marker in (("delete_when", self.delete_when), ("truncate_when", self.truncate_when)):
            if marker is not None and marker.column in self.key:
                raise ValueError(f"{name}.column {marker.column!r} is a key column: the marker must be another column "
                                 "(e.g. op)")
        if self.truncate_when is not None and not self.order_by:
            raise ValueError("truncate_when needs order_by: which changes of a commit follow a truncate (and apply) is "
                             "defined only by an order, e.g. order_by: [_lsn, _seq]")
        return self

    def upsert_spec(self) -> Any:
        """The key, order and delete marker of upsert mode, for `upsert.py`."""
        from gobblin_py.builtin.publishers.iceberg.upsert import UpsertSpec

        d, t = self.delete_when, self.truncate_when
        return UpsertSpec(tuple(self.key), tuple(self.order_by), d.column if d else None, tuple(d.equals) if d else (),
                          t.column if t else None, tuple(t.equals) if t else ())

    @field_validator("table")
    @classmethod
    def _table(cls, value: str) -> str:
        fields = {f for _, f, _, _ in string.Formatter().parse(value) if f is not None}
        if fields - {"dataset"}:
            raise ValueError(f"only {{dataset}} may be substituted in the table name; got {value!r}")
        if not re.fullmatch(r"[A-Za-z0-9_{}-]+(\.[A-Za-z0-9_{}-]+)+", value):
            raise ValueError(f"expected <namespace>.<name> of letters, digits, '_' and '-' (with {{dataset}}); got {value!r}")
        return value
