"""The JDBC source's watermark keys: which ranges of a table's watermark column are published, and what to extract next.

A run splits the range after the committed position into sub-ranges, one WorkUnit each, and the framework stores one
key per WorkUnit. So that a failed sub-range can never be skipped (`commit_policy: successful` publishes the others),
no WorkUnit claims more than it read:

- `high` is reported by the sub-range that starts at the committed position: every row with a watermark up to its
  value is published (contiguous from the first load);
- `done.<n>` is reported by each other sub-range: `(lo, hi] planned at high=F`, that range alone is published.

Planning extends `high` through the `done` ranges that follow it without a gap; the ranges still above it are kept
(their slots are not reused) and the holes between them are extracted again. A `done` range planned from a position
above the committed `high` (the operator reset the state below it) is ignored, so a reset re-extracts everything
after it. Under `commit_policy: full` every run ends with `high` plus `done` ranges that chain to the run's upper bound.

A first load split on the table's integer primary key (`source.first_load_split: key`) reads the watermark range
`(start, H]` in slices of the key, `H` taken before any slice is read; each slice reports `first.<n>`:
`<key column> (lo, hi] to high=H`. While `high` is unset, planning reads the slices not yet published with the same
`H`; once the slices chain over the whole key, `high` is `H` (the first load is complete) and `first` keys are ignored.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Container, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from gobblin_py.api.types import WatermarkValue
from gobblin_py.errors import SourceError

HIGH = "high"
DONE_PREFIX = "done."
_DONE = re.compile(r"^\((.*), (.*)\] planned at high=(.*)$")
FIRST_PREFIX = "first."
_FIRST = re.compile(r"^(.*) \((-?\d+|none), (-?\d+|none)\] to high=(.*)$")
NONE = "none"


class WatermarkKind:
    """How a watermark column's values are compared in Python and stored in the state (JSON: int or ISO text)."""

    INTEGER = "integer"
    TIMESTAMPTZ = "timestamptz"
    TIMESTAMP = "timestamp"
    DATE = "date"


def encode(value: Any) -> WatermarkValue:
    """A watermark value as the state stores it: an int, or ISO-8601 text."""
    if value is None:
        return None
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).isoformat()  # the same instant, the same text, whatever the session's zone
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    return int(value)


def decode(kind: str, value: WatermarkValue, where: str) -> Any:
    """The stored value back as the column's Python type; a value of another type names the key and what to do."""
    if value is None or value == NONE:
        return None
    try:
        if kind == WatermarkKind.INTEGER:
            return int(value)
        if kind == WatermarkKind.DATE:
            return date.fromisoformat(str(value))
        parsed = datetime.fromisoformat(str(value))
        if (parsed.tzinfo is None) != (kind == WatermarkKind.TIMESTAMP):
            raise ValueError(f"a {'naive' if parsed.tzinfo is None else 'zone-qualified'} timestamp for a {kind} column")
        return parsed
    except (TypeError, ValueError) as exc:
        raise SourceError(f"{where}: committed watermark {value!r} is not a {kind} value ({exc}); the watermark column's "
                          "type changed since it was committed: reset the dataset's state (`gobblin-py state reset`)") from None


@dataclass(frozen=True)
class Range:
    """Watermark values `(lo, hi]`; `lo` None: from the start, rows without a watermark included (a first load)."""

    lo: Any
    hi: Any

    def done_value(self, planned_at: Any) -> str:
        """The `done.<n>` value of this range, planned when `high` was `planned_at`."""
        return f"({_text(self.lo)}, {_text(self.hi)}] planned at high={_text(planned_at)}"


def _text(value: Any) -> str:
    encoded = encode(value)
    return NONE if encoded is None else str(encoded)


@dataclass(frozen=True)
class KeyRange:
    """Primary-key values `(lo, hi]` of a first load's slice; None: unbounded on that side."""

    lo: int | None
    hi: int | None

    def first_value(self, column: str, high: Any) -> str:
        """The `first.<n>` value of this slice of a first load up to watermark `high`."""
        return f"{column} ({_text(self.lo)}, {_text(self.hi)}] to high={_text(high)}"


