"""`job.schedule` expressions: Quartz's L, W and #, its day-of-week numbering, and messages naming the bad field."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from support.jobs import example_job, write_job

from gobblin_py.config import load_job
from gobblin_py.cron import Cron, CronError
from gobblin_py.errors import ConfigError

AFTER = dt.datetime(2026, 11, 21, 10, 0)  # a Saturday


def fires(expr: str, n: int = 3, after: dt.datetime = AFTER) -> list[str]:
    cron, out, t = Cron.parse(expr), [], after
    for _ in range(n):
        t = cron.next_after(t)
        out.append(t.strftime("%a %Y-%m-%d %H:%M:%S"))
    return out


@pytest.mark.parametrize(("expr", "expected"), [
    ("0 0 12 ? * 6L", ["Fri 2026-11-27 12:00:00", "Fri 2026-12-25 12:00:00", "Fri 2027-01-29 12:00:00"]),  # last Friday
    ("0 0 12 ? * FRIL", ["Fri 2026-11-27 12:00:00", "Fri 2026-12-25 12:00:00", "Fri 2027-01-29 12:00:00"]),
    ("0 0 12 L * ?", ["Mon 2026-11-30 12:00:00", "Thu 2026-12-31 12:00:00", "Sun 2027-01-31 12:00:00"]),  # last day
    ("0 0 8 15W * ?", ["Tue 2026-12-15 08:00:00", "Fri 2027-01-15 08:00:00", "Mon 2027-02-15 08:00:00"]),
    ("0 0 8 1W * ?", ["Tue 2026-12-01 08:00:00", "Fri 2027-01-01 08:00:00", "Mon 2027-02-01 08:00:00"]),
    ("0 0 8 6W * ?", ["Mon 2026-12-07 08:00:00", "Wed 2027-01-06 08:00:00", "Fri 2027-02-05 08:00:00"]),  # Sun → Mon, Sat → Fri
    ("0 0 9 ? * 2#2", ["Mon 2026-12-14 09:00:00", "Mon 2027-01-11 09:00:00", "Mon 2027-02-08 09:00:00"]),  # second Monday
    ("0 0 9 ? * MON#2", ["Mon 2026-12-14 09:00:00", "Mon 2027-01-11 09:00:00", "Mon 2027-02-08 09:00:00"]),
    ("0 0 9 ? * 6#5", ["Fri 2027-01-29 09:00:00", "Fri 2027-04-30 09:00:00", "Fri 2027-07-30 09:00:00"]),  # fifth Friday
    ("0 0 9 ? * L", ["Sat 2026-11-28 09:00:00", "Sat 2026-12-05 09:00:00", "Sat 2026-12-12 09:00:00"]),  # L alone: Saturday
])
def test_quartz_last_nearest_weekday_and_nth(expr: str, expected: list[str]) -> None:
    assert fires(expr) == expected


@pytest.mark.parametrize(("expr", "expected"), [
    ("0 0 12 ? * 1", "Sun 2026-11-22 12:00:00"),   # Quartz: 1 is Sunday …
    ("0 0 12 ? * 7", "Sat 2026-11-21 12:00:00"),   # … 7 Saturday
    ("0 0 12 ? * 2-6", "Mon 2026-11-23 12:00:00"),  # MON-FRI
    ("0 0 12 ? * 1/2", "Sat 2026-11-21 12:00:00"),  # SUN, TUE, THU, SAT
    ("0 0 12 ? * FRI-MON", "Sat 2026-11-21 12:00:00"),
    ("0 0 12 ? * 3-3", "Tue 2026-11-24 12:00:00"),  # an equal range is the one day, not the whole week
    ("0 12 * * 0", "Sun 2026-11-22 12:00:00"),     # five-field cron: 0 and 7 are Sunday, 6 Saturday
    ("0 12 * * 7", "Sun 2026-11-22 12:00:00"),
    ("0 12 * * 6", "Sat 2026-11-21 12:00:00"),
    ("0 12 ? * 5L", "Fri 2026-11-27 12:00:00"),    # five-field numbering: 5 is Friday
    ("0 12 ? * 1#1", "Mon 2026-12-07 12:00:00"),
])
def test_day_of_week_numbering(expr: str, expected: str) -> None:
    assert fires(expr, 1) == [expected]


def test_nearest_weekday_stays_in_its_month() -> None:
    assert fires("0 0 8 1W * ?", 1, after=dt.datetime(2027, 4, 15)) == ["Mon 2027-05-03 08:00:00"]  # Sat 1 May → Mon 3rd
    assert fires("0 0 8 31W * ?", 1, after=dt.datetime(2027, 10, 1)) == ["Fri 2027-10-29 08:00:00"]  # Sun 31 Oct → Fri 29th


def test_year_field_and_a_schedule_that_no_longer_fires() -> None:
    assert fires("0 30 9 1 JAN ? 2027-2028", 2) == ["Fri 2027-01-01 09:30:00", "Sat 2028-01-01 09:30:00"]
    cron = Cron.parse("0 30 9 1 JAN ? 2027")
    with pytest.raises(CronError, match=r"'0 30 9 1 JAN \? 2027' never fires after 2027-01-01 09:30:00"):
        cron.next_after(dt.datetime(2027, 1, 1, 9, 30))


@pytest.mark.parametrize(("expr", "message"), [
    ("0 0 12 ? * 9", "day-of-week '9' is out of range 1-7 in '0 0 12 ? * 9'"),
    ("0 0 12 ? * 0", "day-of-week '0' is out of range 1-7"),      # Quartz has no 0 …
    ("0 12 * * 8", "day-of-week '8' is out of range 0-7"),        # … five-field cron has
    ("61 * * * * ?", "second '61' is out of range 0-59"),
    ("0 60 * * * ?", "minute '60' is out of range 0-59"),
    ("0 0 24 * * ?", "hour '24' is out of range 0-23"),
    ("0 0 0 32 * ?", "day-of-month '32' is out of range 1-31"),
    ("0 0 0 1 13 ?", "month '13' is out of range 1-12"),
    ("0 0 0 1 1 ? 1969", "year '1969' is out of range 1970-2099"),
    ("0 0 0 1 FOO ?", "month 'FOO' is not a number or name"),
    ("*/0 * * * * ?", "second '*/0': the step must be a number of at least 1"),
    ("0 0 0 10-2 * ?", "day-of-month '10-2': the range goes backwards"),
    ("? 0 0 * * *", "second '?': '?' is only for day-of-month or day-of-week"),
    ("0 0 12 ? * 2#6", "day-of-week '2#6': the week after '#' must be 1-5"),
    ("0 0 12 LW * ?", "day-of-month 'LW' is not supported"),
    ("0 0 12 15W,L * ?", "day-of-month '15W,L': L, W and # take a single value, not a list"),
    ("0 0 12 15W * MON", "with L, W or # in one day field the other must be '?' or '*'"),
    ("* * *", "expected 6 or 7 Quartz fields"),
])
def test_bad_fields_are_named(expr: str, message: str) -> None:
    with pytest.raises(CronError) as caught:
        Cron.parse(expr)
    assert message in str(caught.value)


def test_a_job_file_with_a_bad_schedule_names_the_key_and_the_field(tmp_path: Path) -> None:
    path = write_job(tmp_path, example_job(tmp_path, job={"name": "t", "work_dir": str(tmp_path / "w"), "schedule": "0 0 12 ? * 9"}))
    with pytest.raises(ConfigError, match=r"job\.schedule: day-of-week '9' is out of range 1-7"):
        load_job(path)
