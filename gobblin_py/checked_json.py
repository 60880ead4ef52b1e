"""Versioned, checksummed JSON record files: what the commit and state stores are made of.

A file is `{"format": N, "checksum": crc32c(body), "body": {...}}`, written with `atomic_write`.
Reading a file with another version, a bad checksum or torn JSON raises an error naming the path.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from gobblin_py.durable import atomic_write, bytes_checksum
from gobblin_py.errors import GobblinError

FORMAT_VERSION = 1


def _canonical(body: Any) -> bytes:
    return orjson.dumps(body, option=orjson.OPT_SORT_KEYS)


def encode(body: dict[str, Any]) -> bytes:
    """The bytes of a record file holding `body`."""
    payload = _canonical(body)
    return orjson.dumps(
        {"format": FORMAT_VERSION, "checksum": bytes_checksum(payload), "body": body},
        option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS,
    )


def write(path: Path, body: dict[str, Any], *, midway: Callable[[], None] | None = None) -> None:
    """Durably replace `path` with a record file holding `body`."""
    atomic_write(path, encode(body), midway=midway)


def read(path: Path, error: type[GobblinError], what: str, then: str = "it was not applied") -> dict[str, Any]:
    """The body of the record file at `path`; `error` names the path when it is not sound, and ends with `then`
    (what happens to it, or what to do)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise error(f"{what} {path}: cannot read: {exc}; {then}") from None
    return decode(raw, str(path), error, what, then)


def decode(raw: bytes, path: str, error: type[GobblinError], what: str, then: str = "it was not applied") -> dict[str, Any]:
    """The body of a record file's bytes `raw`, read from `path` (named by `error` when it is not sound)."""
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise error(f"{what} {path} is corrupt (torn or not JSON: {exc}); {then}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_VERSION:
        version = doc.get("format") if isinstance(doc, dict) else None
        raise error(f"{what} {path} has unrecognized format version {version!r} (expected {FORMAT_VERSION}) or is corrupt; {then}")
    body = doc.get("body")
    if not isinstance(body, dict) or bytes_checksum(_canonical(body)) != doc.get("checksum"):
        raise error(f"{what} {path} is corrupt (checksum mismatch); {then}")
    return body
