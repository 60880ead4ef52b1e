"""Durations in job files: a number of seconds, or a number with a unit (`500ms`, `10s`, `5m`, `1h`, `1d`)."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BeforeValidator

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")


def parse_duration(value: object) -> float:
    """Seconds for `value`; a ValueError saying what is accepted for anything else."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        match = _DURATION.match(str(value))
        if match is None:
            raise ValueError(f"{value!r} is not a duration: give seconds (10) or a number with a unit: 500ms, 10s, 5m, 1h, 1d")
        seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    if seconds < 0:
        raise ValueError(f"{value!r} is negative")
    return seconds


Seconds = Annotated[float, BeforeValidator(parse_duration)]
"""A job file setting holding a duration, validated to seconds."""
