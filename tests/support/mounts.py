"""Real mounts for fault tests: a tiny tmpfs (a disk that fills up) and a bind mount (one disk, two mounts).

Both need mount privileges (root in a sandbox or CI container); the tests that use them skip otherwise.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest


def _mount(args: list[str], target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", *args, str(target)], check=False, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here ({done.stderr.strip() or done.returncode})")


@pytest.fixture
def mount() -> Iterator[Callable[[list[str], Path], Path]]:
    """`mount(["-t", "tmpfs", "-o", "size=1m", "tmpfs"], dir)` or `mount(["--bind", src], dir)`; unmounted after the test."""
    mounted: list[Path] = []

    def make(args: list[str], target: Path) -> Path:
        _mount(args, target)
        mounted.append(target)
        return target

    yield make
    for target in reversed(mounted):
        subprocess.run(["umount", "-l", str(target)], check=False, capture_output=True)


@pytest.fixture
def fill_disk() -> Callable[[Path], None]:
    """Fill the filesystem of a directory to the last byte."""
    return _fill


def _fill(directory: Path) -> None:
    with open(directory / "filler", "wb", buffering=0) as f:
        for chunk in (b"\0" * 65536, b"\0" * 512, b"\0"):  # down to the last byte
            try:
                while True:
                    f.write(chunk)
            except OSError:
                pass
