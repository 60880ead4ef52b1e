"""Path setting types: relative paths resolve against the working directory at validation,
so the driver and every executor see the same absolute path."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator


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
