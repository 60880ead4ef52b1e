"""A run's upper bound on a time watermark column, one rule per kind for every database (the dialects read the
database's clock and the column's newest value; this module decides).

- An instant (PostgreSQL `timestamptz`, MySQL `timestamp`): `now() − lag`, by the database's clock. An instant has no
  zone and no DST, and rows stamped by the database's own clock (`DEFAULT now()`) are never behind it: only a
  transaction committing late, or a writer whose clock runs behind the database's, is — and the lag covers both.
- A wall clock without a zone (PostgreSQL `timestamp`, MySQL `datetime`): `min(clock, max(column)) − lag`, never more
  than the data shows. Its values are some writer's wall clock, maybe another zone's (an application writing New York
  time into a UTC database is five hours behind the database's clock): a bound taken from the clock would put every
  later row under the committed position. And a wall clock repeats an hour when DST ends, so a bound inside that hour
  would put the rows of its second pass under it: without `watermark_zone` the lag is at least one hour
  (`MIN_WALL_CLOCK_LAG`); with it, the clock is that zone's and a bound never falls inside an hour the zone repeats.
- A date: only whole days before both the clock's day and the newest day (`min(clock, max(column)) − lag`, its date,
  minus one day): a writer in a zone behind the database's still writes the day the database has left.

Bounding by the data costs latency, never rows: the rows of the last `lag` before a table goes quiet are extracted
once newer rows arrive.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from gobblin_py.builtin.sources.jdbc.ranges import WatermarkKind
from gobblin_py.errors import ConfigError

MIN_WALL_CLOCK_LAG = timedelta(hours=1)
"""The lag of a zone-less column whose writers' zone is not given: a wall clock repeats (at most) an hour at DST's end."""

FAR = timedelta(hours=1)
"""A first load whose newest zone-less value is this far from the database's clock is reported."""

TICK = timedelta(microseconds=1)


@dataclass(frozen=True)
class Bound:
    """This run's upper bound (`high`, None: nothing to extract yet), with what it was taken from."""

    high: Any
    newest: Any = None  # max(column), ±infinity left out
    clock: Any = None  # the database's clock as the column reads it
    wall_clock: bool = False  # the column is a wall clock without a zone


def time_bound(kind: str, instant: bool, now_utc: datetime, server_wall: datetime | None, newest: Any,
               lag: timedelta, zone: str | None, label: str, column: str) -> Bound:
    """The bound of a time column (see the module's docstring). `now_utc`: the database's clock (aware, UTC);
    `server_wall`: its wall clock in the server's zone (None when the database cannot say); `newest`: max(column)."""
    if instant:
        if zone is not None:
            raise ConfigError(f"{label}: watermark_zone is for columns without a zone; {column} holds instants (remove "
                              "watermark_zone)")
        clock = now_utc if kind == WatermarkKind.TIMESTAMPTZ else now_utc.replace(tzinfo=None)
        return Bound(clock - lag, newest, clock)
    clock = now_utc.astimezone(ZoneInfo(zone)).replace(tzinfo=None) if zone is not None else server_wall
    if newest is None:
        return Bound(None, None, clock, wall_clock=True)
    if kind == WatermarkKind.DATE:
        newest_dt = datetime.combine(newest, time())
        top = newest_dt if clock is None else min(clock, newest_dt)
        return Bound((top - lag).date() - timedelta(days=1), newest, clock, wall_clock=True)
    top = newest if clock is None else min(clock, newest)
    if zone is None:
        return Bound(top - max(lag, MIN_WALL_CLOCK_LAG), newest, clock, wall_clock=True)
    return Bound(before_repeated_hour(top - lag, ZoneInfo(zone)), newest, clock, wall_clock=True)


def repeated(value: datetime, zone: ZoneInfo) -> bool:
    """Whether the wall-clock time `value` happens twice in `zone` (the hour a clock repeats when DST ends)."""
    first, second = value.replace(tzinfo=zone, fold=0).utcoffset(), value.replace(tzinfo=zone, fold=1).utcoffset()
    return first is not None and second is not None and first > second  # (in a skipped hour the order is reversed)


def before_repeated_hour(value: datetime, zone: ZoneInfo) -> datetime:
    """`value`, or just before the start of the repeated interval it lies in: a bound there would put the rows the
    interval's second pass writes under the committed position."""
    if not repeated(value, zone):
        return value
    shift = value.replace(tzinfo=zone, fold=0).utcoffset() - value.replace(tzinfo=zone, fold=1).utcoffset()
    lo, hi = value - shift, value  # lo is before the interval (it is `shift` long), hi inside it
    while hi - lo > TICK:
        mid = lo + (hi - lo) // 2
        if repeated(mid, zone):
            hi = mid
        else:
            lo = mid
    return hi - TICK


def far_from_clock(table: str, column: str, bound: Bound) -> str | None:
    """The notice of a first load whose newest zone-less value sits an hour or more from the database's clock (a sign
    of writers in another zone), naming table, column and gap; None when there is nothing to say."""
    if not bound.wall_clock or not isinstance(bound.newest, datetime) or bound.clock is None:
        return None
    gap = bound.clock - bound.newest
    if abs(gap) < FAR:
        return None
    hours = abs(gap).total_seconds() / 3600
    if gap > timedelta(0):
        return (f"the newest {column} of {table} ({bound.newest}) is {hours:.1f} h behind the database's clock "
                f"({bound.clock}): {column} has no time zone, so its writers may stamp another zone's wall clock (or the "
                "table is quiet); runs are bounded by its newest value, not by the clock, so no later row falls under "
                "the committed position")
    return (f"the newest {column} of {table} ({bound.newest}) is {hours:.1f} h ahead of the database's clock "
            f"({bound.clock}): {column} has no time zone, so its writers may stamp another zone's wall clock; rows "
            "ahead of the clock wait until it reaches them (name the writers' zone in watermark_zone)")


def as_utc(value: datetime) -> datetime:
    """A clock reading as an aware UTC datetime (MySQL's UTC_TIMESTAMP comes naive)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

