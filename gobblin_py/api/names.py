"""WorkUnit ids, which become output file names: a readable prefix plus a 128-bit hash of the full identity.

Two WorkUnits with different identities never share a name (the hash covers every part of the identity,
not the shortened prefix), and the same identity always gives the same name, so a re-extraction after a
crash lands on the names the first attempt used.
"""

from __future__ import annotations

import hashlib
import re

PREFIX_CHARS = 100
"""The readable part is cut to this length, so a name stays well under filesystems' 255-byte limit."""


def identity_hash(*parts: str | int) -> str:
    """32 hex digits (128 bits, BLAKE2b) of `parts`; each part is length-prefixed, so no two tuples share an input."""
    h = hashlib.blake2b(digest_size=16)
    for part in parts:
        data = str(part).encode("utf-8", "surrogateescape")
        h.update(f"{type(part).__name__}:{len(data)}:".encode())
        h.update(data)
    return h.hexdigest()


def readable(text: str) -> str:
    """`text` reduced to `[A-Za-z0-9._-]`, at most PREFIX_CHARS long; never empty."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_.")[:PREFIX_CHARS] or "part"


def workunit_id(prefix: str, *identity: str | int) -> str:
    """`<readable prefix>-<identity hash>`: the name of everything one WorkUnit writes."""
    return f"{readable(prefix)}-{identity_hash(*identity)}"
