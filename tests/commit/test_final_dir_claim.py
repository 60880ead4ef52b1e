"""Two work directories publishing one job to one `final_dir` (issue 43: two hosts, each with a work directory of its
own): each keeps its own positions, so the second published every record again, and nothing refused it. The job's
claim on `final_dir` is made by the first run to publish there; the other work directory is refused before it reads
anything, naming both, and publishes nothing."""

from __future__ import annotations

import json
from pathlib import Path

from support.jobs import example_job, run_cli, write_job
from support.world import avro_ids


def _host(tmp: Path, name: str, output: Path) -> Path:
    home = tmp / name
    home.mkdir()
    job = example_job(home)
    job["publisher"] = {"final_dir": str(output)}
    return write_job(home, job)


def test_a_second_work_directory_on_one_final_dir_is_refused_naming_the_first(tmp_path: Path) -> None:
    output = tmp_path / "output"
    a, b = _host(tmp_path, "a", output), _host(tmp_path, "b", output)
    first = run_cli("run", str(a), "--in-process")
    assert first.returncode == 0, first.stdout + first.stderr
    published = avro_ids(output)
    assert published and set(published.values()) == {1}

    second = run_cli("run", str(b), "--in-process")
    said = second.stdout + second.stderr
    assert second.returncode == 1, said
    assert "Traceback" not in said
    assert f"holds what job 't' published from another work directory ({tmp_path / 'a' / 'work'}" in said, said
    assert "state reset" in said and f"then delete {output}/_gobblin-py/claims/.t.json.versions" in said, said
    assert avro_ids(output) == published, "the second work directory published records again"
    assert not (tmp_path / "b" / "work" / "task-output" / "t").exists() or \
        not any((tmp_path / "b" / "work" / "task-output" / "t").rglob("*.avro")), "it read before it was refused"

    again = run_cli("run", str(a), "--in-process")  # the first work directory goes on
    assert again.returncode == 0, again.stdout + again.stderr
    claim = json.loads((output / "_gobblin-py" / "claims" / ".t.json.versions" / "1").read_text())
    assert claim["work_dir"] == str(tmp_path / "a" / "work")


def test_the_claim_is_released_by_deleting_it_after_the_positions_are_set(tmp_path: Path) -> None:
    """The documented way out when the first work directory is gone for good: set the positions, delete the claim."""
    output = tmp_path / "output"
    a, b = _host(tmp_path, "a", output), _host(tmp_path, "b", output)
    assert run_cli("run", str(a), "--in-process").returncode == 0
    published = avro_ids(output)
    import shutil

    shutil.copytree(tmp_path / "a" / "work" / "state", tmp_path / "b" / "work" / "state")  # the positions, restored
    shutil.rmtree(output / "_gobblin-py" / "claims" / ".t.json.versions")  # what the refusal says to delete
    moved = run_cli("run", str(b), "--in-process")
    assert moved.returncode == 0, moved.stdout + moved.stderr
    assert avro_ids(output) == published
