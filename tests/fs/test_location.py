"""Locations: local paths and URLs as the job file gives them, and how the publisher chooses its step."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from support.jobs import example_job, write_job

from gobblin_py.commit.steps import FsCopyCommitStep, FsRenameCommitStep, publish_step
from gobblin_py.errors import ConfigError
from gobblin_py.fs import Location, filesystem_for
from gobblin_py.fs.publish_steps import step_kind


def test_local_paths_are_made_absolute_and_file_urls_are_local(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert Location("out") == str(tmp_path / "out")
    assert Location(f"file://{tmp_path}/x/") == str(tmp_path / "x")
    assert Location("file:///a/b").is_local and Location("/a/b").path == Path("/a/b")


def test_every_local_file_uri_form_a_table_lists_is_the_same_path(tmp_path, monkeypatch):
    """Spark and Hadoop write `file:/x`; it was read as `<cwd>/file:/x` (and `file://localhost/x` as `/localhost/x`),
    so a file a table lists looked unreferenced to an orphan sweep."""
    monkeypatch.chdir(tmp_path)
    forms = ["file:/data/t/a.parquet", "file:///data/t/a.parquet", "file://localhost/data/t/a.parquet",
             "FILE:/data/t/a.parquet", "/data/t/a.parquet"]
    assert {str(Location(f)) for f in forms} == {"/data/t/a.parquet"}
    assert Location("file:/data/t/a.parquet").is_local


def test_urls_keep_their_scheme_and_join_like_paths():
    out = Location("S3://bucket/prefix/")
    assert out == "s3://bucket/prefix" and out.scheme == "s3" and not out.is_local
    assert out / "clicks/2026/01/f.avro" == "s3://bucket/prefix/clicks/2026/01/f.avro"
    assert (out / "a" / "b").parent == "s3://bucket/prefix/a" and (out / "a").name == "a"
    assert Location("s3://bucket").parent == "s3://bucket"
    with pytest.raises(ValueError, match="not a local path"):
        _ = out.path


def test_a_location_survives_pickling_as_a_location():
    loc = pickle.loads(pickle.dumps(Location("s3://b/k")))
    assert isinstance(loc, Location) and loc.scheme == "s3"


def test_a_url_without_filesystem_is_refused_naming_the_key(tmp_path):
    from gobblin_py.config.job_files import load_job

    path = write_job(tmp_path, example_job(tmp_path, publisher={"final_dir": "nosuchfs://bucket/out"},
                                           job={"name": "t", "work_dir": str(tmp_path / "w"), "task_output_dir": "zzz://x"}))
    with pytest.raises(ConfigError) as err:
        load_job(path)
    text = str(err.value)
    assert "publisher.final_dir" in text and "no filesystem for nosuchfs://" in text
    assert "job.task_output_dir" in text and "zzz://" in text


def test_publisher_renames_on_one_disk_and_copies_across_filesystems(tmp_path):
    src = tmp_path / "task-output" / "f.avro"
    assert type(publish_step(str(src), str(tmp_path / "out" / "f.avro"), 1, "00000000")) is FsRenameCommitStep
    assert step_kind(str(src), "s3://bucket/out/f.avro") is FsCopyCommitStep
    assert step_kind("s3://bucket/tasks/f.avro", "s3://bucket/out/f.avro") is FsCopyCommitStep


def test_local_filesystem_round_trip(tmp_path):
    fs = filesystem_for(Location(tmp_path))
    src = tmp_path / "a.bin"
    src.write_bytes(b"x" * 10)
    dst = Location(tmp_path / "d" / "e" / "a.bin")
    fs.put(src, dst)
    assert fs.size(dst) == 10 and fs.checksum(dst) == fs.checksum(Location(src))
    assert [p.name for p in fs.listdir(Location(tmp_path / "d"))] == ["e"]
    fs.rmtree(Location(tmp_path / "d"))
    assert fs.size(dst) is None and fs.listdir(Location(tmp_path / "d")) == []


def test_options_a_filesystem_refuses_are_named_by_their_key():
    from gobblin_py.fs import configure

    configure({"github": {}})  # fsspec's github filesystem needs org and repo
    try:
        with pytest.raises(ConfigError, match=r"job\.filesystems\.github: cannot set up the github:// filesystem .*'org' and 'repo'"):
            filesystem_for(Location("github://path/x"))
    finally:
        configure({})
