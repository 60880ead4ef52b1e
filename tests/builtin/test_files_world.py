"""The files source when the directory is not what a plain tree of finished files would be: a line still being
written (tailing with `ingest_appended`), a directory that cannot be listed, a dangling symlink, a FIFO. Each either
reads every record once or is reported as an input problem naming the path (the run exits 1): never skipped quietly
and never a hang."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from support.jobs import example_job, write_job

from gobblin_py.api import SourceState, WorkUnit
from gobblin_py.builtin.sources.files.source import FilesSource
from gobblin_py.config import load_job
from gobblin_py.errors import SourceError
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import JobRunner
from gobblin_py.testing.outputs import read_avro_dir, read_error_files


def _source(root: Path, **settings: Any) -> FilesSource:
    return FilesSource(FilesSource.Settings.model_validate({"path": str(root), **settings}))


def _line(i: int) -> str:
    return json.dumps({"id": i, "ts": 1767225600000 + i, "user": f"u{i}", "kind": "click", "amount": None,
                       "country": "US"}) + "\n"


def test_tailing_reads_a_line_half_written_at_planning_once_it_is_whole(tmp_path: Path) -> None:
    data = tmp_path / "data" / "events"
    data.mkdir(parents=True)
    file = data / "log.jsonl"
    whole, half = _line(1) + _line(2), _line(3)
    file.write_text(whole + half[:10])
    job = example_job(tmp_path, source={"class": "files", "path": str(tmp_path / "data"), "ingest_appended": True})
    path = write_job(tmp_path, job)
    first = JobRunner(load_job(path), InProcessExecutor()).run()
    assert first.succeeded, first.error
    with file.open("a") as f:
        f.write(half[10:] + _line(4))
    second = JobRunner(load_job(path), InProcessExecutor()).run()
    assert second.succeeded, second.error
    ids = sorted(r["id"] for r in read_avro_dir(tmp_path / "output"))
    assert ids == [1, 2, 3, 4], ids
    assert not read_error_files(tmp_path / "output"), "no half line goes to the error file"


def test_a_file_without_a_whole_line_yet_is_left_for_a_later_run(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "log.jsonl").write_text('{"id": 1')
    assert _source(tmp_path, ingest_appended=True).get_workunits(SourceState({})) == []
    (tmp_path / "d" / "log.jsonl").write_text('{"id": 1}\n{"id": 2')
    [unit] = _source(tmp_path, ingest_appended=True).get_workunits(SourceState({}))
    assert isinstance(unit, WorkUnit) and unit.expected_high_watermark == len('{"id": 1}\n')


def test_a_dangling_symlink_is_an_input_problem_naming_it(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.jsonl").write_text('{"id": 1}\n')
    (tmp_path / "d" / "b.jsonl").symlink_to(tmp_path / "gone.jsonl")
    state = SourceState({})
    units = _source(tmp_path).get_workunits(state)
    assert [u.watermark_key for u in units] == ["a.jsonl"]
    assert any(str(tmp_path / "d" / "b.jsonl") in p and "not a regular file" in p for p in state.input_problems["d"])


def test_a_fifo_is_an_input_problem_and_never_read(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    os.mkfifo(tmp_path / "d" / "pipe.jsonl")
    state = SourceState({})
    assert _source(tmp_path).get_workunits(state) == []
    assert any("pipe.jsonl" in p and "not a regular file" in p for p in state.input_problems["d"])


def test_a_directory_that_cannot_be_listed_fails_planning_naming_it() -> None:
    """As root, permissions do not stop a listing: the planning runs without the capabilities that bypass them."""
    base = Path(tempfile.mkdtemp(prefix="gobblin-unlistable-"))
    try:
        base.chmod(0o755)
        (base / "d").mkdir()
        (base / "d" / "a.jsonl").write_text('{"id": 1}\n')
        (base / "d" / "locked").mkdir()
        (base / "d" / "locked" / "b.jsonl").write_text('{"id": 2}\n')
        (base / "d" / "locked").chmod(0o000)
        code = ("import sys\nfrom gobblin_py.api import SourceState\n"
                "from gobblin_py.builtin.sources.files.source import FilesSource\n"
                "from gobblin_py.errors import SourceError\n"
                f"s = FilesSource(FilesSource.Settings.model_validate({{'path': {str(base)!r}}}))\n"
                "try:\n    print('planned', len(s.get_workunits(SourceState({}))))\n"
                "except SourceError as e:\n    print('error', e)\n")
        prefix: list[str] = []
        if os.geteuid() == 0:
            setpriv = shutil.which("setpriv")
            if setpriv is None:
                pytest.skip("as root, needs util-linux's setpriv to drop the capabilities that bypass permissions")
            caps = "-dac_override,-dac_read_search"
            prefix = [setpriv, f"--inh-caps={caps}", f"--bounding-set={caps}"]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        done = subprocess.run([*prefix, sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=base,
                              timeout=60)
        assert done.stdout.startswith("error"), done.stdout + done.stderr
        assert str(base / "d" / "locked") in done.stdout, done.stdout
    finally:
        (base / "d" / "locked").chmod(0o755)
        subprocess.run(["rm", "-rf", str(base)], check=True)


def test_source_error_is_what_planning_raises_for_a_missing_root(tmp_path: Path) -> None:
    source = _source(tmp_path)
    tmp_path.rmdir()
    with pytest.raises(SourceError):
        source.get_workunits(SourceState({}))
