"""Instants as Avro's timestamp-millis, exactly: integer arithmetic on the datetime, as fastavro encodes one.

`int(datetime.timestamp() * 1000)` goes through a float and comes out a millisecond short for about 1 % of instants
with milliseconds (1987-02-25T16:03:09.027Z became …026): a value silently changed on its way to the file."""

from __future__ import annotations

import datetime as dt

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MILLISECOND = dt.timedelta(milliseconds=1)


def epoch_millis(instant: dt.datetime) -> int:
    """Milliseconds since the Unix epoch of a zone-aware `instant` (sub-millisecond digits dropped, towards the past)."""
    if instant.tzinfo is None:
        raise ValueError("a datetime without a zone is not an instant")
    return (instant - _EPOCH) // _MILLISECOND
