"""Committables: a writer's closed staged files moved into task output (fsynced there, or uploaded and checked)
and described as `OutputFile`s, the one path for data files and error files alike.

A task of many work units (a slot's tables) defers the fsyncs: each work unit's moved files and new directories go
on an `unsynced` list, fsynced all at once when the task ends (`attempt.run_task`), before any result naming them
leaves the task: a commit record names a file only once the driver has the result, so the order is kept, with one
round of fsyncs a task instead of one a work unit."""

from __future__ import annotations

import os
from pathlib import Path

from gobblin_py.api import DataWriter, OutputFile, WriterTarget
from gobblin_py.durable import file_checksum, fsync_all, makedirs_durably
from gobblin_py.fs import Location, filesystem_for


def commit_staged(staged: Path, dest: Location | Path | str, rel_path: str, records: int, kind: str = "data",
                  dataset: str = "", branch: str = "", unsynced: list[Path] | None = None) -> OutputFile:
    """Move a closed staged file into task output (fsynced there, or uploaded to a remote store and checked),
    and describe it as a committable. `unsynced`: a local file's fsyncs (the file, its directory, each directory made
    for it) are appended there instead, for the caller to `fsync_all` before the committable leaves the task."""
    dest = Location(dest)
    size, checksum = staged.stat().st_size, file_checksum(staged)
    if dest.is_local:
        new_dirs: list[Path] = []
        makedirs_durably(dest.path.parent, defer=new_dirs)
        os.replace(staged, dest)
        # the content, the entry and each new directory's entry durable before a commit record names the file, all at
        # once (one cache flush, not five one after another): until then no record names it, and a crash leaves it to
        # the orphan clean-up
        synced = [dest.path, dest.path.parent, *new_dirs]
        if unsynced is not None:
            unsynced.extend(synced)
        else:
            fsync_all(synced)
    else:
        fs = filesystem_for(dest)
        fs.put(staged, dest)
        uploaded = fs.size(dest)
        if uploaded != size:
            raise OSError(f"upload of {staged} to {dest} left {uploaded} bytes, not {size}")
        staged.unlink()
    return OutputFile(path=str(dest), rel_path=rel_path, records=records, size=size, checksum=checksum, kind=kind,
                      dataset=dataset, branch=branch)


def commit_writer(writer: DataWriter, target: WriterTarget, unsynced: list[Path] | None = None) -> list[OutputFile]:
    """Close the writer, then move every staged file it returns into task output as a committable (`unsynced`: as
    `commit_staged`)."""
    return commit_closed(writer.close(), target, unsynced)


def commit_closed(closed: list[tuple[Path, int]], target: WriterTarget,
                  unsynced: list[Path] | None = None) -> list[OutputFile]:
    """Move closed staged files under `target.staging_dir` (with their records, as `DataWriter.close` returns them)
    into task output as committables (`unsynced`: as `commit_staged`)."""
    out: list[OutputFile] = []
    root = Location(target.task_output_dir)
    for staged, records in closed:
        rel = staged.relative_to(target.staging_dir)
        out.append(commit_staged(staged, root / rel, rel.as_posix(), records, dataset=target.dataset, branch=target.branch,
                                  unsynced=unsynced))
    return out
