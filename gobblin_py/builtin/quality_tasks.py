"""Task-level quality policies: `row_count` and `row_count_range` (Gobblin's RowCountPolicy/RowCountRangePolicy)."""

from __future__ import annotations

from pydantic import Field

from gobblin_py.api import BranchStats, Settings, TaskPolicy


class RowCountSettings(Settings):
    min: int = Field(default=0, ge=0)


class RowCountPolicy(TaskPolicy):
    """Every record that reached the branch's writer was written, and at least `min` were."""

    Settings = RowCountSettings

    def check(self, stats: BranchStats, records_extracted: int) -> str | None:
        handed = stats.records_in - sum(stats.rejected.values())
        if stats.records_written != handed:
            return f"branch {stats.branch}: {handed} records reached the writer but {stats.records_written} were written"
        if stats.records_written < self.settings.min:
            return f"branch {stats.branch}: wrote {stats.records_written} records, fewer than min {self.settings.min}"
        return None


class RowCountRangeSettings(Settings):
    range: float = Field(default=0.05, ge=0)


class RowCountRangePolicy(TaskPolicy):
    """Records written are within ±`range` (a fraction) of records extracted."""

    Settings = RowCountRangeSettings

    def check(self, stats: BranchStats, records_extracted: int) -> str | None:
        if records_extracted == 0:
            return None
        ratio = stats.records_written / records_extracted
        r = self.settings.range
        if not (1 - r <= ratio <= 1 + r):
            return (f"branch {stats.branch}: wrote {stats.records_written} of {records_extracted} extracted records "
                    f"({ratio:.1%}), outside 100% ± {r:.0%}")
        return None
