"""A committable in task output is durable (its content, its entry and every directory made for it) before
`commit_staged` returns, that is before any commit record can name it; the fsyncs go at once (issue 45)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gobblin_py import durable
from gobblin_py.runtime.task.committables import commit_staged


def test_the_file_and_every_new_directory_are_fsynced_before_it_returns(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[Path] = []
    real = durable._fsync_path

    def spy(path: Path) -> None:
        real(path)
        synced.append(Path(path).relative_to(tmp_path))

    monkeypatch.setattr(durable, "_fsync_path", spy)
    staged = tmp_path / "staging" / "part-0.avro"
    staged.parent.mkdir()
    staged.write_bytes(b"records")
    (tmp_path / "out").mkdir()
    dest = tmp_path / "out" / "run" / "wu" / "a1" / "ds" / "part-0.avro"
    f = commit_staged(staged, dest, "ds/part-0.avro", 3)
    assert dest.read_bytes() == b"records" and not staged.exists() and f.size == 7
    assert set(synced) == {Path(p) for p in ("out/run/wu/a1/ds/part-0.avro", "out/run/wu/a1/ds", "out/run/wu/a1",
                                             "out/run/wu", "out/run", "out")}


def test_fsync_all_raises_the_first_error(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"x")
    with pytest.raises(FileNotFoundError, match="gone"):
        durable.fsync_all([tmp_path / "a", tmp_path / "gone", tmp_path])
