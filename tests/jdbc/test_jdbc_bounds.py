"""The upper bound per time kind (`bounds.time_bound`), without a database: the rule each kind follows and why."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from gobblin_py.builtin.sources.jdbc.bounds import (
    MIN_WALL_CLOCK_LAG,
    before_repeated_hour,
    far_from_clock,
    time_bound,
)
from gobblin_py.builtin.sources.jdbc.ranges import WatermarkKind
from gobblin_py.errors import ConfigError

NOW = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
WALL = NOW.replace(tzinfo=None)  # the server's wall clock, in UTC


def bound(kind: str, newest, lag: timedelta = timedelta(0), zone: str | None = None, instant: bool = False):
    return time_bound(kind, instant, NOW, WALL, newest, lag, zone, "table t", "c")


def test_an_instant_follows_the_clock() -> None:
    assert bound(WatermarkKind.TIMESTAMPTZ, None, timedelta(minutes=5), instant=True).high == NOW - timedelta(minutes=5)
    with pytest.raises(ConfigError, match="table t: watermark_zone is for columns without a zone; c holds instants"):
        bound(WatermarkKind.TIMESTAMPTZ, None, zone="UTC", instant=True)


def test_a_wall_clock_never_passes_the_data_and_keeps_an_hour_back_without_a_zone() -> None:
    behind = WALL - timedelta(hours=5)  # a writer in New York
    assert bound(WatermarkKind.TIMESTAMP, behind).high == behind - MIN_WALL_CLOCK_LAG
    assert bound(WatermarkKind.TIMESTAMP, behind, timedelta(hours=2)).high == behind - timedelta(hours=2)
    assert bound(WatermarkKind.TIMESTAMP, WALL + timedelta(hours=9)).high == WALL - MIN_WALL_CLOCK_LAG  # ahead: the clock
    assert bound(WatermarkKind.TIMESTAMP, None).high is None  # an empty table: nothing to extract
    assert bound(WatermarkKind.TIMESTAMP, behind, zone="UTC").high == behind  # no DST in UTC: no hour kept back
    assert bound(WatermarkKind.TIMESTAMP, WALL + timedelta(hours=9), zone="Asia/Tokyo").high == WALL + timedelta(hours=9)


def test_a_bound_never_falls_inside_an_hour_the_zone_repeats() -> None:
    assert before_repeated_hour(datetime(2024, 11, 3, 1, 30), _zone("America/New_York")) == datetime(2024, 11, 3, 0, 59, 59, 999999)
    assert before_repeated_hour(datetime(2024, 11, 3, 2, 0), _zone("America/New_York")) == datetime(2024, 11, 3, 2, 0)
    assert before_repeated_hour(datetime(2024, 3, 10, 2, 30), _zone("America/New_York")) == datetime(2024, 3, 10, 2, 30)
    # Lord Howe falls back half an hour, 02:00 → 01:30
    assert before_repeated_hour(datetime(2024, 4, 7, 1, 45), _zone("Australia/Lord_Howe")) == datetime(2024, 4, 7, 1, 29, 59, 999999)


def test_dates_take_whole_days_before_both_today_and_the_newest_day() -> None:
    assert bound(WatermarkKind.DATE, date(2026, 1, 15)).high == date(2026, 1, 14)
    assert bound(WatermarkKind.DATE, date(2026, 1, 14)).high == date(2026, 1, 13)  # a writer still on yesterday
    assert bound(WatermarkKind.DATE, date(2026, 1, 20)).high == date(2026, 1, 14)  # future days wait for the clock
    assert bound(WatermarkKind.DATE, date(2026, 1, 15), timedelta(hours=13)).high == date(2026, 1, 13)


def test_a_first_load_far_from_the_clock_is_named() -> None:
    text = far_from_clock("public.t", "c", bound(WatermarkKind.TIMESTAMP, WALL - timedelta(hours=5)))
    assert text is not None and "the newest c of public.t" in text and "5.0 h behind the database's clock" in text
    assert "9.0 h ahead of" in far_from_clock("public.t", "c", bound(WatermarkKind.TIMESTAMP, WALL + timedelta(hours=9)))
    assert far_from_clock("public.t", "c", bound(WatermarkKind.TIMESTAMP, WALL - timedelta(minutes=5))) is None


def _zone(name: str):
    from zoneinfo import ZoneInfo

    return ZoneInfo(name)


def test_watermark_zone_must_be_a_zone() -> None:
    from pydantic import ValidationError

    from gobblin_py.builtin.sources.jdbc.settings import TableSettings

    base = {"table": "public.t", "watermark_column": "c", "primary_key": "id"}
    assert TableSettings(**base, watermark_zone="America/New_York").watermark_zone == "America/New_York"
    with pytest.raises(ValidationError, match="'Mars/Olympus' is not a time zone: give an IANA name"):
        TableSettings(**base, watermark_zone="Mars/Olympus")
