"""Numbered versions' removal: a version a writer adds meanwhile stays the value; a failure to make it durable shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from gobblin_py.fs import conditional
from gobblin_py.fs.conditional import NumberedVersions


def _write(versions: NumberedVersions, number: int, data: bytes) -> None:
    versions.write(number, lambda f: f.write(data))


def test_removing_takes_every_version_and_the_folder(tmp_path: Path) -> None:
    versions = NumberedVersions(tmp_path / "w.json", keep=5)
    _write(versions, 1, b"a")
    _write(versions, 2, b"b")
    versions.remove()
    assert versions.newest() is None and not versions.folder.exists()


def test_a_version_written_while_removing_stays_the_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    versions = NumberedVersions(tmp_path / "w.json", keep=5)
    _write(versions, 1, b"a")
    remove_durably = conditional.remove_durably

    def and_a_writer_meanwhile(path: Path) -> None:
        remove_durably(path)
        if not versions.file(2).exists():
            _write(NumberedVersions(tmp_path / "w.json", keep=5), 2, b"newer")

    monkeypatch.setattr(conditional, "remove_durably", and_a_writer_meanwhile)
    versions.remove()
    assert versions.newest() == (b"newer", 2)


def test_a_folder_removal_that_cannot_be_made_durable_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    versions = NumberedVersions(tmp_path / "w.json", keep=5)
    _write(versions, 1, b"a")

    def failing_fsync(path: Path) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(conditional, "fsync_dir", failing_fsync)
    with pytest.raises(OSError, match="Input/output error"):
        versions.remove()
