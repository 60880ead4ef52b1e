"""Sizes and durations in job files and on the command line: bytes or a number with a unit (`512KB`, `256MB`, `1GiB`);
seconds or a number with a unit (`500ms`, `10s`, `5m`, `1h`, `1d`)."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BeforeValidator

_SIZE_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
          "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


def parse_bytes(value: object) -> int:
    """Bytes for `value` (an int, or `256MB`: KB/MB/GB are powers of 1000, KiB/MiB/GiB of 1024); a ValueError
    saying what is accepted for anything else."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a size")
    if isinstance(value, int):
        size = value
    else:
        match = _SIZE.match(str(value))
        unit = match.group(2).lower() if match else None
        if match is None or unit not in _SIZE_UNITS:
            raise ValueError(f"{value!r} is not a size: give bytes (1048576) or a number with a unit: 512KB, 256MB, 1GB, 64MiB")
        size = int(float(match.group(1)) * _SIZE_UNITS[unit])
    if size < 1:
        raise ValueError(f"{value!r} is not a positive size")
    return size


def shown(size: float) -> str:
    """`size` bytes as a person reads it: `512 B`, `3.2 MiB`."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            break
        size /= 1024
    return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"


ByteSize = Annotated[int, BeforeValidator(parse_bytes)]
"""A setting holding a size, validated to bytes."""


_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
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
        seconds = float(match.group(1)) * _DURATION_UNITS[match.group(2) or "s"]
    if seconds < 0:
        raise ValueError(f"{value!r} is negative")
    return seconds


Seconds = Annotated[float, BeforeValidator(parse_duration)]
"""A job file setting holding a duration, validated to seconds."""
