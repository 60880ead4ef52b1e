"""Path setting types for plugin and job settings: relative paths resolve against the working directory at validation,
so the driver and every executor see the same absolute path."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator

from gobblin_py.errors import ConfigError
from gobblin_py.fs.location import Location
from gobblin_py.fs.registry import check_scheme


def _absolute(p: Path) -> Path:
    return Path(p).expanduser().absolute()


def _existing_file(p: Path) -> Path:
    p = _absolute(p)
    if not p.is_file():
        raise ValueError(f"file not found: {p}")
    return p


def _existing_dir(p: Path) -> Path:
    p = _absolute(p)
    if not p.is_dir():
        raise ValueError(f"directory not found: {p}")
    return p


AbsPath = Annotated[Path, AfterValidator(_absolute)]
ExistingFile = Annotated[Path, AfterValidator(_existing_file)]
ExistingDir = Annotated[Path, AfterValidator(_existing_dir)]


def _location(value: str | Path) -> Location:
    loc = Location(value)
    try:
        check_scheme(loc.scheme)
    except ConfigError as exc:
        raise ValueError(exc.message) from None
    return loc


FsLocation = Annotated[str, AfterValidator(_location)]
"""A local path (made absolute) or a URL of any filesystem fsspec serves (`s3://bucket/out`)."""


def _existing_dir_location(value: str | Path) -> Location:
    loc = _location(value)
    if loc.is_local:
        _existing_dir(loc.path)
    return loc  # a remote directory is checked when the source lists it (the store may be down now)


ExistingDirLocation = Annotated[str, AfterValidator(_existing_dir_location)]
"""An existing local directory, or a URL (`s3://bucket/in`)."""
