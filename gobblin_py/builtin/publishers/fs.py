"""The `fs` publisher: each task output file goes to `<final_dir>/<rel_path>` — renamed where the filesystem
renames atomically, else copied, verified by checksum, and its source deleted. A job's `final_dir` belongs to the work
directory that first published to it (`<final_dir>/_gobblin-py/claims/<job>.json`, created only if absent).

A range read again after `state reset` lands on its first read's file names; where the source changed meanwhile (a
row deleted), the bytes differ, and a step would refuse to replace the file. Such a file is published beside it
instead, named by its checksum (`<name>.r<crc32c>.<ext>`, so a replay lands on the same name): the reset asked for
one more copy, and nothing published is replaced (`free_destination`).

Its publish steps live in the filesystem layer (`gobblin_py/fs/publish_steps.py`), not here: the Delta and Iceberg
publishers and compaction publish files with the same steps, and a plugin may not import another plugin."""

from __future__ import annotations

import datetime as dt
import json
import logging

from pydantic import Field

from gobblin_py.api import Claimant, CommitStep, DataPublisher, OutputFile, Settings
from gobblin_py.errors import CommitError, StateStoreError
from gobblin_py.fs import Location, filesystem_for
from gobblin_py.fs.conditional import Conflict, open_blobs
from gobblin_py.fs.paths import FsLocation
from gobblin_py.fs.publish_steps import publish_step
from gobblin_py.fs.registry import options_for

CLAIMS = "_gobblin-py/claims"

log = logging.getLogger(__name__)


class FsPublisherSettings(Settings):
    final_dir: FsLocation = Field(description="where datasets are published, <final_dir>/<dataset>/...: a path or a URL (s3://bucket/events)")


class FsPublisher(DataPublisher):
    """Publishes to any filesystem (local, `hdfs://`, `s3://` …); exactly-once with the commit store."""

    Settings = FsPublisherSettings

    def commit_steps(self, dataset: str, files: list[OutputFile]) -> list[CommitStep]:
        final = self.settings.final_dir
        return [publish_step(f.path, free_destination(final / f.rel_path, f), f.size, f.checksum) for f in files]

    def claim(self, job: str, claimant: Claimant, make: bool) -> None:
        """The job's claim on `final_dir`, made by the first run to publish there (`make`); a run from another work
        directory is refused: its positions are its own, so it would publish again what the first one published. A
        claim that cannot be written yet (a full disk, a bucket not made yet) is a warning, made by a later run: this
        work directory is the one publishing."""
        final = self.settings.final_dir
        location = f"{final}/{CLAIMS}"
        scheme = location.split("://", 1)[0].lower() if "://" in location else "file"
        blobs = open_blobs(location, {scheme: options_for(scheme)})
        key = f"{job}.json"
        body = json.dumps({"job": job, "work_dir_id": claimant.work_dir_id, "work_dir": claimant.work_dir,
                           "host": claimant.host, "claimed": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")})
        for _ in range(2):
            got = blobs.get(key)
            if got is None:
                if not make:
                    return
                try:
                    blobs.create(key, body.encode())
                    return
                except Conflict:
                    continue  # another driver claimed it meanwhile: read whose claim it is
                except (OSError, StateStoreError) as exc:
                    log.warning("job %s: the claim %s/%s could not be written (%s); the next run writes it", job,
                                blobs.where, key, exc)
                    return
            try:
                held = json.loads(got.data)
                owner, where = held["work_dir_id"], f"{held.get('work_dir')} on {held.get('host')}"
            except (ValueError, KeyError, TypeError):
                raise CommitError(f"{blobs.locate(key)}, the claim of job {job!r} on {final}, is unreadable; nothing "
                                  "is published there until it is restored or deleted") from None
            if owner == claimant.work_dir_id:
                return
            raise CommitError(
                f"{final} holds what job {job!r} published from another work directory ({where}); this one "
                f"({claimant.work_dir} on {claimant.host}) keeps positions of its own and would publish those records "
                f"again, so nothing is read. Run the job from that work directory (on several hosts: a work_dir they "
                f"share, and job.lease.url). If that directory is gone for good, set this one's positions to what "
                f"{final} holds (`gobblin-py state reset`), then delete {blobs.locate(key)}")
        raise CommitError(f"{blobs.locate(key)}: the claim of job {job!r} kept changing; try again")


SUFFIXES = (".errors.jsonl",)
"""File name endings kept whole when a checksum is put before them (readers find error files by it)."""


def free_destination(dst: Location, f: OutputFile) -> Location:
    """`dst`, unless it holds another file than `f` (the read of a range after `state reset`, its source changed):
    then `<name>.r<f's crc32c>.<ext>` beside it, a name of `f`'s bytes alone (see the module's docstring)."""
    fs = filesystem_for(dst)
    if not fs.exists(dst) or (fs.size(dst) == f.size and fs.checksum(dst) == f.checksum):
        return dst
    name = str(dst).rsplit("/", 1)[-1]
    ext = next((x for x in SUFFIXES if name.endswith(x)), "." + name.rsplit(".", 1)[-1] if "." in name else "")
    stem = name[: len(name) - len(ext)] if ext else name
    beside = Location(f"{str(dst)[: len(str(dst)) - len(name)]}{stem}.r{f.checksum}{ext}")
    log.info("%s holds another file than this commit's (a range read again after state reset): published as %s",
             dst, beside)
    return beside

