"""The `delta` publisher's settings (read by the publisher and by the table helpers)."""

from __future__ import annotations

import re
import string
from typing import Literal

from pydantic import Field, field_validator, model_validator

from gobblin_py.api import Settings
from gobblin_py.builtin.extras import require
from gobblin_py.builtin.publishers.changes import UpsertSettings
from gobblin_py.fs.paths import FsLocation


class DeltaPartition(Settings):
    """The table's partition column: `{column: ts, granularity: DAY}` partitions by `ts_day` ("2026-01-01"), a string
    column the Parquet files do not hold (Delta keeps partition values in the log). The loader fills it from
    `writer.partition`, whose files hold one partition each."""

    column: str = Field(description="the time column the writer partitions by")
    granularity: Literal["HOUR", "DAY", "MONTH", "YEAR"] = Field(default="DAY", description="hour, day, month or year")
    unit: Literal["millis", "seconds"] = Field(default="millis", description="what the column counts when it holds numbers")

    @property
    def name(self) -> str:
        """The table's partition column: `ts_day`."""
        return f"{self.column}_{self.granularity.lower()}"


class DeltaPublisherSettings(UpsertSettings):
    table_uri: FsLocation = Field(description="the Delta table: a path or a URL (s3://bucket/lake/{dataset}); `{dataset}` "
                                              "is replaced by the dataset's name, as a whole path segment")
    storage_options: dict[str, str] = Field(
        default_factory=dict, description="delta-rs storage options that are no secret (AWS_ENDPOINT_URL, AWS_REGION, "
                                          "AWS_ALLOW_HTTP); credentials come from the environment (AWS_ACCESS_KEY_ID …)")
    errors_dir: FsLocation | None = Field(default=None, description="where error files go (unset: `_errors` beside the "
                                                                    "table, outside it, so a vacuum never sees them)")
    partition: DeltaPartition | None = Field(default=None, description="filled from writer.partition by the loader: leave it out")
    commit_attempts: int = Field(default=8, ge=1, description="tries of a commit that conflicts with concurrent commits")

    @model_validator(mode="after")
    def _installed(self) -> DeltaPublisherSettings:
        require("deltalake", "the delta publisher needs deltalake", "delta")
        return self

    @field_validator("table_uri")
    @classmethod
    def _table_uri(cls, value: str) -> str:
        fields = {f for _, f, _, _ in string.Formatter().parse(value) if f is not None}
        if fields - {"dataset"}:
            raise ValueError(f"only {{dataset}} may be substituted in table_uri; got {value!r}")
        if "{dataset}" in value and not re.search(r"(^|/)\{dataset\}(/|$)", value):
            raise ValueError(f"{{dataset}} must be a whole path segment of table_uri (…/lake/{{dataset}}); got {value!r}")
        return value

    @field_validator("storage_options")
    @classmethod
    def _no_secret(cls, value: dict[str, str]) -> dict[str, str]:
        secret = sorted(k for k in value if re.search(r"SECRET|TOKEN|PASSWORD|ACCESS_KEY_ID|SESSION", k.upper()))
        if secret:
            raise ValueError(f"storage_options {', '.join(secret)} would be written into every commit record: give "
                             "credentials to delta-rs through the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)")
        return value
