"""Location: a path on some filesystem — an absolute local path or a URL such as `s3://bucket/key`.

A `str`, so it pickles, prints and goes into JSON as written; `/` joins like `pathlib`.
"""

from __future__ import annotations

import os
import posixpath
import re
from pathlib import Path

_URL = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<rest>.*)$")
_FILE_URI = re.compile(r"^file:(?://(?:localhost)?)?(/.*)$", re.IGNORECASE)
"""A local file URI in each form tables and Hadoop write: `file:/x` (Spark's), `file:///x`, `file://localhost/x`."""
LOCAL_SCHEMES = frozenset({"file", "local"})


class Location(str):
    """An absolute local path (`/data/out`) or a URL (`s3://bucket/out`); local file URIs (`file:///x`, `file:/x`,
    `file://localhost/x`) become local paths."""

    __slots__ = ()

    def __new__(cls, value: str | Path) -> Location:
        if type(value) is cls:
            return value  # already normal, and immutable
        text = str(value)
        local = _FILE_URI.match(text)
        if local is not None:  # `file:/x` is no relative path, nor is `localhost` a directory of `file://localhost/x`
            text = local[1]
        m = _URL.match(text)
        if m is None:
            text = str(Path(text).expanduser().absolute())
        elif m["scheme"].lower() in LOCAL_SCHEMES:
            text = str(Path("/" + m["rest"].lstrip("/")))
        else:
            text = f"{m['scheme'].lower()}://{m['rest'].rstrip('/') or m['rest']}"
        return super().__new__(cls, text)

    @classmethod
    def listed(cls, path: str) -> Location:
        """A path a listing gave under a Location (its text joined with entry names by `/`): already in normal form,
        so taken as it is, not parsed again (the parse is most of listing many files)."""
        return str.__new__(cls, path)

    @property
    def scheme(self) -> str:
        """`file` for a local path, else the URL's scheme (`s3`, `hdfs`, `gs`, …)."""
        m = _URL.match(self)
        return "file" if m is None else m["scheme"]

    @property
    def is_local(self) -> bool:
        return self.scheme == "file"

    @property
    def path(self) -> Path:
        """The local path; only for local locations."""
        if not self.is_local:
            raise ValueError(f"{self} is not a local path")
        return Path(self)

    @property
    def name(self) -> str:
        return self.rstrip("/").rsplit("/", 1)[-1]

    @property
    def parent(self) -> Location:
        head, _, _ = self.rstrip("/").rpartition("/")
        if not self.is_local and head.endswith(":/"):  # the root of a bucket has no parent
            return self
        return Location(head or "/")

    def resolved(self) -> str:
        """A comparable form: a local path with its symlinks and `..` resolved, a URL with `..` and `.` folded."""
        if self.is_local:
            return os.path.realpath(self)
        scheme, _, rest = self.partition("://")
        return f"{scheme}://{posixpath.normpath('/' + rest).lstrip('/')}"

    def contains(self, other: str | Path) -> bool:
        """Whether `other` is this directory or lies under it, once both are resolved (the same filesystem only)."""
        mine, theirs = self.resolved().rstrip("/"), Location(other).resolved()
        return theirs == mine or theirs.startswith(mine + "/")

    def __truediv__(self, part: str | Path) -> Location:
        part = str(part).strip("/")
        return Location(f"{self.rstrip('/')}/{part}" if part else self)

    def __reduce__(self):
        return (Location, (str(self),))
