"""The local filesystem's listing (`find`): the scandir walk that makes listed paths Locations without parsing them
again gives what the `os.walk` listing it replaced gave, entry for entry."""

from __future__ import annotations

import os
import random
import stat
from pathlib import Path

import pytest

from gobblin_py.errors import FileSystemError
from gobblin_py.fs import Location, filesystem_for
from gobblin_py.fs.base import NOT_A_FILE


def _walked(root: Location) -> dict[Location, int]:
    """The listing before the scandir walk (gobblin_py/fs/local.py at 69b162b), kept as the reference."""
    def unlistable(exc: OSError) -> None:
        if not isinstance(exc, FileNotFoundError):
            raise FileSystemError(f"cannot list directory {exc.filename}: {exc.strerror}")

    found: dict[Location, int] = {}
    for d, _, names in os.walk(root, onerror=unlistable):
        for n in names:
            p = os.path.join(d, n)
            try:
                st = os.stat(p)
            except FileNotFoundError:
                if os.path.islink(p):
                    found[Location(p)] = NOT_A_FILE
                continue
            found[Location(p)] = st.st_size if stat.S_ISREG(st.st_mode) else NOT_A_FILE
    return dict(sorted(found.items()))


def _tree(root: Path, seed: int) -> None:
    """Nested directories and files of odd names, with every kind of entry a listing meets."""
    rng = random.Random(seed)
    names = ["a.jsonl", "b c.csv", "_x.jsonl", ".h.json", "ü-ñ.ndjson", "x.jsonl.gz", "dots..jsonl", "~tmp", "a_b.jsonl"]
    dirs = [root]
    for i in range(40):
        parent = rng.choice(dirs)
        if rng.random() < 0.25:
            d = parent / rng.choice(["d", "_d", ".d", "2026", "sub dir", "é"]) / str(i)
            d.mkdir(parents=True, exist_ok=True)
            dirs.append(d)
        else:
            (parent / f"{i}-{rng.choice(names)}").write_bytes(b"x" * rng.randrange(0, 50))
    (root / "empty").mkdir()
    (root / "to-file").symlink_to(root / next(n for n in os.listdir(root) if (root / n).is_file()))
    (root / "dangling").symlink_to(root / "missing")
    (root / "real").mkdir()
    (root / "real" / "f.jsonl").write_text("{}\n")
    (root / "to-dir").symlink_to(root / "real", target_is_directory=True)  # listed by neither walk, not entered
    os.mkfifo(root / "fifo")


@pytest.mark.parametrize("seed", range(5))
def test_the_scandir_listing_is_the_walk_it_replaced(tmp_path: Path, seed: int) -> None:
    root = tmp_path / "in"
    root.mkdir()
    _tree(root, seed)
    where = Location(root)
    found = filesystem_for(where).find(where)
    assert found == _walked(where)
    assert list(found) == sorted(found)
    assert all(type(p) is Location and Location(str(p)) == p for p in found)  # in the form parsing gives
    assert found[Location(root / "dangling")] == NOT_A_FILE and found[Location(root / "fifo")] == NOT_A_FILE
    assert not any(p.startswith(str(root / "to-dir")) for p in found)


def test_a_missing_root_lists_nothing_and_a_file_root_fails_as_before(tmp_path: Path) -> None:
    fs = filesystem_for(Location(tmp_path))
    assert fs.find(Location(tmp_path / "nope")) == _walked(Location(tmp_path / "nope")) == {}
    (tmp_path / "f").write_text("x")
    with pytest.raises(FileSystemError, match=str(tmp_path / "f")):
        fs.find(Location(tmp_path / "f"))
    with pytest.raises(FileSystemError, match=str(tmp_path / "f")):
        _walked(Location(tmp_path / "f"))
