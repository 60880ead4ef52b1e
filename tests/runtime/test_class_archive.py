"""The driver JVM's class-data-sharing archive: recorded by the first run, used once its dump is finished, never a
half-written one, and a dead writer's leftovers cleared."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from gobblin_py.runtime.executors.class_archive import MAGIC, STALE_S, archive_path, java_options


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "gobblin-py"


def test_the_first_run_records_and_a_finished_dump_is_used_from_then_on(cache: Path) -> None:
    [record] = java_options("4.0.5")
    final = archive_path("4.0.5")
    assert record == f"-XX:ArchiveClassesAtExit={final}.{os.getpid()}.dump" and final.parent == cache
    assert java_options("4.0.5") == []  # while one run records, no other does
    dump = Path(record.split("=", 1)[1])
    dump.write_bytes(MAGIC + b"\0" * 100)  # the JVM wrote its header last: the dump is whole
    assert java_options("4.0.5") == [f"-XX:SharedArchiveFile={final}"]
    assert final.is_file() and not dump.exists()
    assert java_options("4.1.0")[0].startswith("-XX:ArchiveClassesAtExit=")  # another pyspark: an archive of its own


def test_a_half_written_dump_is_never_used_and_a_dead_writers_is_cleared(cache: Path) -> None:
    [record] = java_options("4.0.5")
    dump = Path(record.split("=", 1)[1])
    dump.write_bytes(b"\0" * 100)  # killed before the header
    assert java_options("4.0.5") == [] and dump.exists() and not archive_path("4.0.5").exists()
    old = time.time() - STALE_S - 60
    os.utime(dump, (old, old))
    assert java_options("4.0.5") == [record] and dump.stat().st_size == 0  # the dead one's gone: recorded afresh


def test_without_a_writable_cache_the_jvm_starts_without_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    assert java_options("4.0.5") == []


def test_each_pyspark_install_has_its_own_archive(cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The JVM refuses an archive recorded with another Spark classpath: a second environment records its own."""
    import importlib.machinery
    import importlib.util

    here = archive_path("4.0.5")
    other = tmp_path / "other-venv" / "pyspark" / "__init__.py"
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name: importlib.machinery.ModuleSpec(name, None, origin=str(other)))
    assert archive_path("4.0.5") != here and archive_path("4.0.5").parent == here.parent
