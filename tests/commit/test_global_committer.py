"""A publisher's GlobalCommitter: one commit per dataset per run, between the file steps and the watermarks,
exactly once under SIGKILL at every commit point, and a partly done commit finished by `filter_recovered`.

The manifest publisher is docs/plugins.md's worked example, taken from that page itself."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path

import pytest
from support.jobs import REPO, example_job, write_job

from gobblin_py.api import DatasetCommit, GlobalCommitter
from gobblin_py.builtin.publishers.fs import FsPublisher
from gobblin_py.config import load_job
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import DatasetStatus, JobRunner
from gobblin_py.state.store import StateStore
from gobblin_py.testing.crash import SIGKILLED, cli, commit_points, duplicates, each_point, snapshot

RUN = ["run", "job.yaml", "--in-process"]


def readme_example() -> str:
    """The python block of docs/plugins.md's "Your own Committer and GlobalCommitter"."""
    text = (REPO / "docs" / "plugins.md").read_text(encoding="utf-8")
    [code] = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "class ManifestPublisher" in b]
    return code


def _manifest_job(tmp: Path) -> Path:
    (tmp / "manifest_publisher.py").write_text(readme_example(), encoding="utf-8")
    job = example_job(tmp, job={"name": "t", "work_dir": str(tmp / "work"), "commit_parallelism": 1},
                      publisher={"class": "manifest_publisher:ManifestPublisher", "final_dir": str(tmp / "output")})
    return write_job(tmp, job)


def _manifests(output: Path) -> dict[str, list[dict]]:
    """dataset → the files its manifests list, over every manifest (a doubled commit shows as a doubled list)."""
    out: dict[str, list[dict]] = {}
    for path in sorted((output / "_manifests").glob("*.json")):
        m = json.loads(path.read_text())
        out.setdefault(m["dataset"], []).extend(m["files"])
    return out


def _records(manifests: dict[str, list[dict]]) -> dict[str, int]:
    return {d: sum(f["records"] for f in fs) for d, fs in manifests.items()}


def _published(output: Path, dataset: str) -> list[str]:
    return sorted(p.relative_to(output).as_posix() for p in (output / dataset).rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("reference")
    _manifest_job(tmp)
    done = cli(RUN, tmp)
    assert done.returncode == 0, done.stdout + done.stderr
    manifests = _manifests(tmp / "output")
    files = sum(len(v) for v in manifests.values())
    return {"tmp": tmp, "snapshot": snapshot(tmp / "output"), "manifests": manifests,
            "watermarks": StateStore(tmp / "work", "t").watermarks(), "steps": files + 3 * len(manifests)}


def test_one_manifest_per_dataset_lists_every_published_file_once(reference: dict) -> None:
    output = reference["tmp"] / "output"
    manifests = reference["manifests"]
    assert sorted(manifests) == ["clicks", "orders"]
    assert len(list((output / "_manifests").glob("*.json"))) == 2
    for dataset, files in manifests.items():
        assert sorted(f["file"] for f in files) == _published(output, dataset)
    for path in (output / "_manifests").glob("*.json"):  # the watermarks committed right after, as the committer saw them
        m = json.loads(path.read_text())
        assert m["watermarks"] == reference["watermarks"][m["dataset"]] and m["watermarks"]
    assert sum(f["records"] for fs in manifests.values() for f in fs) == sum(reference["snapshot"]["records"].values()) + \
        sum(reference["snapshot"]["errors"].values())


@pytest.mark.crash
def test_killed_at_every_commit_point_the_next_run_commits_each_manifest_once(tmp_path: Path, reference: dict) -> None:
    points = [p for p in commit_points(reference["steps"]) if not p.startswith("recovery.")]
    assert len(points) > reference["steps"]

    def check(n: int, point: str) -> None:
        tmp = tmp_path / str(n)
        tmp.mkdir()
        shutil.copytree(reference["tmp"] / "data", tmp / "data")
        _manifest_job(tmp)
        assert cli(RUN, tmp, crash_at=point).returncode == SIGKILLED, point
        again = cli(RUN, tmp)
        assert again.returncode == 0, f"{point}: {again.stdout}{again.stderr}"
        snap = snapshot(tmp / "output")
        assert duplicates(snap) == 0 and snap == reference["snapshot"], point
        manifests = _manifests(tmp / "output")
        assert len(list((tmp / "output" / "_manifests").glob("*.json"))) == 2, point
        for dataset, files in manifests.items():  # names hash the source root, which differs from the reference's
            assert sorted(f["file"] for f in files) == _published(tmp / "output", dataset), point
        assert _records(manifests) == _records(reference["manifests"]), point
        assert StateStore(tmp / "work", "t").watermarks() == reference["watermarks"], point

    each_point(points, check)


class PartialCatalog(FsPublisher, GlobalCommitter):
    """Registers files one by one in <final_dir>/catalog.jsonl (not atomic), then marks the commit done; fails
    after the first file while <final_dir>/fail_once exists."""

    def _catalog(self) -> Path:
        return Path(self.settings.final_dir) / "catalog.jsonl"

    def _lines(self) -> list[dict]:
        path = self._catalog()
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def is_committed(self, commit: DatasetCommit) -> bool:
        return {"done": commit.commit_id} in self._lines()

    def filter_recovered(self, commit: DatasetCommit) -> DatasetCommit:
        registered = {line.get("file") for line in self._lines() if line.get("commit") == commit.commit_id}
        return dataclasses.replace(commit, files=tuple(f for f in commit.files if f.rel_path not in registered))

    def commit(self, commit: DatasetCommit) -> None:
        flag = Path(self.settings.final_dir) / "fail_once"
        with self._catalog().open("a") as out:
            for n, f in enumerate(commit.files):
                if n == 1 and flag.exists():
                    flag.unlink()
                    raise OSError("catalog went away")
                out.write(json.dumps({"commit": commit.commit_id, "file": f.rel_path}) + "\n")
                out.flush()
            out.write(json.dumps({"done": commit.commit_id}) + "\n")


def test_a_partly_done_global_commit_is_finished_with_what_filter_recovered_keeps(tmp_path: Path) -> None:
    output = tmp_path / "output"
    job = example_job(tmp_path, job={"name": "t", "work_dir": str(tmp_path / "work"), "commit_parallelism": 1,
                                     "commit_retry_backoff": 0},  # the next run retries at once
                      publisher={"class": f"{__name__}:PartialCatalog", "final_dir": str(output)})
    spec = load_job(write_job(tmp_path, job))
    output.mkdir()
    (output / "fail_once").touch()
    first = JobRunner(spec, InProcessExecutor()).run()
    assert {d.status for d in first.datasets} == {DatasetStatus.COMMITTED, DatasetStatus.COMMIT_FAILED}, first.error
    assert "catalog went away" in first.error
    store = JobRunner(spec, InProcessExecutor()).store
    [pending] = store.datasets("t")
    kinds = [type(step).type_name for step in store.get("t", pending).steps]
    assert kinds[-3:] == ["global_commit", "high_watermark", "dataset_state"], "after the files, before the watermarks"
    assert set(kinds[:-3]) == {"fs_rename"}

    second = JobRunner(spec, InProcessExecutor()).run()
    assert second.succeeded, second.error
    lines = [json.loads(line) for line in (output / "catalog.jsonl").read_text().splitlines()]
    files = [line["file"] for line in lines if "file" in line]
    assert len(files) >= 2 and len(files) == len(set(files)), "each file registered once"
    assert sorted(files) == _published(output, "clicks") + _published(output, "orders")
    assert sum(1 for line in lines if "done" in line) == 2, "one commit per dataset"
