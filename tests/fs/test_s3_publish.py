"""Publishing to an object store (S3 via moto on 127.0.0.1): copy-then-verify, exactly once."""

from __future__ import annotations

from pathlib import Path

import pytest

from gobblin_py.api.commit_step import StepStatus
from gobblin_py.commit.steps import FsCopyCommitStep, publish_step
from gobblin_py.durable import file_checksum
from gobblin_py.errors import CommitError
from gobblin_py.fs import Location, configure, filesystem_for

pytestmark = pytest.mark.s3


@pytest.fixture
def bucket(s3) -> str:
    configure(s3.options)
    yield s3.new_bucket()
    configure({})


def _task_file(tmp: Path, content: bytes = b"avro bytes " * 100) -> Path:
    p = tmp / "task-output" / "f.avro"
    p.parent.mkdir(parents=True)
    p.write_bytes(content)
    return p


def _step(src: str | Path, dst: str, content: bytes) -> FsCopyCommitStep:
    step = publish_step(str(src), dst, len(content), file_checksum_of(content))
    assert isinstance(step, FsCopyCommitStep)
    return step


def file_checksum_of(content: bytes) -> str:
    import crc32c

    return f"{crc32c.crc32c(content):08x}"


def test_local_task_output_is_copied_verified_then_removed(tmp_path, s3, bucket):
    src = _task_file(tmp_path)
    step = _step(src, f"s3://{bucket}/out/ds/f.avro", src.read_bytes())
    assert step.status() is StepStatus.PENDING and not step.verify()
    step.execute()
    assert step.verify() and not src.exists()
    assert s3.client().cat_file(f"{bucket}/out/ds/f.avro") == b"avro bytes " * 100
    step.execute()  # replay after the step completed: nothing to do
    assert step.status() is StepStatus.DONE


def test_a_foreign_destination_is_kept_and_a_crash_after_the_copy_only_deletes(tmp_path, s3, bucket):
    content = b"the real content"
    src = _task_file(tmp_path, content)
    dst = f"s3://{bucket}/out/f.avro"
    s3.client().pipe_file(dst.removeprefix("s3://"), b"another job's object")
    step = _step(src, dst, content)
    assert not step.verify() and step.conflict()
    with pytest.raises(CommitError, match=f"cannot publish {src} at {dst}: the destination already holds a different file"):
        step.execute()
    assert s3.client().cat_file(dst.removeprefix("s3://")) == b"another job's object" and src.exists()
    s3.client().rm_file(dst.removeprefix("s3://"))  # the operator moves it away
    step.execute()
    assert s3.client().cat_file(dst.removeprefix("s3://")) == content and not src.exists()

    # a run killed after the copy verified and before the source was deleted: the replay only deletes
    src2 = _task_file(tmp_path / "again", content)
    step2 = _step(src2, dst, content)
    assert step2.status() is StepStatus.PENDING
    step2.execute()
    assert not src2.exists() and step2.verify()


def test_object_to_object_copy_inside_the_store(tmp_path, s3, bucket):
    content = b"x" * 5000
    local = _task_file(tmp_path, content)
    fs = filesystem_for(Location(f"s3://{bucket}"))
    src = Location(f"s3://{bucket}/tasks/run/f.avro")
    fs.put(local, src)
    step = _step(src, f"s3://{bucket}/out/f.avro", content)
    step.execute()
    assert fs.size(src) is None and step.verify()
    assert fs.checksum(Location(step.dst)) == file_checksum(local)


def test_a_lost_source_with_no_published_copy_is_reported_lost(tmp_path, s3, bucket):
    step = FsCopyCommitStep(src=str(tmp_path / "gone.avro"), dst=f"s3://{bucket}/out/gone.avro", size=3, checksum="00000000")
    assert step.status() is StepStatus.LOST
    with pytest.raises(CommitError, match=r"gone.avro is gone and the destination does not hold it"):
        step.execute()


def test_a_missing_bucket_fails_the_step_and_keeps_the_source(tmp_path, s3, bucket):
    content = b"keep me"
    src = _task_file(tmp_path, content)
    step = _step(src, "s3://no-such-bucket-here/out/f.avro", content)
    with pytest.raises(Exception) as err:
        step.execute()
    assert "no-such-bucket-here" in str(err.value) or "NoSuchBucket" in repr(err.value)
    assert src.read_bytes() == content and step.status() is StepStatus.PENDING
