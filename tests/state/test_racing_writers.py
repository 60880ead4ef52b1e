"""Two drivers of a leased job writing one dataset's watermarks in a local work directory at once.

CDC soak seed 2481847510: a driver's commit thread checked a watermark record, then its process was frozen (another
thread stopped it at a commit point) before the rename; another driver took the job over and committed newer
watermarks and moved the slot on; woken, the frozen thread renamed the older record over them. The slot was then past
the dataset's watermarks, and the run refused. Here the older driver is held between its check and its write while
the newer one writes from the same version: the older one must lose, whichever layout the record had.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from gobblin_py.errors import LeaseLostError
from gobblin_py.fs import conditional, records
from gobblin_py.fs.conditional import Conflict
from gobblin_py.fs.records import LocalRecordFiles
from gobblin_py.state.store import WatermarkFile, writing_at


@pytest.mark.parametrize("earlier_commits", [0, 3], ids=["from-a-plain-record", "from-a-numbered-record"])
def test_a_driver_frozen_between_its_check_and_its_write_never_writes_over_a_newer_commit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, earlier_commits: int) -> None:
    first = WatermarkFile(tmp_path, "public.t2")
    with writing_at(1):
        first.replace(first.body({"lsn": 100}), None)
        for n in range(earlier_commits):
            first.replace(first.body({"lsn": 101 + n}), first.read_versioned()[1])
    start = first.read_versioned()[1]

    held = threading.Event()
    release = threading.Event()
    older_thread: list[threading.Thread] = []

    def holding(real):  # the older driver's thread stops as it begins to write the file
        def write(*args, **kwargs):
            if threading.current_thread() in older_thread:
                held.set()
                assert release.wait(60)
            return real(*args, **kwargs)
        return write

    monkeypatch.setattr(records, "atomic_write", holding(records.atomic_write))
    monkeypatch.setattr(records, "atomic_replace", holding(records.atomic_replace))
    monkeypatch.setattr(conditional, "atomic_replace", holding(conditional.atomic_replace))  # a numbered version
    outcome: dict[str, object] = {}

    def older() -> None:
        try:
            with writing_at(1):
                WatermarkFile(tmp_path, "public.t2").replace(first.body({"lsn": 150}), start)
            outcome["older"] = "written"
        except (Conflict, LeaseLostError) as exc:
            outcome["older"] = exc

    older_thread.append(threading.Thread(target=older))
    older_thread[0].start()
    try:
        assert held.wait(30), "the older driver never began its write"
        with writing_at(2):
            WatermarkFile(tmp_path, "public.t2").replace(first.body({"lsn": 200}), start)
    finally:
        release.set()
        older_thread[0].join(30)

    assert outcome["older"] != "written", "the frozen driver's older watermarks were written over the newer commit"
    assert WatermarkFile(tmp_path, "public.t2").read() == {"lsn": 200}
    assert LocalRecordFiles(tmp_path).names("watermarks") == ["public.t2.json"]  # versions are one record


def test_numbered_versions_an_earlier_build_kept_beside_their_file_are_still_the_value(tmp_path: Path) -> None:
    """An earlier build kept a key's numbered versions beside its file (`<key>.v<N>`); read as they stand, the
    older plain file would be taken for the value (older watermarks: records read again). They move into the key's
    versions folder before anything there is read, and the next swap goes on from them."""
    folder = tmp_path / "watermarks"
    folder.mkdir()
    (folder / "a.json").write_bytes(b"plain, older")
    (folder / "a.json.v2").write_bytes(b"version 2")
    (folder / "a.json.v3").write_bytes(b"version 3, the value")
    (folder / "b.json").write_bytes(b"b's only value")
    files = LocalRecordFiles(tmp_path)
    assert files.get("watermarks/a.json").data == b"version 3, the value"
    assert files.get("watermarks/b.json").data == b"b's only value"
    assert files.names("watermarks") == ["a.json", "b.json"]
    assert sorted(p.name for p in folder.iterdir()) == [".a.json.versions", "a.json", "b.json"]
    files.swap("watermarks/a.json", b"version 4", files.get("watermarks/a.json").version)
    with pytest.raises(Conflict):
        files.swap("watermarks/a.json", b"stale", "v3")
    assert files.get("watermarks/a.json").data == b"version 4"
