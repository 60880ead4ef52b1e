"""Options that would destroy or double data are refused by `validate` (and so before any run), naming the keys and
saying the fix: the lock turned off under exactly-once, an output inside the input (or the input inside the output),
a partition pattern or a dataset name that leaves the job's directories."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from support.jobs import example_job, run_cli, write_job


def _validate(tmp: Path, job: dict[str, Any]) -> tuple[int, str]:
    path = write_job(tmp, job)
    done = run_cli("validate", str(path), cwd=tmp)
    assert "Traceback" not in done.stdout + done.stderr
    return done.returncode, done.stderr


def _refused(tmp: Path, job: dict[str, Any], *expected: str) -> str:
    code, stderr = _validate(tmp, job)
    assert code == 2, stderr
    for text in expected:
        assert text in stderr, f"{text!r} not in:\n{stderr}"
    return stderr


# --- item 7: job.lock: false under exactly-once -------------------------------------------------------------------

def test_the_lock_turned_off_under_exactly_once_is_refused_with_why_and_the_fix(tmp_path: Path) -> None:
    job = example_job(tmp_path)
    job["job"]["lock"] = False
    stderr = _refused(tmp_path, job, "job.lock: ", "two runs of the job at once would publish the same records twice",
                      "remove job.lock: false", "job.delivery: at_least_once")
    assert "job.yaml" in stderr


def test_the_lock_may_be_off_under_at_least_once(tmp_path: Path) -> None:
    job = example_job(tmp_path)
    job["job"].update(lock=False, delivery="at_least_once")
    code, stderr = _validate(tmp_path, job)
    assert code == 0, stderr


# --- item 9: an output inside the input, or the input inside the output --------------------------------------------

@pytest.mark.parametrize("final", ["data/out", "data", "."])
def test_a_final_dir_inside_equal_to_or_around_the_source_path_is_refused(tmp_path: Path, final: str) -> None:
    job = example_job(tmp_path)
    job["publisher"]["final_dir"] = final  # relative: to the directory the command runs in (tmp_path)
    _refused(tmp_path, job, "publisher.final_dir", "source.path", str((tmp_path / final).resolve()),
             str(tmp_path / "data"), "would read the files it published")


def test_a_final_dir_reached_through_a_symlink_into_the_input_is_refused(tmp_path: Path) -> None:
    job = example_job(tmp_path)
    (tmp_path / "data" / "published").mkdir()
    os.symlink(tmp_path / "data" / "published", tmp_path / "out-link")
    job["publisher"]["final_dir"] = str(tmp_path / "out-link" / "events")
    _refused(tmp_path, job, "publisher.final_dir", "source.path", str(tmp_path / "data" / "published" / "events"))


def test_a_url_final_dir_inside_a_url_source_path_is_refused(tmp_path: Path) -> None:
    job = example_job(tmp_path)
    job["source"]["path"] = "memory://bucket/in"
    job["publisher"]["final_dir"] = "memory://bucket/in/../in/out"
    _refused(tmp_path, job, "publisher.final_dir", "source.path", "memory://bucket/in/out")


def test_a_final_dir_beside_the_input_is_accepted(tmp_path: Path) -> None:
    job = example_job(tmp_path)
    job["publisher"]["final_dir"] = str(tmp_path / "data-out")  # shares a prefix of the name, not the directory
    code, stderr = _validate(tmp_path, job)
    assert code == 0, stderr


@pytest.mark.parametrize("key, value, expected", [
    ("task_output_dir", "data/task-output", "job.task_output_dir"),
    ("work_dir", "data/work", "job.work_dir"),  # its staging/ and task-output/ are under it
])
def test_task_output_or_staging_inside_the_input_is_refused(tmp_path: Path, key: str, value: str, expected: str) -> None:
    job = example_job(tmp_path)
    job["job"][key] = value
    _refused(tmp_path, job, expected, "source.path", str(tmp_path / "data"))


# --- item 11: paths made of job-file values stay under the job's directories ---------------------------------------

@pytest.mark.parametrize("pattern", ["../../escaped/yyyy/MM/dd", "/tmp/yyyy/MM/dd", "yyyy/../../MM", ".."])
def test_a_partition_pattern_leaving_the_dataset_directory_is_refused(tmp_path: Path, pattern: str) -> None:
    job = example_job(tmp_path)
    job["writer"]["partition"]["pattern"] = pattern
    _refused(tmp_path, job, "writer.partition.pattern", "a relative path", "without '..'")


@pytest.mark.parametrize("topic", ["..", "../../etc", "a/b"])
def test_a_kafka_topic_that_is_not_a_directory_name_is_refused(tmp_path: Path, topic: str) -> None:
    job = example_job(tmp_path, converters=None, quality=None)
    job["source"] = {"class": "kafka", "bootstrap_servers": "127.0.0.1:9", "topics": ["events", topic]}
    job["writer"] = {"class": "jsonl"}
    _refused(tmp_path, job, "source.topics", repr(topic))


def test_a_jdbc_table_that_is_not_a_directory_name_is_refused(tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    job = example_job(tmp_path, converters=None, quality=None)
    job["source"] = {"class": "jdbc", "url": "postgresql://u@127.0.0.1:9/db",
                     "tables": [{"table": "public/../../x", "watermark_column": "ts", "primary_key": "id"}]}
    job["writer"] = {"class": "jsonl"}
    _refused(tmp_path, job, "source.tables[0].table", "'public/../../x'")


@pytest.mark.parametrize("dataset", ["../x", "/abs", "a/../../b"])
def test_a_dataset_name_a_source_plans_outside_the_final_dir_fails_where_it_is_joined(tmp_path: Path, dataset: str) -> None:
    """A plugin's source names its datasets at run time: the join under the final directory refuses one that leaves it."""
    from gobblin_py.config import load_job
    from gobblin_py.errors import SourceError

    job = load_job(write_job(tmp_path, example_job(tmp_path)))
    assert job.branch_dir("clicks", "main") == "clicks"
    with pytest.raises(SourceError, match="is not a relative directory name"):
        job.branch_dir(dataset, "main")
