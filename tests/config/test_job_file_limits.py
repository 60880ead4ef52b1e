"""Job files that used to validate and then end in "internal error" (exit 4), or hang: each is now a clear error
naming the key (exit 2), and a fault of the machine is exit 1 naming the path, never exit 4."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.jobs import example_job, run_cli, write_job


def _validate(tmp: Path) -> tuple[int, str]:
    done = run_cli("validate", "job.yaml", cwd=tmp)
    return done.returncode, done.stdout + done.stderr


def test_a_job_name_too_long_for_a_file_name_is_refused(tmp_path: Path) -> None:
    write_job(tmp_path, example_job(tmp_path, job__name="j" * 300))
    code, text = _validate(tmp_path)
    assert code == 2 and "job.name" in text and "at most 100" in text, text


def test_a_work_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "work").write_text("not a directory")
    write_job(tmp_path, example_job(tmp_path))
    code, text = _validate(tmp_path)
    assert code == 2 and "job.work_dir" in text and "is a file, not a directory" in text, text


@pytest.mark.parametrize("url", ["hdfs://nn/work/job", "file:///srv/work"])
def test_a_work_dir_url_of_no_object_store_is_refused_and_no_local_folder_named_after_its_scheme_is_made(tmp_path: Path, url: str) -> None:
    """`hdfs://n/w` used to become a folder `hdfs:` beside the job file on each host: a work directory per host (state,
    commit log, lock), two drivers of one job both committing, while the operator believed it shared."""
    write_job(tmp_path, example_job(tmp_path, job__work_dir=url))
    code, text = _validate(tmp_path)
    assert code == 2 and "job.work_dir" in text and url in text, text
    done = run_cli("run", "job.yaml", "--in-process", cwd=tmp_path)
    assert done.returncode == 2 and url in done.stdout + done.stderr
    assert not (tmp_path / (url.split("://")[0] + ":")).exists() and not (tmp_path / "output").exists()
    if url.startswith("file://"):
        assert "give the path /srv/work" in text, text
    else:
        assert "object store that enforces conditional writes" in text, text


@pytest.mark.parametrize("url", ["s3://bucket/work/job"])
def test_a_work_dir_on_an_object_store_keeps_the_records_there_and_makes_no_local_folder_named_after_its_scheme(
        tmp_path: Path, url: str) -> None:
    write_job(tmp_path, example_job(tmp_path, job__work_dir=url))
    code, text = _validate(tmp_path)
    assert code == 0, text
    from gobblin_py.config.loader import load_yaml_job

    job = load_yaml_job(tmp_path / "job.yaml")
    assert job.job.work_store == url and job.job.records_root == url
    assert job.job.task_output_root == url + "/task-output" and job.job.lease_location == url + "/leases"
    assert job.job.shared_lease and not str(job.job.work_dir).startswith(str(tmp_path))
    assert not (tmp_path / (url.split("://")[0] + ":")).exists()


def test_yaml_nested_too_deep_is_refused(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text("job: " + "[" * 5000 + "]" * 5000 + "\n")
    code, text = _validate(tmp_path)
    assert code == 2 and "nested too deep" in text and "Traceback" not in text, text


def test_a_gobblin_job_with_absurdly_many_fork_branches_is_refused_at_once(tmp_path: Path) -> None:
    (tmp_path / "job.pull").write_text("job.name=j\nsource.class=org.apache.gobblin.source.extractor.filebased.TextFileBasedSource\n"
                                       "fork.branches=100000000\n")
    done = run_cli("validate", "job.pull", cwd=tmp_path, timeout=60)
    assert done.returncode == 2 and "fork.branches" in done.stdout + done.stderr, done.stdout + done.stderr


def test_a_work_dir_the_machine_refuses_is_exit_1_naming_it(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("a file where a directory is needed")
    write_job(tmp_path, example_job(tmp_path, job__work_dir=str(tmp_path / "blocker" / "work")))
    done = run_cli("run", "job.yaml", "--in-process", cwd=tmp_path)
    text = done.stdout + done.stderr
    assert done.returncode == 1 and "internal error" not in text and "Traceback" not in text, text
    assert str(tmp_path / "blocker") in text, text


@pytest.mark.parametrize(("lease", "said"), [
    ({"url": "hdfs://nn/leases"}, "a lease lives on an object store that enforces conditional writes"),
    ({"url": "s3://b/leases"}, "a lease with job.lock: false is never taken"),
])
def test_a_lease_that_could_not_keep_hosts_apart_is_refused(tmp_path: Path, lease: dict, said: str) -> None:
    job = example_job(tmp_path)
    job["job"]["lease"] = lease
    if "s3" in lease["url"]:
        job["job"].update(lock=False, delivery="at_least_once")
    write_job(tmp_path, job)
    code, text = _validate(tmp_path)
    assert code == 2 and "job.lease.url" in text and said in text, text
