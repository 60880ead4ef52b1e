"""Path setting types for plugin and job settings: relative paths resolve against the working directory at validation,
so the driver and every executor see the same absolute path. A path that must exist and does not is named resolved,
with that rule, and with the directory to run from when the path exists beside the job file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, ValidationInfo

from gobblin_py.errors import ConfigError
from gobblin_py.fs.location import Location
from gobblin_py.fs.registry import check_scheme


def _absolute(p: Path) -> Path:
    return Path(p).expanduser().absolute()


JOB_DIR = "job_dir"
"""The validation context key the job loader sets to the job file's directory (for the hint below)."""


def _not_found(what: str, given: str | Path, resolved: Path, info: ValidationInfo | None, exists: Callable[[Path], bool]) -> ValueError:
    """`directory not found: /abs/path`, and for a relative path the rule and, where it fits, the likely fix."""
    message = f"{what} not found: {resolved}"
    relative = Path(given).expanduser()
    if relative.is_absolute():
        return ValueError(message)
    message += f" ({str(given)!r} is relative, and relative paths in a job file are relative to the working directory, {Path.cwd()}"
    job_dir = (info.context or {}).get(JOB_DIR) if info is not None else None
    if job_dir is not None:  # the job file's directory, or the closest directory above it, where the path exists
        base = next((d for d in (Path(job_dir), *Path(job_dir).parents) if d != Path.cwd() and exists(d / relative)), None)
        if base is not None:
            message += f"; {base / relative} exists: did you mean to run from {base}?"
    return ValueError(message + ")")


def _existing_file(p: Path, info: ValidationInfo | None) -> Path:
    resolved = _absolute(p)
    if not resolved.is_file():
        raise _not_found("file", p, resolved, info, Path.is_file)
    return resolved


def _existing_dir(p: Path, info: ValidationInfo | None) -> Path:
    resolved = _absolute(p)
    if not resolved.is_dir():
        raise _not_found("directory", p, resolved, info, Path.is_dir)
    return resolved


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


def _existing_dir_location(value: str | Path, info: ValidationInfo) -> Location:
    loc = _location(value)
    if loc.is_local:
        _existing_dir(Path(value) if "://" not in str(value) else loc.path, info)
    return loc  # a remote directory is checked when the source lists it (the store may be down now)


ExistingDirLocation = Annotated[str, AfterValidator(_existing_dir_location)]
"""An existing local directory, or a URL (`s3://bucket/in`)."""
