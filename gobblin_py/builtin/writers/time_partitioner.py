"""Time partitioning of output files by a record field, as Gobblin's TimeBasedAvroWriterPartitioner."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any, Literal

from pydantic import Field, field_validator

from gobblin_py.api import Settings
from gobblin_py.builtin.schemas.avro_time import epoch_millis
from gobblin_py.errors import RecordError

Granularity = Literal["MINUTE", "HOUR", "DAY", "MONTH", "YEAR"]

_JAVA_TOKENS = {"yyyy": "%Y", "MM": "%m", "dd": "%d", "HH": "%H", "mm": "%M"}
_BUCKET_MS = {"MINUTE": 60_000, "HOUR": 3_600_000, "DAY": 86_400_000}


PARTITION_HELP = "one directory per time bucket: {column, granularity, pattern, unit}; unset: none"
"""The `partition:` setting's description, shared by the file writers."""


class PartitionSettings(Settings):
    """A writer's `partition:`: one directory per time bucket of a record's column (Gobblin's TimeBasedAvroWriterPartitioner)."""

    column: str = Field(description="the time column: epoch millis (or seconds, see unit), in UTC")
    granularity: Granularity = Field(default="DAY", description="MINUTE, HOUR, DAY, MONTH or YEAR: the time bucket of a directory")
    pattern: str = Field(default="yyyy/MM/dd", pattern=r"^[A-Za-z/_=.-]+$",
                         description="the partition's directories under the dataset's: a relative path without '..'")
    unit: Literal["millis", "seconds"] = Field(default="millis", description="what the column's numbers count")

    @field_validator("pattern")
    @classmethod
    def _one_relative_path(cls, value: str) -> str:
        """A partition is a directory under its dataset's: an absolute pattern or a `..` would write outside the job's
        directories."""
        if value.startswith("/") or ".." in value.split("/"):
            raise ValueError(f"expected a relative path without '..' (the partition's directories under the dataset's, "
                             f"such as yyyy/MM/dd); got {value!r}")
        return value


def java_pattern_to_strftime(pattern: str) -> str:
    """`yyyy/MM/dd` (Java's SimpleDateFormat subset Gobblin uses) → `%Y/%m/%d`."""
    return re.sub("|".join(_JAVA_TOKENS), lambda m: _JAVA_TOKENS[m.group(0)], pattern)


class TimePartitioner:
    """Maps a record to its partition path; caches per time bucket so the per-record cost is a division."""

    def __init__(self, settings: PartitionSettings) -> None:
        self.column = settings.column
        self.fmt = java_pattern_to_strftime(settings.pattern)
        self.scale = 1000 if settings.unit == "seconds" else 1
        self.bucket_ms = _BUCKET_MS.get(settings.granularity, 86_400_000)
        self.granularity = settings.granularity
        self._cache: dict[int, str] = {}

    def partition(self, record: dict[str, Any]) -> str:
        value = record.get(self.column)
        if type(value) is int:
            millis = value * self.scale
        elif isinstance(value, dt.datetime):  # one without a zone: this machine's wall clock, as fastavro writes it
            millis = epoch_millis(value) if value.tzinfo is not None else int(value.timestamp() * 1000)
        elif isinstance(value, str):
            try:
                parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                raise RecordError(f"partition column {self.column!r}: {value!r} is not a timestamp", self.column) from None
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=dt.UTC)
            millis = epoch_millis(parsed)
        else:
            raise RecordError(f"partition column {self.column!r} is missing or not a timestamp: {value!r}", self.column)
        bucket = millis // self.bucket_ms
        path = self._cache.get(bucket)
        if path is None:
            path = self._cache[bucket] = self._path(bucket, value)
        return path

    def split(self, column: Any, datetimes: bool = False) -> list[tuple[str, Any]] | None:
        """The rows of a batch by partition path, from the Arrow array of the partition column: `(path, boolean
        mask)` pairs (a None mask: every row), or None when a row needs `partition` (a null, a negative or
        non-integer time, a date beyond years 1..9999), which then refuses or places it record by record.
        `datetimes`: the row path's values of this timestamp column are datetimes (an extractor's rows, as the
        jdbc source's), placed by their time whatever `unit` says; otherwise they are the column's integers."""
        import pyarrow as pa
        import pyarrow.compute as pc

        kind = column.type
        if column.null_count:
            return None
        try:
            if datetimes and pa.types.is_timestamp(kind) and kind.unit in ("ms", "us"):
                millis = column.cast(pa.int64())
                if kind.unit == "us":  # a datetime's millis, truncated as `partition` truncates them
                    millis = pc.divide(millis, 1000)
            elif pa.types.is_integer(kind) or (pa.types.is_timestamp(kind) and kind.unit == "ms"):
                millis = pc.multiply_checked(column.cast(pa.int64()), self.scale)
            else:
                return None
        except pa.ArrowInvalid:  # beyond 64 bits in millis: `partition` says which record
            return None
        if len(millis) and pc.min(millis).as_py() < 0:  # Arrow's integer division truncates; Python's floors
            return None
        buckets = pc.divide(millis, self.bucket_ms)
        paths: dict[str, list[int]] = {}
        for bucket in pc.unique(buckets).to_pylist():
            path = self._cache.get(bucket)
            if path is None:
                try:
                    path = self._cache[bucket] = self._path(bucket, bucket * self.bucket_ms // self.scale)
                except RecordError:
                    return None
            paths.setdefault(path, []).append(bucket)
        if len(paths) == 1:
            return [(next(iter(paths)), None)]
        return [(path, pc.is_in(buckets, value_set=pa.array(members, pa.int64()))) for path, members in paths.items()]

    def _path(self, bucket: int, value: Any) -> str:
        try:
            when = dt.datetime.fromtimestamp(bucket * self.bucket_ms / 1000, tz=dt.UTC)
        except (OverflowError, ValueError, OSError):  # beyond year 1..9999 (OSError where the C library refuses)
            unit = "s" if self.scale == 1000 else "ms"
            raise RecordError(f"partition column {self.column!r}: {value!r} {unit} is not a date between years 1 and 9999",
                              self.column) from None
        if self.granularity == "MONTH":
            when = when.replace(day=1)
        elif self.granularity == "YEAR":
            when = when.replace(month=1, day=1)
        return when.strftime(self.fmt)