@dataclass(frozen=True)
class FirstLoad:
    """A first load split on the key, not complete yet: its key column, its high watermark and the slices published."""

    column: str
    high: Any
    slices: dict[int, KeyRange]

    def missing(self) -> list[KeyRange]:
        """The key ranges no published slice holds, lowest first (the whole key: from and to unbounded)."""
        out: list[KeyRange] = []
        at: int | None = None
        first = True
        for r in sorted(self.slices.values(), key=lambda r: (r.lo is not None, r.lo)):
            if (first and r.lo is not None) or (not first and at is not None and r.lo is not None and at < r.lo):
                out.append(KeyRange(at, r.lo))
            first = False
            if r.hi is None:
                return out
            at = r.hi if at is None else max(at, r.hi)
        return [*out, KeyRange(at, None)]

    def free_slots(self) -> Iterator[int]:
        """`first.<n>` slot numbers not published yet, lowest first."""
        return _free(self.slices)


@dataclass(frozen=True)
class Committed:
    """What a table's watermark keys say: everything up to `high`, plus the `islands` above it (slot → range), and a
    first load split on the key that is still partly read (`first`)."""

    high: Any
    islands: dict[int, Range]
    first: FirstLoad | None = None

    @property
    def top(self) -> Any:
        """Where new data starts: the highest published watermark."""
        return max([r.hi for r in self.islands.values()] + ([self.high] if self.high is not None else []), default=None)

    def holes(self) -> list[Range]:
        """The ranges between `high` and the islands, none published yet (lowest first)."""
        out, at = [], self.high
        for r in sorted(self.islands.values(), key=lambda r: r.lo):
            if at is None or at < r.lo:
                out.append(Range(at, r.lo))
            at = r.hi
        return out

    def free_slots(self) -> Iterator[int]:
        """`done.<n>` slot numbers not held by a live island, lowest first."""
        return _free(self.islands)


def _free(held: Container[int]) -> Iterator[int]:
    """Slot numbers from 1 up that `held` does not hold, lowest first, without end."""
    return (n for n in itertools.count(1) if n not in held)


def committed(kind: str, marks: dict[str, WatermarkValue], where: str) -> Committed:
    """Read a table's keys: `high` extended through the `done` ranges that follow it, the rest kept as islands."""
    high = decode(kind, marks.get(HIGH), f"{where} key {HIGH!r}")
    ranges: dict[int, tuple[Range, Any]] = {}
    for key, value in marks.items():
        if not key.startswith(DONE_PREFIX):
            continue
        m = _DONE.match(str(value))
        slot = key[len(DONE_PREFIX):]
        if not m or not slot.isdigit():
            raise SourceError(f"{where} key {key!r}: {value!r} is not `(lo, hi] planned at high=F`; reset the dataset's "
                              "state (`gobblin-py state reset`)")
        lo, hi, planned = (decode(kind, v, f"{where} key {key!r}") for v in m.groups())
        ranges[int(slot)] = (Range(lo, hi), planned)
    first = None if high is not None else _first_load(kind, marks, where)
    if first is not None and not first.missing():
        high, first = first.high, None  # every slice published: the first load is complete up to its high
    live = {slot: r for slot, (r, planned) in ranges.items()
            if r.lo is not None and (planned is None or (high is not None and planned <= high))}
    for _slot, r in sorted(live.items(), key=lambda item: item[1].lo):  # extend high through what follows it
        if high is not None and r.lo <= high:
            high = max(high, r.hi)
    return Committed(high, {slot: r for slot, r in live.items() if high is None or r.hi > high}, first)


def _first_load(kind: str, marks: dict[str, WatermarkValue], where: str) -> FirstLoad | None:
    """The `first.<n>` keys of a first load split on the key; a value of another form, or slices of two first loads
    (another column or high), fail naming the key."""
    column, high, slices = None, None, {}
    for key, value in marks.items():
        if not key.startswith(FIRST_PREFIX):
            continue
        m, slot = _FIRST.match(str(value)), key[len(FIRST_PREFIX):]
        if not m or not slot.isdigit():
            raise SourceError(f"{where} key {key!r}: {value!r} is not `<column> (lo, hi] to high=H`; reset the "
                              "dataset's state (`gobblin-py state reset`)")
        col, lo, hi, top = m.groups()
        top = decode(kind, top, f"{where} key {key!r}")
        if column is not None and (col, top) != (column, high):
            raise SourceError(f"{where} key {key!r}: a slice of a first load by {col} to {top}, another is by {column} "
                              f"to {high}; reset the dataset's state (`gobblin-py state reset`)")
        column, high = col, top
        slices[int(slot)] = KeyRange(None if lo == NONE else int(lo), None if hi == NONE else int(hi))
    return None if column is None else FirstLoad(column, high, slices)
