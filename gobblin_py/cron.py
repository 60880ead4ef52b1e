"""`job.schedule` as Gobblin's job files write it, translated for croniter, which finds the next fire time.

Accepted expressions:

- Quartz (what Gobblin uses): `second minute hour day-of-month month day-of-week [year]`, e.g. `0 0/15 * * * ?`.
  Day-of-week is 1-7 = SUN-SAT; `?` means "no value" in day-of-month or day-of-week; year is 1970-2099.
- Classic five-field cron: `minute hour day-of-month month day-of-week`, fired at second 0; day-of-week
  is 0-7, where 0 and 7 are Sunday.

Every field takes `*`, numbers, ranges `a-b` (a day-of-week range may wrap: `FRI-MON`), steps `*/n`, `a/n`,
`a-b/n`, and lists `a,b`; month and day-of-week take names (JAN-DEC, SUN-SAT). Besides, as in Quartz:

- day-of-month `L`: the last day of the month; `15W`: the weekday (Mon-Fri) nearest the 15th, in that month;
- day-of-week `6L` or `FRIL`: the last Friday of the month; `2#2` or `MON#2`: the second Monday (five-field
  cron numbers from 0: `5L`, `1#2`); `L` alone: Saturday. A field with `L`, `W` or `#` holds that one value; the other day field is `?` or `*`.

When both day fields hold values, a day matching either fires (classic cron). Quartz's `LW` and `L-3` are
refused with a message, as is any bad field, naming the field: "day-of-week '9' is out of range 1-7".
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

_MONTHS = {m: i + 1 for i, m in enumerate(["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"])}
_DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
_ITEM = re.compile(r"^(?P<a>\*|\w+?)(?:-(?P<b>\w+))?(?:/(?P<step>\w+))?$")


class CronError(ValueError):
    """An expression that is not a valid schedule; the message names the field."""


@dataclass(frozen=True)
class _Field:
    name: str
    lo: int
    hi: int

    def value(self, text: str, item: str, quartz: bool) -> int:
        """A number or name of this field, checked against its range; day-of-week becomes croniter's 0-6."""
        if self.name == "month" and text in _MONTHS:
            return _MONTHS[text]
        if self.name == "day-of-week" and text in _DAYS:
            return _DAYS.index(text)
        if not text.isdigit():
            raise CronError(f"{self.name} {item!r} is not a number{' or name' if self.name in ('month', 'day-of-week') else ''}")
        n = int(text)
        if not self.lo <= n <= self.hi:
            raise CronError(f"{self.name} {item!r} is out of range {self.lo}-{self.hi}")
        if self.name == "day-of-week":
            return (n - 1) if quartz else n % 7
        return n


_SECOND, _MINUTE, _HOUR = _Field("second", 0, 59), _Field("minute", 0, 59), _Field("hour", 0, 23)
_DOM, _MONTH, _YEAR = _Field("day-of-month", 1, 31), _Field("month", 1, 12), _Field("year", 1970, 2099)
_QUARTZ_FIELDS = (_SECOND, _MINUTE, _HOUR, _DOM, _MONTH, _Field("day-of-week", 1, 7), _YEAR)
_CLASSIC_FIELDS = (_MINUTE, _HOUR, _DOM, _MONTH, _Field("day-of-week", 0, 7))


