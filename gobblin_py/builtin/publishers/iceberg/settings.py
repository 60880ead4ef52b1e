"""The `iceberg` publisher's settings (its part of the job file) and the embedded catalog the loader fills in: the
model validates the job before anything runs, and the docs' settings tables are generated from its fields."""

from __future__ import annotations

import re
import string
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from gobblin_py.api import Settings
from gobblin_py.builtin.extras import require
from gobblin_py.builtin.publishers.changes import UpsertSettings
from gobblin_py.fs import Location
from gobblin_py.fs.paths import FsLocation

DEFAULT_WAREHOUSE = "./warehouse"


class TablePartition(Settings):
    """The table's time partitioning: `{column: ts, granularity: DAY}` is `day(ts)`. The loader fills it from
    `writer.partition`, whose files hold one partition each (as `add_files` requires)."""

    column: str = Field(description="the timestamp column the table is partitioned by")
    granularity: Literal["HOUR", "DAY", "MONTH", "YEAR"] = Field(default="DAY", description="the transform: hour, day, month or year")


def default_catalog(work_dir: Any) -> dict[str, str]:
    """The embedded catalog: pyiceberg's SQL catalog in a SQLite file under the job's work directory."""
    return {"name": "gobblin_py", "type": "sql", "uri": f"sqlite:///{Location(work_dir) / 'iceberg' / 'catalog.db'}"}


class IcebergPublisherSettings(UpsertSettings):
    table: str = Field(description="`<namespace>.<name>`; `{dataset}` is replaced by the dataset's name (a '.' in it as '_' "
                                   "unless the catalog is REST: `db.{dataset}` names `db.public_orders` for `public.orders`)")
    warehouse: FsLocation = Field(default=DEFAULT_WAREHOUSE, validate_default=True,
                                  description="where data files are published and new tables are created (a path or a URL)")
    catalog: dict[str, str] = Field(default_factory=dict,
                                    description="pyiceberg catalog properties (load_catalog); unset: SQLite under the work directory")
    errors_dir: FsLocation | None = Field(default=None, description="where error files go (unset: <warehouse>/_errors)")
    partition: TablePartition | None = Field(default=None, description="filled from writer.partition by the loader: leave it out")
    commit_attempts: int = Field(default=8, ge=1, description="tries of a commit that conflicts with concurrent commits")

    @model_validator(mode="after")
    def _installed(self) -> IcebergPublisherSettings:
        require("pyiceberg.catalog.sql", "the iceberg publisher needs pyiceberg", "tables")
        return self

    @field_validator("table")
    @classmethod
    def _table(cls, value: str) -> str:
        fields = {f for _, f, _, _ in string.Formatter().parse(value) if f is not None}
        if fields - {"dataset"}:
            raise ValueError(f"only {{dataset}} may be substituted in the table name; got {value!r}")
        if not re.fullmatch(r"[A-Za-z0-9_{}-]+(\.[A-Za-z0-9_{}-]+)+", value):
            raise ValueError(f"expected <namespace>.<name> of letters, digits, '_' and '-' (with {{dataset}}); got {value!r}")
        return value
