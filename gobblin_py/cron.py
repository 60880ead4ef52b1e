"""Cron expressions as Gobblin's `job.schedule` takes them (Quartz style), and their next fire time.

Six or seven fields: `second minute hour day-of-month month day-of-week [year]`, or classic five-field
cron (`minute hour day-of-month month day-of-week`, fired at second 0). Each field takes `*`, `?`,
numbers, ranges `a-b`, steps `*/n` and `a-b/n`, lists `a,b`, and names (JAN-DEC, SUN-SAT).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

_MONTHS = {m: i + 1 for i, m in enumerate(["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"])}
_DAYS = {d: i for i, d in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])}


class CronError(ValueError):
    """An expression that is not a valid schedule; the message names the field."""


def _field(text: str, lo: int, hi: int, name: str, names: dict[str, int] | None = None) -> frozenset[int]:
    values: set[int] = set()
    for part in text.upper().split(","):
        base, _, step_text = part.partition("/")
        try:
            step = int(step_text) if step_text else 1
        except ValueError:
            raise CronError(f"{name}: step {step_text!r} is not a number") from None
        if step < 1:
            raise CronError(f"{name}: step must be at least 1")
        if base in ("*", "?"):
            start, end = lo, hi
        else:
            a, dash, b = base.partition("-")
            try:
                start = names[a] if names and a in names else int(a)
                end = (names[b] if names and b in names else int(b)) if dash else (hi if step_text else start)
            except ValueError:
                raise CronError(f"{name}: {part!r} is not a number, range or name") from None
        if not (lo <= start <= hi and lo <= end <= hi and start <= end):
            raise CronError(f"{name}: {part!r} is outside {lo}-{hi}")
        values.update(range(start, end + 1, step))
    return frozenset(values)


@dataclass(frozen=True)
class Cron:
    """A parsed expression; `next_after(t)` is the first fire time strictly after `t`."""

    text: str
    seconds: frozenset[int]
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_day: bool
    any_weekday: bool

    @classmethod
    def parse(cls, text: str) -> Cron:
        fields = text.split()
        if len(fields) == 5:
            fields = ["0", *fields]
        if len(fields) == 7:
            fields = fields[:6]  # the optional year field: every year
        if len(fields) != 6:
            raise CronError(f"{text!r}: expected 5, 6 or 7 fields (second minute hour day-of-month month day-of-week [year])")
        sec, minute, hour, dom, month, dow = fields
        return cls(text, _field(sec, 0, 59, "second"), _field(minute, 0, 59, "minute"), _field(hour, 0, 23, "hour"),
                   _field(dom, 1, 31, "day-of-month"), _field(month, 1, 12, "month", _MONTHS),
                   frozenset(v % 7 for v in _field(dow, 0, 7, "day-of-week", _DAYS)),  # 0 and 7 are Sunday
                   dom in ("*", "?"), dow in ("*", "?"))

    def _day_matches(self, d: dt.datetime) -> bool:
        if d.month not in self.months:
            return False
        weekday = (d.weekday() + 1) % 7
        if self.any_day and self.any_weekday:
            return True
        if self.any_day:
            return weekday in self.weekdays
        if self.any_weekday:
            return d.day in self.days
        return d.day in self.days or weekday in self.weekdays  # classic cron: either matches

    def next_after(self, t: dt.datetime) -> dt.datetime:
        t = t.replace(microsecond=0) + dt.timedelta(seconds=1)
        limit = t + dt.timedelta(days=366 * 5)
        while t < limit:
            if not self._day_matches(t):
                t = (t + dt.timedelta(days=1)).replace(hour=0, minute=0, second=0)
                continue
            if t.hour not in self.hours:
                t = (t + dt.timedelta(hours=1)).replace(minute=0, second=0)
                continue
            if t.minute not in self.minutes:
                t = (t + dt.timedelta(minutes=1)).replace(second=0)
                continue
            if t.second not in self.seconds:
                t += dt.timedelta(seconds=1)
                continue
            return t
        raise CronError(f"{self.text!r} never fires")