def _item(f: _Field, item: str, quartz: bool) -> tuple[str, bool]:
    """One list item in croniter's spelling, and whether it is one of L, W, #."""
    if f is _DOM:
        if item == "L":
            return "l", True
        if item.startswith("L"):
            raise CronError(f"day-of-month {item!r} is not supported (use 'L' for the last day, or 'NW' for the weekday nearest day N)")
        if item.endswith("W"):
            return f"{f.value(item[:-1], item, quartz)}w", True
    if f.name == "day-of-week":
        if item == "L":
            return "6", True  # Quartz: L alone is the last day of the week, Saturday
        if item.endswith("L"):
            return f"l{f.value(item[:-1], item, quartz)}", True
        day, hash_, nth = item.partition("#")
        if hash_:
            if nth not in {"1", "2", "3", "4", "5"}:
                raise CronError(f"day-of-week {item!r}: the week after '#' must be 1-5")
            return f"{f.value(day, item, quartz)}#{nth}", True
    m = _ITEM.match(item)
    if m is None:
        raise CronError(f"{f.name} {item!r} is not a number, range, step or list")
    a, b, step = m["a"], m["b"], m["step"]
    if step is not None and (not step.isdigit() or int(step) < 1):
        raise CronError(f"{f.name} {item!r}: the step must be a number of at least 1")
    if a == "*":
        if b is not None:
            raise CronError(f"{f.name} {item!r} is not a number, range, step or list")
        return item, False
    start = f.value(a, item, quartz)
    if b is None:
        return f"{start}/{step}" if step else str(start), False
    end = f.value(b, item, quartz)
    if start == end and step is None:
        return str(start), False  # croniter reads an equal range as the whole cycle
    if start > end and f.name != "day-of-week":
        raise CronError(f"{f.name} {item!r}: the range goes backwards")
    return f"{start}-{end}" + (f"/{step}" if step else ""), False


def _field(f: _Field, text: str, quartz: bool) -> tuple[str, bool]:
    """A whole field in croniter's spelling, and whether it uses L, W or #."""
    if text in ("*", "?"):
        if text == "?" and f.name not in ("day-of-month", "day-of-week"):
            raise CronError(f"{f.name} '?': '?' is only for day-of-month or day-of-week")
        return text, False
    items = [_item(f, item, quartz) for item in text.split(",")]
    special = any(s for _, s in items)
    if special and len(items) > 1:
        raise CronError(f"{f.name} {text!r}: L, W and # take a single value, not a list")
    return ",".join(i for i, _ in items), special


@dataclass(frozen=True)
class Cron:
    """A checked expression; `next_after(t)` is the first fire time strictly after `t` (local, naive)."""

    text: str
    expr: str  # croniter's spelling: seconds first, day-of-week 0-6

    @classmethod
    def parse(cls, text: str) -> Cron:
        fields = text.upper().split()
        if len(fields) not in (5, 6, 7):
            raise CronError(f"{text!r}: expected 6 or 7 Quartz fields (second minute hour day-of-month month day-of-week "
                            f"[year]) or 5 cron fields (minute hour day-of-month month day-of-week), got {len(fields)}")
        quartz = len(fields) > 5
        specs = _QUARTZ_FIELDS if quartz else _CLASSIC_FIELDS
        try:
            parts = [_field(f, t, quartz) for f, t in zip(specs, fields)]
        except CronError as exc:
            raise CronError(f"{exc} in {text!r}") from None
        out = [p for p, _ in parts] if quartz else ["0", *(p for p, _ in parts)]
        days = {f.name: part for f, part in zip(specs, parts)}
        (dom, dom_special), (dow, dow_special) = days["day-of-month"], days["day-of-week"]
        if (dom_special and dow not in ("*", "?")) or (dow_special and dom not in ("*", "?")):
            raise CronError(f"{text!r}: with L, W or # in one day field the other must be '?' or '*'")
        expr = " ".join(out)
        from croniter import CroniterError, croniter  # here, not at the top: its import runs `file` on the interpreter
        try:
            croniter.expand(expr, second_at_beginning=True)
        except CroniterError as exc:
            raise CronError(f"{text!r} is not a valid schedule ({exc})") from None
        return cls(text, expr)

    def next_after(self, t: dt.datetime) -> dt.datetime:
        from croniter import CroniterBadDateError, croniter  # see `parse`

        try:
            fire: dt.datetime = croniter(self.expr, t, second_at_beginning=True).get_next(dt.datetime)
        except CroniterBadDateError:
            raise CronError(f"{self.text!r} never fires after {t:%Y-%m-%d %H:%M:%S}") from None
        return fire
