"""Bad job files are refused before any work, with the file and the key path in the message.

The corpus in bad_jobs/ holds one mistake per file; each file's leading `# expect: <text>`
comment lines name what the ConfigError message must contain.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gobblin_py.config import load_job
from gobblin_py.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parents[2]
CORPUS_DIR = Path(__file__).resolve().parent / "bad_jobs"
CORPUS = sorted(CORPUS_DIR.glob("*.yaml"))


def _expectations(path: Path) -> list[str]:
    """The `# expect:` lines at the top of a corpus file (the first line must be one)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines and lines[0].startswith("# expect: "), f"{path} must start with '# expect: <substring>'"
    out = []
    for line in lines:
        if not line.startswith("# expect: "):
            break
        out.append(line[len("# expect: "):])
    return out


def _rel(path: Path) -> str:
    return path.relative_to(REPO_ROOT).as_posix()


@pytest.fixture
def in_repo_root(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Relative paths in job files (jobs/data, jobs/schemas/...) resolve against the repo root."""
    monkeypatch.chdir(REPO_ROOT)
    monkeypatch.delenv("GOBBLIN_PY_DEFAULTS", raising=False)
    return REPO_ROOT


def test_corpus_is_big_enough() -> None:
    assert len(CORPUS) >= 12


@pytest.mark.parametrize("job_file", CORPUS, ids=lambda p: p.stem)
def test_bad_job_file_is_refused_naming_file_and_key(job_file: Path, in_repo_root: Path) -> None:
    rel = _rel(job_file)
    with pytest.raises(ConfigError) as info:
        load_job(rel)
    message = str(info.value)
    assert rel in message
    for expected in _expectations(job_file):
        assert expected in message, f"{expected!r} not in:\n{message}"
    assert "Traceback" not in message


def test_example_job_loads(in_repo_root: Path) -> None:
    job = load_job("jobs/example.yaml")
    assert job.name == "example"
    assert job.source.settings.path == str(REPO_ROOT / "jobs" / "data")
    assert [c.path for c in job.converters] == ["gobblin_py.builtin.converters.json_to_avro:JsonToAvroConverter"]
    assert [b.name for b in job.branches] == ["main"]
    writer = job.branches[0].writer
    assert writer.path == "gobblin_py.builtin.writers.avro:AvroWriter"
    assert writer.settings.partition.granularity == "DAY"
    assert job.branches[0].publisher.settings.final_dir == str(REPO_ROOT / "output")


def test_all_problems_of_a_file_are_reported_together(tmp_path: Path, in_repo_root: Path) -> None:
    job_file = tmp_path / "three_mistakes.yaml"
    job_file.write_text(
        "job:\n"
        "  name: three-mistakes\n"
        "  max_task_retries: three\n"
        "source: {class: filez, path: jobs/data}\n"
        "writer: {class: avro, codecc: snappy}\n"
        "publisher: {final_dir: ./output}\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as info:
        load_job(job_file)
    message = str(info.value)
    assert str(job_file) in message
    assert "(3 problems)" in message
    problem_lines = [line.strip() for line in message.splitlines()[1:]]
    assert len(problem_lines) == 3
    assert any(line.startswith("job.max_task_retries:") for line in problem_lines)
    assert any(line.startswith("source.class:") for line in problem_lines)
    assert any(line.startswith("writer.codecc:") for line in problem_lines)


def test_unknown_nested_key_lists_the_nested_keys(tmp_path: Path, in_repo_root: Path) -> None:
    job_file = tmp_path / "nested.yaml"
    job_file.write_text(
        "job: {name: nested}\n"
        "source: {class: files, path: jobs/data}\n"
        "writer:\n"
        "  class: jsonl\n"
        "  partition: {column: ts, granularityy: DAY}\n"
        "publisher: {final_dir: ./output}\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as info:
        load_job(job_file)
    line = next(s for s in str(info.value).splitlines() if "writer.partition.granularityy" in s)
    assert "granularity" in line.split("expected one of:", 1)[1]


def test_unknown_key_suggests_the_keys_a_user_writes(tmp_path: Path, in_repo_root: Path) -> None:
    job_file = tmp_path / "alias.yaml"
    job_file.write_text(
        "job: {name: alias}\n"
        "source: {class: files, path: jobs/data}\n"
        "converters:\n"
        "  - {class: json_to_avro, schema: jobs/schemas/event.avsc, strict: true}\n"
        "writer: {class: avro}\n"
        "publisher: {final_dir: ./output}\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as info:
        load_job(job_file)
    line = next(s for s in str(info.value).splitlines() if "converters[0].strict" in s)
    assert "expected one of: on_unknown_fields, schema)" in line  # the alias a user writes, not schema_file


def test_branch_key_that_does_nothing_is_refused(tmp_path: Path, in_repo_root: Path) -> None:
    job_file = tmp_path / "route.yaml"
    job_file.write_text(
        "job: {name: route}\n"
        "source: {class: files, path: jobs/data}\n"
        "fork:\n"
        "  class: identity\n"
        "  branches:\n"
        "    - {name: de, route: [DE]}\n"
        "    - {name: rest}\n"
        "writer: {class: jsonl}\n"
        "publisher: {final_dir: ./output}\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match=r"fork\.branches\[0\]\.route"):
        load_job(job_file)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "GOBBLIN_PY_DEFAULTS"}
    return subprocess.run(
        [sys.executable, "-m", "gobblin_py.cli.main", *args],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60,
    )


def test_cli_validate_bad_file_exits_2_with_key_path() -> None:
    rel = _rel(CORPUS_DIR / "job_retries_wrong_type.yaml")
    proc = _cli("validate", rel)
    assert proc.returncode == 2, proc.stderr
    assert "job.max_task_retries" in proc.stderr
    assert rel in proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


def test_cli_run_bad_file_exits_2_before_any_work() -> None:
    rel = _rel(CORPUS_DIR / "source_unknown_alias.yaml")
    proc = _cli("run", rel)
    assert proc.returncode == 2, proc.stderr
    assert "source.class" in proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


def test_cli_validate_good_file_exits_0() -> None:
    proc = _cli("validate", "jobs/example.yaml")
    assert proc.returncode == 0, proc.stderr
    assert "valid job 'example'" in proc.stdout
