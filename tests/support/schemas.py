"""Avro schemas several test modules share."""

from __future__ import annotations

from typing import Any

FLAT_EVENT: dict[str, Any] = {"type": "record", "name": "E", "fields": [
    {"name": "id", "type": "long"},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "n", "type": "int"},
    {"name": "user", "type": "string"},
    {"name": "ok", "type": "boolean"},
    {"name": "amount", "type": ["null", "double"], "default": None},
    {"name": "country", "type": ["null", "string"], "default": None},
    {"name": "tier", "type": ["string", "null"], "default": "basic"},
]}
"""Every flat type the columnar path takes: long, timestamp-millis, int, string, boolean, nullable ones and defaults."""
